import PurchaseLedger

/// A stream of the App Store's reports for the books' benchmarks: each account a monthly
/// subscription (its first month a free trial for one in four), renewed each time the account
/// comes up, in dollars or euros; a consumable bought now and then; one report in twenty a
/// refund of the account's latest transaction, one in three of them prorated. Deterministic.
public struct StoreBenchmarkEvents: Sendable {
    public static let catalogJSON = """
        {"products": [
          {"id": "pro.monthly", "type": "autoRenewable", "group": "pro", "period": "P1M"},
          {"id": "gems", "type": "consumable", "grants": {"gems": 100}}
         ],
         "smallBusinessProgram": [{"from": "2023-06-01T00:00:00Z"}], "taxRates": {"FRA": 0.2}}
        """
    public static var catalog: Catalog { try! Catalog(json: Array(catalogJSON.utf8)) }

    /// 2023-01-01: every date stays in the past, as appends require.
    private static let start: Int64 = 1_672_531_200
    public let accounts: Int
    private var renewals: [Int]
    private var emitted = 0
    private var random = SplitMix64(seed: 7)

    public init(accounts: Int) {
        self.accounts = accounts
        renewals = Array(repeating: 0, count: accounts)
    }

    private mutating func nextRandom() -> UInt64 {
        random.next()
    }

    /// The next `count` events.
    public mutating func next(_ count: Int) -> [Event] {
        (0..<count).map { _ in nextEvent() }
    }

    private mutating func nextEvent() -> Event {
        emitted += 1
        let index = Int(nextRandom() % UInt64(accounts))
        let account = "store-account-\(index)"
        let euro = index % 3 == 0
        let (currency, storefront) = euro ? ("EUR", "FRA") : ("USD", "USA")
        let chainStart = Self.start + Int64(index % 86_400) * 60
        let roll = nextRandom() % 20
        let month = renewals[index]
        if roll == 0, month > 0 {
            // A refund of the latest renewal.
            let purchased = chainStart + Int64(month - 1) * 30 * 86_400
            let prorated = nextRandom() % 3 == 0
            var fact = renewal(index, month - 1, purchased: purchased, currency: currency, storefront: storefront)
            (fact.revokedAt, fact.revocationType) = (Timestamp(seconds: purchased + 86_400), prorated ? .refundProrated : .refundFull)
            fact.revocationPercentage = prorated ? 40_000 : nil
            return .storeTransaction(id: "r\(emitted)", account: account, signedAt: Timestamp(seconds: purchased + 86_400), fact)
        }
        if roll < 4 {
            let purchased = Timestamp(seconds: chainStart + Int64(emitted % 600) * 3_600)
            return .storeTransaction(id: "g\(emitted)", account: account, signedAt: purchased, StoreTransaction(
                transaction: "G\(emitted)", product: "gems", purchasedAt: purchased, environment: .production,
                price: 4990, currency: currency, storefront: storefront))
        }
        renewals[index] += 1
        let purchased = chainStart + Int64(month) * 30 * 86_400
        return .storeTransaction(id: "s\(emitted)", account: account, signedAt: Timestamp(seconds: purchased),
                                 renewal(index, month, purchased: purchased, currency: currency, storefront: storefront))
    }

    private func renewal(_ index: Int, _ month: Int, purchased: Int64, currency: String, storefront: String) -> StoreTransaction {
        var fact = StoreTransaction(
            transaction: "S\(index)-\(month)", originalTransaction: "S\(index)-0", product: "pro.monthly",
            purchasedAt: Timestamp(seconds: purchased), expiresAt: Timestamp(seconds: purchased + 30 * 86_400),
            environment: .production, price: month == 0 && index % 4 == 0 ? 0 : 9990, currency: currency, storefront: storefront)
        if month == 0, index % 4 == 0 { fact.offerDiscountType = "FREE_TRIAL" }
        return fact
    }
}
