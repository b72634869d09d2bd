import ArgumentParser
import Foundation
import Logging
import PurchaseLedgerLocation
import PurchaseLedgerAppStore

extension LedgerCommand {
    struct Attribute: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Give the App Store notifications that had no account to the accounts that now hold their transactions.",
            discussion: """
                A notification without an appAccountToken, about a transaction no account held yet, waits in the \
                server's audit file (appStore.unattributedNotifications). Once the app has reported the purchase, \
                this runs those notifications again, verified as the server verifies them: the ones that now \
                have an account are appended (a second run appends nothing twice), the others stay in the file. \
                Run it with the server stopped (an LMDB ledger has one writer), or at any time on PostgreSQL.

                Example:
                  ledger attribute --config /etc/ledger-server.json
                """)

        @Option(help: ArgumentHelp("The server's configuration file: its ledger and its appStore section.", valueName: "file"))
        var config: String

        @OptionGroup var format: OutputFormat

        func run() async throws {
            try await runOrFail {
                let server = try ServerConfigurationFile.read(config)
                guard let appStore = server.appStore else {
                    throw CommandFailure(message: "\(config) has no appStore section: no notifications to attribute")
                }
                var configuration = Ledger.Configuration()
                configuration.logger.logLevel = .warning
                let location = LedgerLocation(server.ledger)
                let ledger = try location.openLedger(configuration: configuration)
                let result: AppStoreNotificationHandler.Attribution
                do {
                    let handler = try AppStoreNotificationHandler.configured(by: appStore, ledgerDirectory: location.directory, ledger: ledger)
                    result = try await handler.attributeUnattributed(logger: configuration.logger)
                } catch {
                    await ledger.close()
                    throw error
                }
                await ledger.close()
                if format.json {
                    var writer = JSONWriter(spaced: true)
                    writer.beginObject()
                    writer.member("attributed", Int64(result.attributed))
                    writer.member("kept", Int64(result.kept))
                    writer.endObject()
                    try Console.output(writer.string + "\n")
                } else {
                    try Console.output("attributed \(grouped(UInt64(result.attributed))); \(grouped(UInt64(result.kept))) still without an account\n")
                }
            }
        }
    }
}

/// The parts of `ledger-server`'s configuration file that `attribute` needs: where the ledger
/// is, and the `appStore` section's verification settings (the server checks the rest).
struct ServerConfigurationFile: Decodable {
    var ledger: String
    var appStore: AppStoreVerificationSettings?

    static func read(_ path: String) throws -> ServerConfigurationFile {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw CommandFailure(message: "cannot read \(path): \(error.localizedDescription)")
        }
        do {
            return try JSONDecoder().decode(ServerConfigurationFile.self, from: data)
        } catch {
            throw CommandFailure(message: "\(path) is not a ledger-server configuration (\"ledger\" and \"appStore\"): \(error)")
        }
    }
}
