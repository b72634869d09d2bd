import Testing
@testable import PurchaseLedger
import LedgerTestSupport
import PurchaseLedgerLocation

/// The books (docs/FORMAT.md, "The books") on every backend, against figures worked out by hand
/// in each test: each comment shows the arithmetic.
struct BooksTests {
    static let catalog = try! Catalog(
        products: [
            .init(id: "basic", type: .autoRenewable, group: "g", period: .oneMonth),
            .init(id: "pro", type: .autoRenewable, group: "g", period: .oneYear),
            .init(id: "weekly", type: .autoRenewable, group: "w"),
            .init(id: "book", type: .nonConsumable),
            .init(id: "gems", type: .consumable),
        ],
        accounting: .init(smallBusinessProgram: [.init(from: time("2026-03-01"))], taxRates: ["FRA": 200_000]))

    /// Midnight UTC of `day` (`2026-01-05`), or the full RFC 3339 time given.
    static func time(_ day: String) -> Timestamp {
        Timestamp(rfc3339: day.count == 10 ? day + "T00:00:00Z" : day)!
    }

    static func sale(
        _ id: String, _ account: String, signed: String? = nil, _ transaction: String, original: String? = nil, product: String,
        purchased: String, expires: String? = nil, price: Int64?, currency: String? = "USD", storefront: String? = nil,
        environment: StoreEnvironment? = .production, ownership: StoreOwnership? = nil, revoked: String? = nil,
        revocationType: StoreRevocationType? = nil, percentage: Int? = nil, upgraded: Bool? = nil, trial: Bool = false,
        originalPurchased: String? = nil
    ) -> Event {
        var fact = StoreTransaction(
            transaction: transaction, originalTransaction: original, product: product, purchasedAt: time(purchased),
            expiresAt: expires.map(time), ownership: ownership, environment: environment, price: price, currency: currency,
            storefront: storefront, revokedAt: revoked.map(time), revocationType: revocationType, revocationPercentage: percentage,
            upgraded: upgraded)
        fact.offerDiscountType = trial ? "FREE_TRIAL" : nil
        fact.originalPurchasedAt = originalPurchased.map(time)
        return .storeTransaction(id: id, account: account, signedAt: time(signed ?? purchased), fact)
    }

    /// Months of 2026 from January through `through` (1-based), at `at`, in `environments`.
    static func months(through: Int = 4, at: String = "2026-01-15", environments: Set<StoreEnvironment> = [.production]) throws -> BooksQuery {
        try BooksQuery(
            from: time("2026-01-01"), to: time("2026-0\(through + 1)-01"), by: .month, at: time(at), environments: environments)
    }

    /// The books from the live state, checked equal to those of a replay at the same position.
    static func books(_ ledger: Ledger, _ query: BooksQuery, sourceLocation: SourceLocation = #_sourceLocation) throws -> Books {
        let live = try ledger.books(query)
        #expect(try ledger.books(query, atPosition: ledger.position) == live, "from a replay", sourceLocation: sourceLocation)
        return live
    }

    static func money(_ books: Books, _ currency: String) -> [[Int128]] {
        books.periods.map { period in
            let money = period.byCurrency[currency] ?? Books.Money()
            return [money.sales, money.refunds, money.net, money.proceeds, money.recognised]
        }
    }

