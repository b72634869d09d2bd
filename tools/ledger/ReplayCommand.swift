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
                  ledger replay --account 7e3fb20b-4cdb-47cc-936d-99d65f608138 --timeline ./ledger
                  ledger replay --json --environment Production postgres://ledger@db/store
                """)

        @Flag(name: .shortAndLong, help: "Print the interchange format's JSON shape.")
        var json = false

        @Option(name: .shortAndLong, help: ArgumentHelp("Replay only the events at positions 1 to <position>.", valueName: "position"))
        var position: UInt64?

        @Option(help: ArgumentHelp("Answer what each account had at this time (RFC 3339; default: now).", valueName: "time"))
        var asOf: String?

        @Option(name: .shortAndLong, help: ArgumentHelp("Print only this account (read from its own history: fast at any log length).", valueName: "account"))
        var account: String?

        @Option(name: [.customShort("e"), .customLong("environment")], help: ArgumentHelp(
            "Count only the store's reports from this environment (Production, Sandbox, Xcode, LocalTesting); repeatable. Default: all.",
            valueName: "environment"))
        var environments: [String] = []

        @Flag(help: "Replay the whole log instead of starting from the newest snapshot (the audit path).")
        var noSnapshot = false

        @Flag(help: "With --account: when each product was owned, interval by interval, and what started and ended each.")
        var timeline = false

        @Flag(help: "With --account: answer as of the newest checkpoint, with the proof of every event of the account up to it (JSON; exit 1 when there is nothing to prove).")
        var proof = false

        @OptionGroup var location: LocationArgument

        func validate() throws {
            if timeline, account == nil { throw ValidationError("--timeline needs --account") }
            if proof, account == nil || timeline || position != nil || noSnapshot {
                throw ValidationError("--proof needs --account, without --timeline, --position or --no-snapshot: it answers at the newest checkpoint")
            }
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
            if proof, let account {
                try await printProof(of: account, asOf: time, excluding: excluded)
                return
            }
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
                    let projections = try log.projection(
                        of: account, atPosition: at, asOf: time, excluding: excluded, timeline: timeline).map { [$0] } ?? []
                    if json {
                        try AccountProjection.writeReplayJSON(position: at, projections) { try Console.output(bytes: $0) }
                        try Console.output("\n")
                    } else {
                        try Console.output(Self.text(projections, position: at, asOf: time, style: .output, summarized: false))
                    }
                } else {
                    let progress = ProgressLine("replaying", unit: "events")
                    Interruption.onInterrupt {
                        "replay stopped near position \(grouped(progress.done)) of \(grouped(at)); it changes nothing"
                    }
                    let state = try log.state(at: at, useSnapshots: !noSnapshot) { progress.update($0, of: at) }
                    progress.clear()
                    let entitlements = try log.catalog().entitlements
                    if json {
                        // Written as it is built: the document of every account is never whole in memory.
                        try state.writeReplayJSON(asOf: time, excluding: excluded, entitlements: entitlements) { try Console.output(bytes: $0) }
                        try Console.output("\n")
                    } else {
                        let projections = state.projections(asOf: time, excluding: excluded, entitlements: entitlements)
                        try Console.output(Self.text(projections, position: at, asOf: time, style: .output))
                    }
                }
            }
        }

        /// `--proof`: the account's replay document at the newest checkpoint, its object with
        /// `"proof"`; exit 1 when there is nothing to prove, 2 when the account has too many events.
        func printProof(of account: String, asOf time: Timestamp, excluding excluded: Set<StoreEnvironment>) async throws {
            let refusal = try await runOrFail { () async throws -> AccountProof.Refusal? in
                let log = try location.openLog()
                defer { log.close() }
                do {
                    let (projection, proof) = try log.provenProjection(of: account, asOf: time, excluding: excluded)
                    try Console.output(projection.replayJSON(position: proof.checkpoint.size) { proof.writeMember(to: &$0) } + "\n")
                    return nil
                } catch let refusal as AccountProof.Refusal {
                    return refusal
                }
            }
            switch refusal {
            case nil:
                return
            case .noCheckpoint?:
                Console.error("ledger: no checkpoint has been signed yet (ledger checkpoint): nothing can be proven")
                throw ExitCode.damaged
            case .nothingToProve?:
                Console.error("ledger: the ledger has no event of this account up to its newest checkpoint")
                throw ExitCode.damaged
            case .tooLarge(let limit)?:
                Console.error("ledger: the account has more than \(limit) events up to the newest checkpoint: too many to prove at once")
                throw ExitCode.couldNotRun
            }
        }

        /// A summary of the whole (unless one account was asked for), then a readable
        /// account-by-account listing.
        static func text(_ projections: [AccountProjection], position: UInt64, asOf time: Timestamp, style: Style, summarized: Bool = true) -> String {
            var out = style.bold("position \(grouped(position)), as of \(time)") + "\n"
            if summarized { out += summary(projections) + "\n" }
            if !summarized, projections.isEmpty { out += "no events for this account\n" }
            let none = style.dim("none")
            for projection in projections {
                out += "\n" + style.bold(projection.account) + "\n"
                out += "  entitlements: \(projection.entitlements.isEmpty ? none : projection.entitlements.joined(separator: ", "))\n"
                if !projection.namedEntitlements.isEmpty {
                    // `pro (pro.yearly until 2027-01-01T00:00:00Z), family: none`
                    let named = projection.namedEntitlements.map { entitlement in
                        guard let product = entitlement.product else { return "\(entitlement.name): \(none)" }
                        return style.green(entitlement.name) + " (\(product)" + (entitlement.expiresAt.map { " until \($0)" } ?? "") + ")"
                    }
                    out += "  named:        \(named.joined(separator: ", "))\n"
                }
                let balances = projection.balances.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }
                out += "  balances:     \(balances.isEmpty ? none : balances.joined(separator: ", "))\n"
                if projection.unfinished.isEmpty {
                    out += "  unfinished:   \(none)\n"
                } else {
                    out += "  unfinished:\n"
                    for entry in projection.unfinished {
                        var line = "    \(entry.payment)  \(entry.product)  \(style.yellow(entry.state.rawValue))"
                        if let transaction = entry.transaction { line += "  transaction \(transaction)" }
                        for download in entry.downloads {
                            line += "  [download \(download.id) \(download.state.rawValue) \(Int((download.progress * 100).rounded()))%]"
                        }
                        if let environment = entry.environment, environment != .production { line += "  (\(environment.rawValue))" }
                        out += line + "\n"
                    }
                }
                for subscription in projection.subscriptions {
                    let status = "\(subscription.status) (\(subscription.status.rawValue))"
                    let shown = switch subscription.status {
                    case .active: style.green(status)
                    case .revoked: style.red(status)
                    case .billingRetry, .gracePeriod: style.yellow(status)
                    default: style.dim(status)
                    }
                    var line = "  subscription: \(subscription.group)  \(subscription.product)  \(shown)"
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
                    if purchase.isRevoked { line += "  " + style.red("revoked") }
                    if report.ownership == .familyShared { line += "  family shared" }
                    if let environment = report.environment, environment != .production { line += "  (\(environment.rawValue))" }
                    out += line + "\n"
                }
                if let timeline = projection.timeline { out += TimelineChart.text(timeline, style: style) }
            }
            return out
        }

        /// `3 accounts · 2 with entitlements (4 in all) · 1 unfinished transaction · 1 active subscription`
        static func summary(_ projections: [AccountProjection]) -> String {
            func count(_ value: Int, _ one: String, _ many: String) -> String { "\(grouped(value)) \(value == 1 ? one : many)" }
            let entitled = projections.filter { !$0.entitlements.isEmpty }
            let entitlements = entitled.reduce(0) { $0 + $1.entitlements.count }
            let unfinished = projections.reduce(0) { $0 + $1.unfinished.count }
            let active = projections.reduce(0) { $0 + $1.subscriptions.filter(\.status.grantsAccess).count }
            var parts = [count(projections.count, "account", "accounts")]
            parts.append("\(grouped(entitled.count)) with entitlements (\(grouped(entitlements)) in all)")
            parts.append(count(unfinished, "unfinished transaction", "unfinished transactions"))
            if active > 0 { parts.append(count(active, "active subscription", "active subscriptions")) }
            return parts.joined(separator: " · ")
        }
    }
}
