/// Everything the log says about one account: its queue entries and balances.
struct AccountState: Sendable, Hashable {
    var entries: [String: QueueEntry] = [:]
    var balances: [String: Int64] = [:]
    /// The account's entries by their own store transaction.
    var paymentByTransaction: [String: String] = [:]
    /// The `originalTransaction` ids of the account's entries.
    var originalTransactions: Set<String> = []

    /// True when one of the account's entries holds `transaction` as its transaction or its
    /// original transaction (what `revoked` requires).
    func references(transaction: String) -> Bool {
        paymentByTransaction[transaction] != nil || originalTransactions.contains(transaction)
    }

    /// Adds (or, with a negative `sign`, takes back) what a purchased consumable entry credits.
    mutating func credit(_ entry: QueueEntry, catalog: Catalog, sign: Int64 = 1) {
        guard let product = catalog[entry.product] else { return }
        for (item, amount) in product.grants {
            balances[item, default: 0] += sign * amount * Int64(entry.quantity)
        }
    }
}
