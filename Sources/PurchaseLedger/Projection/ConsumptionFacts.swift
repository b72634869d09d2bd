/// What the log says about one purchase when Apple asks how it was used (a refund request,
/// `CONSUMPTION_REQUEST`), as of one log position: the same position always gives the same
/// facts, so an answer sent again after a crash is the answer computed the first time.
public struct ConsumptionFacts: Sendable, Hashable {
    public var account: String
    /// Apple's transaction id the request is about.
    public var transaction: String
    /// The log position the facts are read at.
    public var position: UInt64
    /// The account's `consumptionConsent` in force; nil when none was recorded.
    public var consented: Bool?
    public var delivery: Delivery
    /// The product's type, when an entry or the store's report names the product.
    public var productType: Catalog.ProductType?
    /// For a consumable: the share of what the purchase credited that the account has spent, in
    /// thousandths of a percent (0…100000). Credit still in the balance counts as the
    /// purchase's own (the disputed purchase is spent last), so a balance that still covers it
    /// is 0. Nil for other product types.
    public var consumedShare: Int?

    public init(
        account: String, transaction: String, position: UInt64, consented: Bool?, delivery: Delivery,
        productType: Catalog.ProductType?, consumedShare: Int?
    ) {
        self.account = account
        self.transaction = transaction
        self.position = position
        self.consented = consented
        self.delivery = delivery
        self.productType = productType
        self.consumedShare = consumedShare
    }

    public enum Delivery: String, Sendable, Hashable, CaseIterable {
        /// An entry holding the transaction was purchased (or restored) and finished, and every
        /// download it reported finished: the app delivered it.
        case delivered
        /// An entry holds it but was never finished (the app did not confirm delivery).
        case notFinished
        /// A download of the entry failed or was cancelled.
        case downloadFailed
        /// No entry of the account holds the transaction: the app never reported it.
        case notRecorded
    }
}

extension ConsumptionFacts {
    init(account: String, transaction: String, position: UInt64, state: AccountState?, catalog: Catalog) {
        self.account = account
        self.transaction = transaction
        self.position = position
        consented = state?.consent?.consented
        let holding = (state?.entries.values ?? [])
            .filter { $0.state == .purchased || $0.state == .restored }
            .filter { sameBytes($0.transaction, transaction) }
            .sorted { $0.openedAt < $1.openedAt }
        // Of several entries holding it (the device's and the store's), the best news counts:
        // one delivered entry is a delivery.
        if holding.contains(where: { $0.isFinished && $0.downloads.allSatisfy { $0.state == .finished } }) {
            delivery = .delivered
        } else if holding.contains(where: { $0.downloads.contains { $0.state == .failed || $0.state == .cancelled } }) {
            delivery = .downloadFailed
        } else {
            delivery = holding.isEmpty ? .notRecorded : .notFinished
        }
        productType = holding.first?.productType ?? state?.storeTransactions[UTF8Key(transaction)]?.productType
        guard productType == .consumable else {
            consumedShare = nil
            return
        }
        // What the purchase credited: the entry that was credited (`purchased`, not restored).
        guard let credited = holding.first(where: { $0.state == .purchased }), let product = catalog[credited.product],
              let balances = state?.balances
        else {
            consumedShare = 0
            return
        }
        // Doubles: a catalog's grants may be large enough for integer sums to overflow.
        var granted = 0.0
        var spent = 0.0
        for (item, amount) in product.grants {
            let credit = amount.multipliedReportingOverflow(by: Int64(credited.quantity))
            guard !credit.overflow, credit.partialValue > 0 else { continue }
            let unspent = min(max(balances[UTF8Key(item)] ?? 0, 0), credit.partialValue)
            granted += Double(credit.partialValue)
            spent += Double(credit.partialValue - unspent)
        }
        consumedShare = granted == 0 ? 0 : Int((spent / granted * 100_000).rounded(.down))
    }
}
