import ArgumentParser
import PurchaseLedgerLocation

extension LedgerCommand {
    struct Export: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write the log as JSON Lines to standard output.",
            discussion: """
                One canonical line per event, in log order: fields in the format's order, timestamps in UTC. \
                The output re-imports to the same log, and exporting that gives the same bytes.

                Example:
                  ledger export ./ledger > events.jsonl
                """)

        @OptionGroup var location: LocationArgument

        func run() async throws {
            try await runOrFail {
                let log = try location.openLog()
                defer { log.close() }
                try log.exportJSONLines { try Console.output(bytes: $0) }
            }
        }
    }
}
