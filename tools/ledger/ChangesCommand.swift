import ArgumentParser
import PurchaseLedger
import PurchaseLedgerLocation

extension LedgerCommand {
    struct Changes: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print the change feed: each account change, with the projection after it.",
            discussion: """
                The feed is derived from the log and the ledger's clock: the same changes, in the same order, \
                with the same ids, however often it is read. A change is an event that changed an account's \
                projection, or time passing an instant where it changes (an expiry, a grace period's end). \
                --follow keeps printing as the ledger's writer commits. See docs/FEEDS.md.

                Examples:
                  ledger changes ./ledger
                  ledger changes --after 1200 --account player-9 --json ./ledger
                  ledger changes --follow -j postgres://ledger@db/store
                """)

        @Option(help: ArgumentHelp("Start after this cursor (a change's id, or a position).", valueName: "cursor"))
        var after: String?

        @Option(name: .shortAndLong, help: ArgumentHelp("Print only this account's changes.", valueName: "account"))
        var account: String?

        @Flag(name: .shortAndLong, help: "Keep printing new changes as they are committed (Ctrl-C stops).")
        var follow = false

        @OptionGroup var format: OutputFormat
        @OptionGroup var location: LocationArgument

        func validate() throws {
            if let after, FeedCursor(after) == nil {
                throw ValidationError("--after must be a change's id or a position, such as 1200 (got \"\(after)\")")
            }
        }

        func run() async throws {
            let cursor = after.flatMap { FeedCursor($0) } ?? .start
            try await runOrFail {
                let log = try location.openLog()
                defer { log.close() }
                Interruption.onInterrupt { "stopped following the change feed" }
                var printed = 0
                var output = BatchedOutput()
                for try await change in log.changes(after: cursor, follow: follow) {
                    if let account, !change.account.utf8.elementsEqual(account.utf8) { continue }
                    if format.json { try output.append(change.appendJSONLine) } else { try output.append(Self.line(change, style: .output)) }
                    // A follower shows each change as it comes.
                    if follow { try output.flush() }
                    printed += 1
                }
                try output.flush()
                if !format.json, printed == 0 { try Console.output("no changes after \(cursor)\n") }
            }
        }

        /// `12  u1  event e12 (storeTransaction)  +pro.month, subscription pro 2→1  [12.dTE]`
        static func line(_ change: LedgerChange, style: Style) -> String {
            let cause = switch change.cause {
            case .event(let id, let type): "event \(id) (\(type.rawValue))"
            case .time(let instant): "time \(instant)"
            }
            let differences = change.differences.map { difference in
                switch difference {
                case .entitlementGranted(let product): style.green("+\(product)")
                case .entitlementRevoked(let product, let reason): style.red("-\(product) (\(reason.rawValue))")
                case .entitlementExpired(let product): style.yellow("-\(product) (expired)")
                case .namedEntitlement(let name, let from, let to):
                    "\(name) \(from ?? "none")→\(to ?? "none")"
                case .subscriptionStatus(let group, let from, let to):
                    "subscription \(group) \(from.map { "\($0)" } ?? "none")→\(to.map { "\($0)" } ?? "none")"
                case .balance(let item, let delta): "\(item) \(delta > 0 ? "+" : "")\(delta)"
                case .transactionUnfinished(let payment): "unfinished \(payment)"
                case .transactionFinished(let payment): "finished \(payment)"
                }
            }
            return "\(change.position)  \(style.bold(change.account))  \(cause)  "
                + (differences.isEmpty ? style.dim("no difference shown") : differences.joined(separator: ", "))
                + "  " + style.dim("[\(change.id)]") + "\n"
        }
    }
}
