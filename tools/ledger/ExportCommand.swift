import ArgumentParser
import PurchaseLedgerLocation

extension LedgerCommand {
    struct Export: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write the log as JSON Lines to standard output.",
            discussion: """
                One canonical line per event, in log order: fields in the format's order, timestamps in UTC. \
                The output re-imports to the same log, and exporting that gives the same bytes.
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

    struct Verify: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Check every record and index of a ledger; exit 0 only if the log is intact.",
            discussion: """
                Checks each record's CRC-32C, format version, position and encoding, that positions run \
                without a gap, that every event obeys the rules against the log before it, and that the \
                indexes agree with the log. Reports the first damaged position and the kind of damage; exits 1.
                """)

        @OptionGroup var format: OutputFormat
        @OptionGroup var location: LocationArgument

        func run() async throws {
            let report = try await runOrFail {
                let log = try location.openLog()
                defer { log.close() }
                return log.verify()
            }
            try await runOrFail {
                if format.json {
                    var fields = ["\"intact\": \(report.isIntact)", "\"intactRecords\": \(report.intactRecords)"]
                    if let damage = report.damage {
                        fields.append("\"damage\": \"\(damage.kind.rawValue)\"")
                        if let position = damage.position { fields.append("\"position\": \(position)") }
                    }
                    try Console.output("{" + fields.joined(separator: ", ") + "}\n")
                } else if let damage = report.damage {
                    try Console.output("damaged: \(damage)\n")
                    try Console.output("\(grouped(report.intactRecords)) records intact before it\n")
                } else {
                    try Console.output("intact: \(grouped(report.intactRecords)) records, indexes and rules check out\n")
                }
            }
            if !report.isIntact { throw ExitCode.damaged }
        }
    }
}
