import ArgumentParser
import PurchaseLedgerLocation

extension LedgerCommand {
    struct History: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List an account's events in log order.",
            discussion: """
                Examples:
                  ledger history --account player-9 ./ledger
                  ledger history --account player-9 --after 1200 --limit 50 --json ./ledger
                """)

        @Option(name: .shortAndLong, help: ArgumentHelp("The account.", valueName: "account"))
        var account: String

        @Option(help: ArgumentHelp("Start after this position.", valueName: "position"))
        var after: UInt64 = 0

        @Option(name: [.customShort("n"), .long], help: ArgumentHelp("Print at most this many events (default: all).", valueName: "count"))
        var limit: Int?

        @OptionGroup var format: OutputFormat
        @OptionGroup var location: LocationArgument

        func validate() throws {
            if let limit, limit < 1 { throw ValidationError("--limit must be at least 1") }
        }

        func run() async throws {
            try await runOrFail {
                let log = try location.openLog()
                defer { log.close() }
                let records = try log.history(account: account, after: after, limit: limit ?? .max)
                if format.json {
                    try Console.output(records.map { $0.jsonLine + "\n" }.joined())
                } else if records.isEmpty {
                    try Console.output("no events for account \(account)\n")
                } else {
                    try Console.output(Self.table(records, style: .output))
                }
            }
        }

        /// One line per event, in columns: position (right-aligned), time, type, what happened, and
        /// the event id.
        ///
        ///     position  at                    type                 detail
        ///           12  2026-03-01T09:30:00Z  transactionUpdated   p1 purchased transaction 1000…  [e12]
        static func table(_ records: [LogRecord], style: Style) -> String {
            let rows = records.map { record in
                (position: String(record.position), at: record.event.at.description, type: record.event.type.rawValue,
                 detail: detail(of: record.event), id: record.event.id)
            }
            let positionWidth = max("position".count, rows.map(\.position.count).max() ?? 0)
            let atWidth = max("at".count, rows.map(\.at.count).max() ?? 0)
            let typeWidth = max("type".count, rows.map(\.type.count).max() ?? 0)
            var out = style.dim("position".padding(left: positionWidth) + "  " + "at".padding(to: atWidth) + "  "
                + "type".padding(to: typeWidth) + "  detail") + "\n"
            for row in rows {
                out += row.position.padding(left: positionWidth) + "  " + style.dim(row.at.padding(to: atWidth)) + "  "
                    + style.cyan(row.type.padding(to: typeWidth)) + "  " + row.detail + "  " + style.dim("[\(row.id)]") + "\n"
            }
            return out
        }

        /// What an event says, in a few words: `p1 purchased transaction 1000…`.
        static func detail(of event: Event) -> String {
            var detail: [String] = []
            switch event.payload {
            case .paymentAdded(let added):
                detail = [added.payment, added.product] + (added.quantity.map { ["×\($0)"] } ?? [])
            case .transactionUpdated(let update):
                detail = [update.payment, update.state.rawValue]
                if let transaction = update.transaction { detail.append("transaction \(transaction)") }
                if let original = update.originalTransaction { detail.append("original \(original)") }
                if let error = update.error { detail.append("error \(error)") }
                if let expiresAt = update.expiresAt { detail.append("expires \(expiresAt)") }
                if let product = update.product { detail.append(product) }
            case .downloadUpdated(let download):
                detail = [download.payment, "download \(download.download)", download.state.rawValue,
                          "\(Int(((download.progress ?? 0) * 100).rounded()))%"]
            case .transactionFinished(let finished):
                detail = [finished.payment]
            case .consumed(let consumed):
                detail = ["\(consumed.amount) \(consumed.item)"]
            case .revoked(let revoked):
                detail = ["transaction \(revoked.transaction)"] + (revoked.reason.map { ["(\($0))"] } ?? [])
            case .storeTransaction(let fact):
                detail = ["transaction \(fact.transaction)", fact.product]
                if let environment = fact.environment { detail.append(environment.rawValue) }
                if let ownership = fact.ownership { detail.append(ownership.rawValue) }
                if let expiresAt = fact.expiresAt { detail.append("expires \(expiresAt)") }
                if let revokedAt = fact.revokedAt { detail.append("revoked \(revokedAt)") }
                if fact.upgraded == true { detail.append("upgraded") }
            case .renewalInfo(let info):
                detail = ["original \(info.originalTransaction)"]
                if let willRenew = info.willRenew { detail.append(willRenew ? "renews" : "will not renew") }
                if let renewsTo = info.renewsTo { detail.append("to \(renewsTo)") }
                if info.billingRetry == true { detail.append("billing retry") }
                if let grace = info.gracePeriodEndsAt { detail.append("grace until \(grace)") }
            case .transferred(let transfer):
                detail = ["original \(transfer.originalTransaction)", "from \(transfer.from) to \(transfer.to)"]
            case .shared(let transfer):
                detail = ["original \(transfer.originalTransaction)", "shared by \(transfer.from)"]
            case .forgotten(let forgotten):
                detail = ["forgotten at the request of \(forgotten.requestedBy)"]
            case .consumptionConsent(let consent):
                detail = [consent.consented ? "consented" : "declined"]
            case .consumptionRequest(let request):
                detail = ["transaction \(request.transaction)"] + (request.reason.map { ["(\($0))"] } ?? [])
            case .consumptionAnswer(let answer):
                detail = ["transaction \(answer.transaction)", answer.outcome.rawValue]
                if let delivery = answer.deliveryStatus { detail.append(delivery) }
                if let share = answer.consumptionPercentage { detail.append("\(Double(share) / 1000)% used") }
                if let status = answer.status { detail.append("HTTP \(status)") }
            case .appTransaction(let info):
                detail = ["app transaction \(info.appTransaction)"]
                if let date = info.originalPurchasedAt { detail.append("first got \(date)") }
                if let version = info.originalApplicationVersion { detail.append("version \(version)") }
            case .appStoreCall(let call):
                detail = [call.call.rawValue, "transaction \(call.transaction)", call.outcome.rawValue]
                if let token = call.appAccountToken { detail.append("token \(token)") }
                if let status = call.status { detail.append("HTTP \(status)") }
            }
            return detail.joined(separator: " ")
        }
    }
}
