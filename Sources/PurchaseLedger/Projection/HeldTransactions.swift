/// A store transaction an account holds, as the ledger knows it: from the device's entries, the
/// store's report in force, or both. What reconciliation compares with Apple's history.
public struct HeldTransaction: Sendable, Hashable {
    public var account: String
    public var transaction: String
    public var originalTransaction: String?
    public var product: String
    /// The store's report in force, when the store reported on it.
    public var report: StoreTransaction?
    /// Revoked by a `revoked` event (final whatever the store says).
    public var revokedByEvent: Bool
    /// The payment of the entry holding it while that entry awaits `transactionFinished`; nil
    /// once finished, or when only the store reported it.
    public var unfinishedPayment: String? = nil
    /// Whether an entry of the device's queue holds it (else only the store reported it).
    public var heldByEntry = false

    /// The subscription (or purchase) the transaction belongs to.
    public var chain: String { originalTransaction ?? transaction }
}

extension LedgerState {
    /// Every store transaction of every account, by account then transaction id.
    public func heldTransactions() -> [HeldTransaction] {
        var held: [HeldTransaction] = []
        for account in accounts.keys.sorted() {
            guard let state = accounts[account] else { continue }
            held += HeldTransaction.all(of: account.string, in: state) { revocations[$0] != nil }
        }
        return held
    }
}

extension HeldTransaction {
    /// The store transactions one account's state holds, by transaction id.
    static func all(of account: String, in state: AccountState, isRevoked: (UTF8Key) throws -> Bool) rethrows -> [HeldTransaction] {
        var byTransaction: [UTF8Key: HeldTransaction] = [:]
        // Chains transferred to another account are that account's to hold.
        let away = state.chainsTransferredAway
        let state = away.isEmpty ? state : state.leavingOut(chains: away)
        for entry in state.entries.values where entry.state == .purchased || entry.state == .restored {
            guard let transaction = entry.transaction, let chain = entry.chain, !away.contains(UTF8Key(chain)) else { continue }
            let key = UTF8Key(transaction)
            if byTransaction[key] == nil {
                byTransaction[key] = HeldTransaction(
                    account: account, transaction: transaction, originalTransaction: entry.originalTransaction,
                    product: entry.product, report: nil, revokedByEvent: try isRevoked(key),
                    unfinishedPayment: entry.finishedAt == nil ? entry.payment : nil, heldByEntry: true)
            }
        }
        for report in state.storeTransactions {
            let (key, record) = (report.key, report.record)
            var transaction = try byTransaction[key] ?? HeldTransaction(
                account: account, transaction: record.fact.transaction, originalTransaction: record.fact.originalTransaction,
                product: record.fact.product, report: nil, revokedByEvent: try isRevoked(key))
            transaction.report = record.fact
            transaction.originalTransaction = transaction.originalTransaction ?? record.fact.originalTransaction
            byTransaction[key] = transaction
        }
        return byTransaction.keys.sorted().compactMap { byTransaction[$0] }
    }
}

extension LedgerState {
    /// The store's renewal info in force for `originalTransaction` in `account`, if any.
    public func renewalInfo(of account: String, originalTransaction: String) -> RenewalInfo? {
        accounts[UTF8Key(account)]?.renewals[UTF8Key(originalTransaction)]?.info
    }
}
