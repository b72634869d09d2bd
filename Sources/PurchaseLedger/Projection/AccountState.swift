/// Everything the log says about one account: its queue entries and balances.
struct AccountState: Sendable, Hashable {
    /// By payment id.
    var entries: [UTF8Key: QueueEntry] = [:]
    /// By item.
    var balances: [UTF8Key: Int64] = [:]
    /// The store transactions the account's entries hold, as their transaction or their
    /// original transaction (what `revoked` requires).
    var referencedTransactions: Set<UTF8Key> = []
}
