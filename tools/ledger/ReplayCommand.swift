import ArgumentParser
import PurchaseLedgerLocation

extension LedgerCommand {
    struct Replay: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Rebuild the projections from the log and print what each account owns.",
            discussion: """
                The catalog in force is part of the ledger, so a replay needs no outside input. It starts from \
                the newest snapshot at or before the position asked for, and replays the log after it; \
                --no-snapshot replays the whole log.
                """)

        @Flag(help: "Print the interchange format's JSON shape.")
        var json = false

        @Option(help: ArgumentHelp("Replay only the first N events.", valueName: "N"))
        var position: UInt64?

        @Option(help: ArgumentHelp("The time to judge subscription expiry against (RFC 3339; default: now).", valueName: "T"))
        var asOf: String?

        @Option(help: ArgumentHelp("Print only this account.", valueName: "A"))
        var account: String?

        @Flag(help: "Replay the whole log instead of starting from the newest snapshot (the audit path).")
        var noSnapshot = false

        @OptionGroup var location: LocationArgument

        func validate() throws {
            if let asOf { _ = try parseTimestamp(asOf) }
        }

        func run() async throws {
            let time = try asOf.map(parseTimestamp) ?? .now()
            try await runOrFail {
                let log = try location.openLog()
                defer { log.close() }
                let last = try log.lastPosition()
                if let position, position > last {
                    throw CommandFailure(message: "--position \(position) is beyond the end of the log (\(last) events)")
                }
                let state = try log.state(at: position ?? last, useSnapshots: !noSnapshot)
                if json {
                    try Console.output(state.replayJSON(asOf: time, account: account) + "\n")
                } else {
                    try Console.output(Self.text(state, asOf: time, account: account))
                }
            }
        }

        /// A readable account-by-account listing.
        static func text(_ state: LedgerState, asOf time: Timestamp, account: String?) -> String {
            var out = "position \(state.position), as of \(time)\n"
            let projections = account.map { state.projection(of: $0, asOf: time).map { [$0] } ?? [] }
                ?? state.projections(asOf: time)
            if projections.isEmpty { out += "(no accounts)\n" }
            for projection in projections {
                out += "\n\(projection.account)\n"
                out += "  entitlements: \(projection.entitlements.isEmpty ? "none" : projection.entitlements.joined(separator: ", "))\n"
                let balances = projection.balances.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }
                out += "  balances:     \(balances.isEmpty ? "none" : balances.joined(separator: ", "))\n"
                if projection.unfinished.isEmpty {
                    out += "  unfinished:   none\n"
                } else {
                    out += "  unfinished:\n"
                    for entry in projection.unfinished {
                        var line = "    \(entry.payment)  \(entry.product)  \(entry.state.rawValue)"
                        if let transaction = entry.transaction { line += "  transaction \(transaction)" }
                        for download in entry.downloads {
                            line += "  [download \(download.id) \(download.state.rawValue) \(Int((download.progress * 100).rounded()))%]"
                        }
                        out += line + "\n"
                    }
                }
            }
            return out
        }
    }
}
