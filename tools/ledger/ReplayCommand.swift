import ArgumentParser
import PurchaseLedger
import PurchaseLedgerLocation

extension LedgerCommand {
    struct Replay: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Rebuild the projections from the log and print what each account owns.",
            discussion: """
                The catalog in force is part of the ledger, so a replay needs no outside input. It starts from \
                the newest snapshot at or before the position asked for, and replays the log after it; \
                --no-snapshot replays the whole log. With --account, only that account's own history is read.

                Examples:
                  ledger replay --json ./ledger
                  ledger replay --account 7e3fb20b-4cdb-47cc-936d-99d65f608138 --position 1200 ./ledger
                  ledger replay --json --environment Production postgres://ledger@db/store
                """)

        @Flag(help: "Print the interchange format's JSON shape.")
        var json = false

        @Option(help: ArgumentHelp("Replay only the first N events.", valueName: "N"))
        var position: UInt64?

        @Option(help: ArgumentHelp("The time to judge subscription expiry against (RFC 3339; default: now).", valueName: "T"))
        var asOf: String?

        @Option(help: ArgumentHelp("Print only this account.", valueName: "A"))
        var account: String?

        @Option(name: .customLong("environment"), help: ArgumentHelp(
            "Count only the store's reports from this environment (Production, Sandbox, Xcode, LocalTesting); repeatable. Default: all.",
            valueName: "E"))
        var environments: [String] = []

        @Flag(help: "Replay the whole log instead of starting from the newest snapshot (the audit path).")
        var noSnapshot = false

        @OptionGroup var location: LocationArgument

        func validate() throws {
            if let asOf { _ = try parseTimestamp(asOf) }
            _ = try excluded()
        }

        /// The environments whose store reports are left out: all but those given.
        func excluded() throws -> Set<StoreEnvironment> {
            do {
                return try StoreEnvironment.excluded(keeping: environments)
            } catch {
                throw ValidationError("--\(error)")
            }
        }

        func run() async throws {
            let time = try asOf.map(parseTimestamp) ?? .now()
            let excluded = try excluded()
            try await runOrFail {
                let log = try location.openLog()
                defer { log.close() }
                let last = try log.lastPosition()
                if let position, position > last {
                    throw CommandFailure(message: "--position \(position) is beyond the end of the log (\(last) events)")
                }
                let at = position ?? last
                if let account {
                    // One account: from its own history, not a replay of every account.
                    let projections = try log.projection(of: account, atPosition: at, asOf: time, excluding: excluded).map { [$0] } ?? []
                    try Console.output(json ? AccountProjection.replayJSON(position: at, projections) + "\n" : Self.text(projections, position: at, asOf: time))
                } else {
                    let state = try log.state(at: at, useSnapshots: !noSnapshot)
                    try Console.output(json
                        ? state.replayJSON(asOf: time, excluding: excluded) + "\n"
                        : Self.text(state.projections(asOf: time, excluding: excluded), position: at, asOf: time))
                }
            }
        }

        /// A readable account-by-account listing.
        static func text(_ projections: [AccountProjection], position: UInt64, asOf time: Timestamp) -> String {
            var out = "position \(position), as of \(time)\n"
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
                        if let environment = entry.environment, environment != .production { line += "  (\(environment.rawValue))" }
                        out += line + "\n"
                    }
                }
                for subscription in projection.subscriptions {
                    var line = "  subscription: \(subscription.group)  \(subscription.product)  \(subscription.status) (\(subscription.status.rawValue))"
                    if let expiresAt = subscription.expiresAt { line += "  expires \(expiresAt)" }
                    if let grace = subscription.gracePeriodEndsAt { line += "  grace until \(grace)" }
                    if let renewsTo = subscription.renewsTo, subscription.willRenew == true { line += "  renews to \(renewsTo)" }
                    if subscription.willRenew == false { line += "  will not renew" }
                    if let environment = subscription.environment, environment != .production { line += "  (\(environment.rawValue))" }
                    out += line + "\n"
                }
                for purchase in projection.storeTransactions {
                    let report = purchase.report
                    var line = "  store: transaction \(report.transaction)  \(report.product)"
                    if purchase.isRevoked { line += "  revoked" }
                    if report.ownership == .familyShared { line += "  family shared" }
                    if let environment = report.environment, environment != .production { line += "  (\(environment.rawValue))" }
                    out += line + "\n"
                }
            }
            return out
        }
    }
}
