/// The state an appended event changes: the accounts, and two ledger-wide facts about store
/// transactions (ids are global): which are revoked, and which purchased consumable entry each
/// credited. `LedgerState` is one (changed in place, for replay); the writer's `AppendSession`
/// is another (changes kept aside until the commit).
protocol ProjectionStore {
    func account(_ id: String) -> AccountState?
    /// Runs `body` on the account's state, creating an empty one first when needed.
    mutating func updateAccount(_ id: String, _ body: (inout AccountState) -> Void)
    /// The position of the revocation of `transaction`, if revoked.
    func revocation(of transaction: String) -> UInt64?
    mutating func setRevocation(_ position: UInt64, of transaction: String)
    /// The purchased consumable entry that `transaction` credited, if any.
    func consumableCredit(of transaction: String) -> EntryReference?
    mutating func setConsumableCredit(_ entry: EntryReference, of transaction: String)
}

/// A log record that cannot be applied: the log and the catalog disagree.
struct ProjectionInconsistency: Error, CustomStringConvertible {
    var description: String
}

/// How each appended event changes the projections: the single place where state changes.
/// The rules decide beforehand whether an event may be appended; replaying the log through
/// `apply` rebuilds exactly the state that appending built.
enum Projector {
    static func apply(
        _ event: Event, at position: UInt64, catalog: Catalog, to store: inout some ProjectionStore
    ) throws(ProjectionInconsistency) {
        let accountID = event.account
        switch event.payload {
        case .paymentAdded(let added):
            guard let product = catalog[added.product] else {
                throw ProjectionInconsistency(description: "product \(added.product) is not in the catalog")
            }
            store.updateAccount(accountID) { account in
                account.entries[added.payment] = QueueEntry(
                    payment: added.payment, product: product, quantity: added.quantity ?? 1, openedAt: position)
            }

        case .transactionUpdated(let update):
            try openIfNeeded(update, account: accountID, at: position, catalog: catalog, store: &store)
            var credited: QueueEntry?
            store.updateAccount(accountID) { account in
                guard var entry = account.entries[update.payment] else { return }
                entry.state = QueueEntryState(update.state)
                entry.stateSetAt = position
                if update.state == .purchased || update.state == .restored, let transaction = update.transaction {
                    entry.transaction = transaction
                    entry.originalTransaction = update.originalTransaction
                    entry.expiresAt = update.expiresAt
                    account.paymentByTransaction[transaction] = update.payment
                    if let original = update.originalTransaction { account.originalTransactions.insert(original) }
                    if update.state == .purchased, entry.productType == .consumable {
                        account.credit(entry, catalog: catalog)
                        credited = entry
                    }
                }
                account.entries[update.payment] = entry
            }
            // A transaction revoked before it was credited (through another entry's original
            // transaction) takes its credit back at once: projections depend on the log, not
            // on the order of refund and purchase.
            if let credited, let transaction = credited.transaction {
                store.setConsumableCredit(EntryReference(account: accountID, payment: credited.payment), of: transaction)
                if store.revocation(of: transaction) != nil {
                    store.updateAccount(accountID) { $0.credit(credited, catalog: catalog, sign: -1) }
                }
            }

        case .downloadUpdated(let update):
            try requireEntry(update.payment, of: accountID, in: store)
            store.updateAccount(accountID) { account in
                let download = QueueEntry.Download(id: update.download, state: update.state, progress: update.progress ?? 0)
                if let index = account.entries[update.payment]!.downloads.firstIndex(where: { $0.id == update.download }) {
                    account.entries[update.payment]!.downloads[index] = download
                } else {
                    account.entries[update.payment]!.downloads.append(download)
                }
            }

        case .transactionFinished(let finished):
            try requireEntry(finished.payment, of: accountID, in: store)
            store.updateAccount(accountID) { $0.entries[finished.payment]!.finishedAt = position }

        case .consumed(let consumed):
            store.updateAccount(accountID) { $0.balances[consumed.item, default: 0] -= consumed.amount }

        case .revoked(let revoked):
            guard store.revocation(of: revoked.transaction) == nil else { return }
            store.setRevocation(position, of: revoked.transaction)
            // A refund takes back what the purchase credited, in the account that holds it.
            if let holder = store.consumableCredit(of: revoked.transaction),
               let entry = store.account(holder.account)?.entries[holder.payment] {
                store.updateAccount(holder.account) { $0.credit(entry, catalog: catalog, sign: -1) }
            }
        }
    }

    /// A `transactionUpdated` for a payment the account does not have opens a new entry.
    private static func openIfNeeded(
        _ update: TransactionUpdated, account accountID: String, at position: UInt64, catalog: Catalog,
        store: inout some ProjectionStore
    ) throws(ProjectionInconsistency) {
        guard store.account(accountID)?.entries[update.payment] == nil else { return }
        guard let productID = update.product, let product = catalog[productID] else {
            throw ProjectionInconsistency(description: "update of unknown payment \(update.payment) without a known product")
        }
        store.updateAccount(accountID) { account in
            account.entries[update.payment] = QueueEntry(
                payment: update.payment, product: product, quantity: update.quantity ?? 1, openedAt: position)
        }
    }

    private static func requireEntry(_ payment: String, of accountID: String, in store: some ProjectionStore) throws(ProjectionInconsistency) {
        guard store.account(accountID)?.entries[payment] != nil else {
            throw ProjectionInconsistency(description: "event for unknown payment \(payment)")
        }
    }
}
