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

        @Option(help: ArgumentHelp("The account.", valueName: "A"))
        var account: String

        @Option(help: ArgumentHelp("Start after this position.", valueName: "N"))
        var after: UInt64 = 0

        @Option(help: ArgumentHelp("Print at most this many events (default: all).", valueName: "N"))
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
                var out = ""
                for record in records {
                    if format.json {
                        out += record.jsonLine + "\n"
                    } else {
                        out += Self.describe(record) + "\n"
                    }
                }
                if records.isEmpty && !format.json { out = "no events for account \(account)\n" }
                try Console.output(out)
            }
        }

        /// `  12  2026-03-01T09:30:00Z  transactionUpdated  p1 purchased transaction 1000…`
        static func describe(_ record: LogRecord) -> String {
            let event = record.event
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
            case .consumptionConsent(let consent):
                detail = [consent.consented ? "consented" : "declined"]
            case .consumptionRequest(let request):
                detail = ["transaction \(request.transaction)"] + (request.reason.map { ["(\($0))"] } ?? [])
            case .consumptionAnswer(let answer):
                detail = ["transaction \(answer.transaction)", answer.outcome.rawValue]
                if let delivery = answer.deliveryStatus { detail.append(delivery) }
                if let share = answer.consumptionPercentage { detail.append("\(Double(share) / 1000)% used") }
                if let status = answer.status { detail.append("HTTP \(status)") }
            }
            let position = String(record.position)
            let padded = String(repeating: " ", count: max(0, 8 - position.count)) + position
            return "\(padded)  \(event.at)  \(event.type.rawValue)  \(detail.joined(separator: " "))  [\(event.id)]"
        }
    }
}
