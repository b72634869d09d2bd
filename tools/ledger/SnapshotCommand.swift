import ArgumentParser
import Logging
import PurchaseLedgerLocation

extension LedgerCommand {
    struct Snapshot: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write a snapshot of the projections now, so that the next open replays less.",
            discussion: """
                Examples:
                  ledger snapshot ./ledger
                  ledger snapshot --json postgres://ledger@db/store
                """)

        @OptionGroup var format: OutputFormat
        @OptionGroup var location: LocationArgument

        func run() async throws {
            try await runOrFail {
                var configuration = Ledger.Configuration()
                configuration.logger.logLevel = .warning
                configuration.snapshotOnClose = false
                let ledger = try location.openLedger(configuration: configuration)
                let position: UInt64?
                do {
                    position = try await ledger.writeSnapshot()
                } catch {
                    await ledger.close()
                    throw error
                }
                await ledger.close()
                if format.json {
                    // {"position": 1000, "written": true}: written is false when the newest snapshot was already there.
                    var writer = JSONWriter(spaced: true)
                    writer.beginObject()
                    writer.member("position", Int64(position ?? ledger.position))
                    writer.member("written", position != nil)
                    writer.endObject()
                    try Console.output(writer.string + "\n")
                } else if let position {
                    try Console.output("wrote a snapshot at position \(grouped(position))\n")
                } else {
                    try Console.output("the newest snapshot is already at position \(grouped(ledger.position))\n")
                }
            }
        }
    }
}