    @Test(arguments: Backend.available)
    func salesRefundsAndProceedsCountEachPriceOnceWhereItTookEffect(on backend: Backend) async throws {
        try await withLedger(on: backend, catalog: Self.catalog) { ledger, _ in
            try await ledger.appendAll([
                // A book refunded in full a month later.
                Self.sale("a1", "a", "A", product: "book", purchased: "2026-01-10", price: 5000),
                Self.sale("a2", "a", signed: "2026-02-10", "A", product: "book", purchased: "2026-01-10", price: 5000,
                          revoked: "2026-02-10", revocationType: .refundFull),
                // Gems in France, half refunded.
                Self.sale("b1", "b", "B", product: "gems", purchased: "2026-01-15", price: 4990, currency: "EUR", storefront: "FRA"),
                Self.sale("b2", "b", signed: "2026-02-01", "B", product: "gems", purchased: "2026-01-15", price: 4990, currency: "EUR",
                          storefront: "FRA", revoked: "2026-02-01", revocationType: .refundProrated, percentage: 50_000),
                // Refunded, then the refund reversed: no refund at any instant. In the Small Business Program.
                Self.sale("c1", "c", "C", product: "book", purchased: "2026-03-05", price: 1000, currency: "JPY"),
                Self.sale("c2", "c", signed: "2026-03-06", "C", product: "book", purchased: "2026-03-05", price: 1000, currency: "JPY",
                          revoked: "2026-03-06", revocationType: .refundFull),
                Self.sale("c3", "c", signed: "2026-03-07", "C", product: "book", purchased: "2026-03-05", price: 1000, currency: "JPY"),
                // Family sharing and the sandbox pay nothing; a report without a price is unpriced.
                Self.sale("d1", "d", "D", product: "book", purchased: "2026-01-20", price: 7000, ownership: .familyShared),
                Self.sale("e1", "e", "E", product: "book", purchased: "2026-01-20", price: 9000, environment: .sandbox),
                Self.sale("f1", "f", "F", product: "book", purchased: "2026-01-25", price: nil),
                // 5 milliunits half refunded: every half rounds to even.
                Self.sale("g1", "g", "G", product: "gems", purchased: "2026-04-02", price: 5),
                Self.sale("g2", "g", signed: "2026-04-03", "G", product: "gems", purchased: "2026-04-02", price: 5,
                          revoked: "2026-04-03", revocationType: .refundProrated, percentage: 50_000),
                // A family revoke is no refund.
                Self.sale("h1", "h", "H", product: "book", purchased: "2026-02-20", price: 2000),
                Self.sale("h2", "h", signed: "2026-02-21", "H", product: "book", purchased: "2026-02-20", price: 2000,
                          revoked: "2026-02-21", revocationType: .familyRevoke),
            ])
            let books = try Self.books(ledger, try Self.months())
            // [sales, refunds, net, proceeds, recognised] by month.
            #expect(Self.money(books, "USD") == [
                [5000, 0, 5000, 3500, 5000],  // A: 5000 less 30%
                [2000, 5000, -3000, -2100, -3000],  // H sold; A refunded: 2000 × 0.7 − 5000 × 0.7
                [0, 0, 0, 0, 0],
                // G: the refund 2.5 → 2; proceeds (5 − 2.5) × 0.85 = 2.125 → 2; recognised 5 − 2.5 = 2.5 → 2.
                [5, 2, 3, 2, 2],
            ])
            #expect(Self.money(books, "EUR") == [
                [4990, 0, 4990, 2911, 4990],  // 4990 / 1.2 × 0.7 = 2910.83
                [0, 2495, -2495, -1455, -2495],  // −2495 / 1.2 × 0.7 = −1455.42
                [0, 0, 0, 0, 0],
                [0, 0, 0, 0, 0],
            ])
            #expect(Self.money(books, "JPY") == [[0, 0, 0, 0, 0], [0, 0, 0, 0, 0], [1000, 0, 1000, 850, 1000], [0, 0, 0, 0, 0]])
            #expect(books.periods.map(\.unpriced) == [1, 0, 0, 0])
            #expect(books.unpriced == 1)
            #expect(books.estimateJSONHolds)

            // The sandbox alone: E's purchase, and nothing of production.
            let sandbox = try Self.books(ledger, try Self.months(environments: [.sandbox]))
            #expect(Self.money(sandbox, "USD").first == [9000, 0, 9000, 6300, 9000])
            #expect(sandbox.periods.allSatisfy { $0.byCurrency["EUR"] == nil })
        }
    }

    /// A renewing chain with a free trial, an upgrade to a yearly plan, and a chain past its
    /// first year.
    static let subscriptions: [Event] = [
        sale("s1", "s", "S1", original: "S1", product: "basic", purchased: "2026-01-01", expires: "2026-02-01", price: 0, trial: true),
        sale("s2", "s", "S2", original: "S1", product: "basic", purchased: "2026-02-01", expires: "2026-03-01", price: 10000),
        sale("s3", "s", "S3", original: "S1", product: "basic", purchased: "2026-03-01", expires: "2026-04-01", price: 10000),
        sale("u1", "u", "U1", original: "U1", product: "basic", purchased: "2026-01-10", expires: "2026-02-10", price: 10000),
        sale("u2", "u", "U2", original: "U1", product: "pro", purchased: "2026-01-25", expires: "2027-01-25", price: 120_000),
        sale("u3", "u", signed: "2026-01-25", "U1", original: "U1", product: "basic", purchased: "2026-01-10", expires: "2026-02-10",
             price: 10000, upgraded: true),
        sale("y1", "y", "Y1", original: "Y0", product: "basic", purchased: "2026-01-01", expires: "2026-02-01", price: 10000,
             originalPurchased: "2025-01-01"),
    ]

    @Test(arguments: Backend.available)
    func subscriptionsAreSpreadCountedAndChurnedOverTheirPeriods(on backend: Backend) async throws {
        try await withLedger(on: backend, catalog: Self.catalog) { ledger, _ in
            try await ledger.appendAll(Self.subscriptions)
            let books = try Self.books(ledger, try Self.months())
            let expected: [[Int128]] = [
                // Sales S1 0 + U1 10000 + U2 120000 + Y1 10000; proceeds 0 + 7000 + 84000 + 8500 (Y1 is a
                // year into its chain: 15%); recognised U1 10000 × 22/31 = 7096.8, U2 120000 × 7/365 =
                // 2301.4, Y1 10000 (the upgraded U1 stays spread to its expiry).
                [140_000, 0, 140_000, 99500, 7097 + 2301 + 10000],
                // S2; recognised U1 10000 × 9/31 = 2903.2, U2 120000 × 28/365 = 9205.5, S2 10000.
                [10000, 0, 10000, 7000, 2903 + 9205 + 10000],
                // S3 in the Small Business Program; recognised U2 × 31/365 = 10191.8, S3 10000.
                [10000, 0, 10000, 8500, 10192 + 10000],
                // U2 × 30/365 = 9863.0.
                [0, 0, 0, 0, 9863],
            ]
            #expect(Self.money(books, "USD") == expected)
            // New: S1 and U1 start chains; U2, S2, S3 and Y1 continue one.
            #expect(books.periods.map(\.new) == [2, 0, 0, 0])
            #expect(books.periods.map(\.renewals) == [2, 1, 1, 0])
            // Paid and active at each month's start (Y; S and U; S and U; U), and gone at its end.
            #expect(books.periods.map(\.activeAtStart) == [1, 2, 2, 1])
            #expect(books.periods.map(\.churned) == [1, 0, 1, 0])

            // At each month's start, in the same answer. January 1st: S in its trial, Y paid, its
            // month all deferred. February 1st: S2 and U2 (120000 / 12) paid; deferred S2 10000 whole,
            // U1 10000 × 9/31 = 2903.2 (upgraded, still spread), U2 120000 × 358/365 = 117698.6.
            let starts = books.periods.map(\.atStart)
            #expect(starts.map { [$0.active, $0.inTrial, $0.paid] } == [[2, 1, 1], [2, 0, 2], [2, 0, 2], [1, 0, 1]])
            #expect(starts.map { $0.mrr["USD"] ?? 0 } == [10000, 20000, 20000, 10000])
            #expect(starts.prefix(2).map(\.deferred) == [["USD": 10000], ["USD": Int128(10000 + 2903 + 117_699)]])
            #expect(starts.map(\.time) == books.periods.map(\.from))
            // Mid-January: S in its trial, U and Y paid monthly. Deferred: U1 10000 × 26/31 =
            // 8387.1, Y1 10000 × 17/31 = 5483.9.
            let january = try Self.books(ledger, try Self.months(at: "2026-01-15")).at
            #expect([january.active, january.inTrial, january.paid] == [3, 1, 2])
            #expect(january.mrr == ["USD": 20000])
            #expect(january.deferred == ["USD": Int128(8387 + 5484)])
            // Mid-February: S paid monthly, U yearly (120000 / 12). Deferred: S2 10000 × 14/28,
            // U2 120000 × 344/365 = 113095.9.
            let february = try Self.books(ledger, try Self.months(at: "2026-02-15")).at
            #expect([february.active, february.inTrial, february.paid] == [2, 0, 2])
            #expect(february.mrr == ["USD": 20000])
            #expect(february.deferred == ["USD": Int128(5000 + 113_096)])
        }
    }

    @Test(arguments: Backend.available)
    func aProductWithoutAPeriodIsCountedApartAndARefundTakesBackWhatWasDeferred(on backend: Backend) async throws {
        try await withLedger(on: backend, catalog: Self.catalog) { ledger, _ in
            try await ledger.appendAll([
                Self.sale("w1", "w", "W1", original: "W1", product: "weekly", purchased: "2026-01-01", expires: "2026-01-11", price: 3000),
                // Refunded by 40% on the 5th: from then it counts as 1800 over its ten days.
                Self.sale("w2", "w", signed: "2026-01-05", "W1", original: "W1", product: "weekly", purchased: "2026-01-01",
                          expires: "2026-01-11", price: 3000, revoked: "2026-01-05", revocationType: .refundProrated,
                          percentage: 40_000),
            ])
            let before = try Self.books(ledger, try BooksQuery(at: Self.time("2026-01-04"))).at
            #expect(before.mrr.isEmpty)
            #expect(before.mrrUnnormalised == ["USD": 3000])
            #expect(before.deferred == ["USD": 2100])  // 3000 × 7/10
            // A prorated refund revokes the transaction (status 5): no longer active.
            let after = try Self.books(ledger, try BooksQuery(at: Self.time("2026-01-06"))).at
            #expect(after.active == 0)
            #expect(after.deferred == ["USD": 900])  // 1800 × 5/10
            // Days 1–4 recognise 3000 / 10 each, 1200 in all; by the 6th 1800 × 5/10 = 900 in all,
            // so the 5th recognises 900 − 1200; then 1800 / 10 a day.
            let days = try Self.books(ledger, try BooksQuery(
                from: Self.time("2026-01-01"), to: Self.time("2026-01-11"), by: .day, at: Self.time("2026-01-01")))
            #expect(days.periods.map { $0.byCurrency["USD"]?.recognised ?? 0 } == [300, 300, 300, 300, -300, 180, 180, 180, 180, 180])
            #expect(days.periods[4].byCurrency["USD"]?.refunds == 1200)
        }
    }

    @Test(arguments: Backend.available)
    func aClosedMonthIsTheSameAtEveryLaterPositionThatLearnedNothingAboutIt(on backend: Backend) async throws {
        try await withLedger(on: backend, catalog: Self.catalog) { ledger, _ in
            try await ledger.appendAll(Self.subscriptions)
            let january = try BooksQuery(from: Self.time("2026-01-01"), to: Self.time("2026-02-01"), at: Self.time("2026-01-15"))
            let closed = try Self.books(ledger, january)
            let closedAt = ledger.position
            // Later news about April: U2 refunded in half on April 10th.
            try await ledger.appendAll([
                Self.sale("u4", "u", signed: "2026-04-10", "U2", original: "U1", product: "pro", purchased: "2026-01-25",
                          expires: "2027-01-25", price: 120_000, revoked: "2026-04-10", revocationType: .refundProrated,
                          percentage: 50_000),
            ])
            var later = try Self.books(ledger, january)
            #expect(later.position == closedAt + 1)
            later.position = closedAt
            #expect(later == closed)
            // April, as known then and now.
            let april = try BooksQuery(from: Self.time("2026-04-01"), to: Self.time("2026-05-01"), at: Self.time("2026-04-15"))
            let aprilThen = try ledger.books(april, atPosition: closedAt)
            let aprilNow = try Self.books(ledger, april)
            #expect(Self.money(aprilThen, "USD") == [[0, 0, 0, 0, 9863]])
            // The refund 60000; proceeds −60000 × 0.7 (U2 was bought before the Small Business
            // Program); recognised 120000 × 9/365 = 2958.9 at full price to the 10th, then 60000 ×
            // 21/365 = 3452.1, less half of what was recognised before the 10th: 60000 × 75/365 =
            // 12328.8. Exactly: what was recognised by May 1st, 60000 × 96/365, less by April
            // 1st, 120000 × 66/365.
            #expect(Self.money(aprilNow, "USD") == [[0, 60000, -60000, -42000, ExactMoney.rounded(60000 * 96 - 120_000 * 66, over: 365)]])
            #expect(aprilThen.at.active == 1 && aprilNow.at.active == 0)
            // Known at: the position the ledger had reached by a time, by its clock.
            #expect(try ledger.position(knownAt: .earliest) == 0)
            #expect(try ledger.position(knownAt: .latest) == ledger.position)
        }
    }

    /// A subscription shared with another account counts once (its owner's); a monthly plan's
    /// price is a month's whatever its product's period, an offer paid up front covers its
    /// offer's period; a currency that is not an ISO 4217 code prices nothing.
    @Test(arguments: Backend.available)
    func sharedSubscriptionsAndOtherBillingCountAsTheyArePaid(on backend: Backend) async throws {
        try await withLedger(on: backend, catalog: Self.catalog) { ledger, _ in
            var monthly = Self.sale("m1", "m", "M1", original: "M1", product: "pro", purchased: "2026-01-01", expires: "2026-02-01", price: 1000)
            var upFront = Self.sale("q1", "q", "Q1", original: "Q1", product: "basic", purchased: "2026-01-01", expires: "2026-04-01", price: 6000)
            if case .storeTransaction(var fact) = monthly.payload {
                fact.billingPlanType = "MONTHLY"
                monthly.payload = .storeTransaction(fact)
            }
            if case .storeTransaction(var fact) = upFront.payload {
                (fact.offerDiscountType, fact.offerPeriod) = ("PAY_UP_FRONT", "P3M")
                upFront.payload = .storeTransaction(fact)
            }
            let outcomes = try await ledger.append(contentsOf: [
                Self.sale("o1", "o", "O1", original: "O1", product: "basic", purchased: "2026-01-01", expires: "2026-02-01", price: 10000),
                .transactionUpdated(id: "o1/device", account: "o", at: Self.time("2026-01-01"), TransactionUpdated(
                    payment: "appstore:O1", state: .purchased, transaction: "O1", originalTransaction: "O1", product: "basic")),
                Event.share(originalTransaction: "O1", from: "o", to: "p", at: Self.time("2026-01-02")),
                Self.sale("o2", "p", signed: "2026-01-02", "O1", original: "O1", product: "basic", purchased: "2026-01-01",
                          expires: "2026-02-01", price: 10000),
                monthly, upFront,
                Self.sale("x1", "x", "X1", product: "book", purchased: "2026-01-05", price: 100, currency: "usd"),
            ])
            #expect(outcomes.allSatisfy { if case .success(.appended) = $0 { true } else { false } }, "\(outcomes)")
            let books = try Self.books(ledger, try Self.months(through: 1, at: "2026-01-15"))
            // Active: O's (not P's share of it), M's and Q's. MRR: 10000 + 1000 (a month's instalment,
            // not 1000 / 12) + 6000 / 3 (three months paid up front).
            #expect([books.at.active, books.at.paid] == [3, 3])
            #expect(books.at.mrr == ["USD": 13000])
            // O1's sale once, whichever account's report; X's "usd" is unpriced.
            let sales: Int128 = 10000 + 1000 + 6000
            #expect(Self.money(books, "USD").first?.first == sales)
            #expect(books.periods.first?.unpriced == 1 && books.periods.first?.byCurrency["usd"] == nil)
        }
    }

    /// The settings of the books at a position are those of the catalog that governed it: a
    /// catalog grown after it changes the figures from the next event on, never before.
    @Test(arguments: Backend.available)
    func aCatalogGrownLaterLeavesTheBooksAtEarlierPositionsAsTheyWere(on backend: Backend) async throws {
        try await withLocation(on: backend) { location in
            let first = try Ledger.open(location: location, catalog: Self.catalog, configuration: .testing)
            try await first.appendAll([
                Self.sale("f1", "f", "F1", product: "gems", purchased: "2026-01-10", price: 12000, currency: "EUR", storefront: "DEU"),
            ])
            await first.close()
            let taxed = try Catalog(products: Self.catalog.products, accounting: .init(taxRates: ["DEU": 190_000]))
            let ledger = try Ledger.open(location: location, catalog: taxed, configuration: .testing)
            let query = try Self.months(through: 1)
            // At position 1, as before: 12000 × 0.7.
            #expect(Self.money(try Self.books(ledger, query), "EUR").first?[3] == 8400)
            try await ledger.appendAll([
                Self.sale("f2", "f", "F2", product: "gems", purchased: "2026-01-11", price: 11900, currency: "EUR", storefront: "DEU"),
            ])
            // At position 2, both under the new rate: 12000 / 1.19 × 0.7 = 7058.8, 11900 / 1.19 × 0.7 = 7000.
            let proceeds: Int128 = 7059 + 7000
            let grown = Self.money(try Self.books(ledger, query), "EUR")
            #expect(grown.first?[3] == proceeds)
            #expect(Self.money(try ledger.books(query, atPosition: 1), "EUR").first?[3] == 8400)
            await ledger.close()
        }
    }

    @Test func queriesOutsideTheirBoundsAreRefused() throws {
        #expect(throws: BooksQuery.Invalid.self) { try BooksQuery(from: Self.time("2026-01-01")) }
        #expect(throws: BooksQuery.Invalid.self) { try BooksQuery(from: Self.time("2026-02-01"), to: Self.time("2026-01-01")) }
        #expect(throws: BooksQuery.Invalid.self) { try BooksQuery(by: .day) }
        #expect(throws: BooksQuery.Invalid.self) { try BooksQuery(environments: []) }
        #expect(throws: BooksQuery.Invalid.self) {
            try BooksQuery(from: Self.time("2000-01-01"), to: Self.time("2030-01-01"), by: .day)
        }
        // Weeks start on Monday: 2026-01-05 is one.
        let weeks = try BooksQuery(from: Self.time("2026-01-01"), to: Self.time("2026-01-20"), by: .week)
        #expect(weeks.periods.map(\.from) == ["2026-01-01", "2026-01-05", "2026-01-12", "2026-01-19"].map(Self.time))
    }

    @Test func theCatalogKeepsTheBooksSettings() throws {
        let json = #"{"products": [{"id": "m", "type": "autoRenewable", "period": "P12M"}], "smallBusinessProgram": [{"from": "2026-03-01T00:00:00Z", "to": "2027-01-01T00:00:00Z"}], "taxRates": {"FRA": 0.2, "DEU": 0.19, "USA": 0}}"#
        let catalog = try Catalog(json: Array(json.utf8))
        #expect(catalog["m"]?.period == .oneYear)
        #expect(catalog.accounting.taxRates == ["FRA": 200_000, "DEU": 190_000, "USA": 0])
        #expect(try Catalog(json: Array(catalog.json.utf8)) == catalog)
        #expect(catalog.json.contains(#""taxRates": {"DEU": 0.19, "FRA": 0.2, "USA": 0}"#))
        for bad in [
            #"{"products": [{"id": "m", "type": "autoRenewable", "period": "P5D"}]}"#,
            #"{"products": [{"id": "b", "type": "nonConsumable", "period": "P1M"}]}"#,
            #"{"products": [], "taxRates": {"FRA": 1.5}}"#,
            #"{"products": [], "taxRates": {"FRA": 0.1234567}}"#,
            #"{"products": [], "taxRates": {"fr": 0.2}}"#,
            #"{"products": [], "smallBusinessProgram": [{"from": "2026-03-01T00:00:00Z", "to": "2026-01-01T00:00:00Z"}]}"#,
        ] {
            #expect(throws: CatalogError.self, "\(bad)") { try Catalog(json: Array(bad.utf8)) }
        }
        // Nor from the library: a rate of -100% would divide the proceeds by zero.
        #expect(throws: CatalogError.self) { try Catalog(products: [], accounting: .init(taxRates: ["FRA": -1_000_000])) }
        // A later catalog may change a period: it changes no rule.
        var changed = catalog.products
        changed[0].period = .oneMonth
        try catalog.checkSuccessor(try Catalog(products: changed))
    }
}

extension Books {
    /// Every answer says it is an estimate.
    var estimateJSONHolds: Bool { json.contains(#""estimate":true"#) }
}
