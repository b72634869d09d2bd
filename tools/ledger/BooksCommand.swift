import ArgumentParser
import PurchaseLedger
import PurchaseLedgerLocation

extension LedgerCommand {
    struct BooksCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "books",
            abstract: "Sales, refunds, proceeds, recognised revenue, subscriptions, MRR and deferred revenue (estimates).",
            discussion: """
                Figures are over periods of valid time [--from, --to), cut --by day, week (ISO, from Monday) or \
                month, in UTC, and at an instant (--at, default now); as known at a position (--position, or \
                --known-at: the last position committed by then). Production only unless --environment says \
                otherwise. Money is in milliunits with --json; these are estimates from the prices Apple signs, \
                not App Store Connect's reports. docs/FORMAT.md, "The books", defines each figure.

                Examples:
                  ledger books --from 2026-01-01T00:00:00Z --to 2026-07-01T00:00:00Z --by month ./ledger
                  ledger books --json --at 2026-04-01T00:00:00Z --known-at 2026-04-01T00:00:00Z ./ledger
                """)

        @Flag(name: .shortAndLong, help: "Print the figures as JSON.")
        var json = false

        @Option(help: ArgumentHelp("The start of the periods (RFC 3339; with --to).", valueName: "time"))
        var from: String?

        @Option(help: ArgumentHelp("The end of the periods, not included (RFC 3339; with --from).", valueName: "time"))
        var to: String?

        @Option(help: ArgumentHelp("Cut the periods by day, week or month (default: one period).", valueName: "unit"))
        var by: BooksQuery.Granularity?

        @Option(help: ArgumentHelp("The instant of the subscriptions, MRR and deferred revenue (RFC 3339; default: now).", valueName: "time"))
        var at: String?

        @Option(name: .shortAndLong, help: ArgumentHelp("As known after the first <position> events.", valueName: "position"))
        var position: UInt64?

        @Option(help: ArgumentHelp("As known at this time: the last position committed by then (RFC 3339).", valueName: "time"))
        var knownAt: String?

        @Option(name: [.customShort("e"), .customLong("environment")], help: ArgumentHelp(
            "Count the store's reports from this environment (Production, Sandbox, Xcode, LocalTesting); repeatable. Default: Production.",
            valueName: "environment"))
        var environments: [String] = []

        @OptionGroup var location: LocationArgument

        func validate() throws {
            if position != nil, knownAt != nil { throw ValidationError("give --position or --known-at, not both") }
            if let knownAt { _ = try parseTimestamp(knownAt) }
            _ = try query()
        }

        func query() throws -> BooksQuery {
            let kept: Set<StoreEnvironment>
            do {
                kept = try StoreEnvironment.named(environments)
            } catch {
                throw ValidationError("--\(error)")
            }
            do {
                return try BooksQuery(
                    from: try from.map(parseTimestamp), to: try to.map(parseTimestamp), by: by, at: try at.map(parseTimestamp) ?? .now(),
                    environments: kept.isEmpty ? [.production] : kept)
            } catch let invalid as BooksQuery.Invalid {
                throw ValidationError("\(invalid.message) (--from, --to, --by, --at)")
            }
        }

        func run() async throws {
            let query = try query()
            let books = try await runOrFail {
                let log = try location.openLog()
                defer { log.close() }
                let last = try log.lastPosition()
                if let position, position > last {
                    throw CommandFailure(message: "--position \(position) is beyond the end of the log (\(last) events)")
                }
                let at = try knownAt.map { try log.position(knownAt: try parseTimestamp($0)) } ?? position ?? last
                let progress = ProgressLine("replaying", unit: "events")
                Interruption.onInterrupt { "books stopped near position \(grouped(progress.done)) of \(grouped(at)); they change nothing" }
                defer { progress.clear() }
                return try log.books(query, atPosition: at) { progress.update($0, of: at) }
            }
            try Console.output(json ? books.json + "\n" : BooksTable.text(books, style: .output))
        }
    }
}

extension BooksQuery.Granularity: ExpressibleByArgument {}

/// The books for people: a table per period and currency, with bars to read at a glance.
enum BooksTable {
    static func text(_ books: Books, style: Style) -> String {
        var out = style.bold("books at position \(grouped(books.position))") + style.dim(" (estimates from Apple's signed prices; "
            + books.environments.map(\.rawValue).sorted().joined(separator: ", ") + ")") + "\n"
        if !books.periods.isEmpty {
            let currencies = Set(books.periods.flatMap(\.byCurrency.keys)).sorted()
            for currency in currencies {
                out += "\n" + style.bold(currency) + "\n"
                let widest = books.periods.compactMap { $0.byCurrency[currency].map { max($0.sales, 0) } }.max() ?? 0
                out += "  " + ["period", "sales", "refunds", "net", "proceeds", "recognised"].enumerated()
                    .map { $0 == 0 ? $1.padding(to: 22) : $1.padding(left: 13) }.joined() + "\n"
                for period in books.periods {
                    let money = period.byCurrency[currency] ?? Books.Money()
                    let figures = [money.sales, money.refunds, money.net, money.proceeds, money.recognised].map { amount($0).padding(left: 13) }
                    out += "  " + label(period).padding(to: 22) + figures.joined() + "  " + bar(money.sales, of: widest) + "\n"
                }
            }
            out += "\n" + style.bold("subscriptions") + "\n"
            out += "  " + ["period", "new", "renewals", "churned", "of active", "unpriced"].enumerated()
                .map { $0 == 0 ? $1.padding(to: 22) : $1.padding(left: 11) }.joined() + "\n"
            for period in books.periods {
                let counts = [period.new, period.renewals, period.churned, period.activeAtStart, period.unpriced].map { grouped($0).padding(left: 11) }
                out += "  " + label(period).padding(to: 22) + counts.joined() + "\n"
            }
        }
        let at = books.at
        out += "\n" + style.bold("at \(at.time)") + "\n"
        out += "  active subscriptions \(grouped(at.active)): \(grouped(at.paid)) paid, \(grouped(at.inTrial)) in trial"
            + (at.unpriced > 0 ? ", \(grouped(at.unpriced)) without a price" : "") + "\n"
        for (name, amounts) in [("MRR", at.mrr), ("MRR, no period in the catalog", at.mrrUnnormalised), ("deferred", at.deferred)] where !amounts.isEmpty {
            out += "  \(name): " + amounts.keys.sorted().map { "\($0) \(amount(amounts[$0]!))" }.joined(separator: ", ") + "\n"
        }
        if books.unpriced > 0 { out += style.dim("\n\(grouped(books.unpriced)) transactions without a price or currency are not counted in money\n") }
        return out
    }

    /// `2026-03-01` for a period that starts at midnight, the full time otherwise.
    private static func label(_ period: Books.Period) -> String {
        let from = period.from.description
        return from.hasSuffix("T00:00:00Z") ? String(from.prefix(10)) : from
    }

    /// Milliunits as units, at least two decimals: `1234.50` for 1,234,500, `2.495` for 2,495.
    static func amount(_ milliunits: Int128) -> String {
        let sign = milliunits < 0 ? "-" : ""
        let magnitude = milliunits.magnitude
        var fraction = String(magnitude % 1000)
        fraction = String(repeating: "0", count: 3 - fraction.count) + fraction
        if fraction.hasSuffix("0") { fraction.removeLast() }
        return "\(sign)\(magnitude / 1000).\(fraction)"
    }

    private static func bar(_ value: Int128, of widest: Int128) -> String {
        guard widest > 0, value > 0 else { return "" }
        return String(repeating: "█", count: max(1, Int(value * 24 / widest)))
    }
}
