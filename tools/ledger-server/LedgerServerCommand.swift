import ArgumentParser
import Foundation
import Hummingbird
import Logging
import PurchaseLedgerServer
import ServiceLifecycle

/// `ledger-server --config FILE`: the ledger over HTTP until SIGTERM or SIGINT, then a graceful
/// stop (in-flight requests answered, queued appends committed, LMDB closed).
@main
struct LedgerServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ledger-server",
        abstract: "Serve a purchase ledger over HTTP, with App Store Server Notifications V2.",
        discussion: "The configuration file (JSON) names the ledger directory, its catalog, the address to bind, the API keys and their scopes, the limits and the App Store settings; see README.md.")

    @Option(name: .long, help: "The configuration file (JSON).")
    var config: String

    @Option(name: .long, help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel: String = "info"

    func validate() throws {
        guard Logger.Level(rawValue: logLevel) != nil else {
            throw ValidationError("--log-level must be one of trace, debug, info, notice, warning, error, critical")
        }
    }

    func run() async throws {
        var logger = Logger(label: "ledger-server")
        logger.logLevel = Logger.Level(rawValue: logLevel) ?? .info
        let configuration: ServerConfiguration
        let application: any ApplicationProtocol
        do {
            configuration = try ServerConfiguration.load(path: config)
            application = try await LedgerServer.application(configuration: configuration, logger: logger)
        } catch {
            logger.critical("cannot start", metadata: ["error": "\(error)"])
            throw ExitCode(1)
        }
        logger.info("serving", metadata: LedgerServer.startupMetadata(configuration))
        try await application.runService()
    }
}
