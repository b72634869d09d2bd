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
        let account = UTF8Key(event.account)
        switch event.payload {
        case .paymentAdded(let added):
            let product = try self.product(added.product, in: catalog)
            store.setEntry(QueueEntry(payment: added.payment, product: product, quantity: added.quantity ?? 1, openedAt: position), of: account)

        case .transactionUpdated(let update):
            var entry: QueueEntry
            if let existing = store.entry(account, UTF8Key(update.payment)) {
                entry = existing
            } else {
                // StoreKit delivered a transaction the app never added: the update opens the entry.
                guard let productID = update.product else {
                    throw ProjectionInconsistency(description: "update of unknown payment \(update.payment) without a product")
                }
                entry = QueueEntry(payment: update.payment, product: try product(productID, in: catalog),
                                   quantity: update.quantity ?? 1, openedAt: position)
            }
            entry.state = QueueEntryState(update.state)
            entry.stateSetAt = position
            if update.state == .purchased || update.state == .restored, let transaction = update.transaction {
                entry.transaction = transaction
                entry.originalTransaction = update.originalTransaction
                entry.expiresAt = update.expiresAt
                store.addReference(UTF8Key(transaction), of: account)
                if let original = update.originalTransaction { store.addReference(UTF8Key(original), of: account) }
            }
            store.setEntry(entry, of: account)
            if update.state == .purchased, entry.productType == .consumable, let transaction = update.transaction {
                let key = UTF8Key(transaction)
                credit(entry, of: account, catalog: catalog, sign: 1, in: &store)
                store.setConsumableCredit(EntryReference(account: event.account, payment: update.payment), of: key)
                // A transaction revoked before it was credited (through another entry's original
                // transaction) takes its credit back at once: projections depend on the log, not
                // on the order in which refund and purchase arrived.
                if store.revocation(of: key) != nil {
                    credit(entry, of: account, catalog: catalog, sign: -1, in: &store)
                }
            }

        case .downloadUpdated(let update):
            var entry = try requireEntry(account, update.payment, in: store)
            let download = QueueEntry.Download(id: update.download, state: update.state, progress: update.progress ?? 0)
            if let index = entry.downloadIndex(update.download) {
                entry.downloads[index] = download
            } else {
                entry.downloads.append(download)
            }
            store.setEntry(entry, of: account)

        case .transactionFinished(let finished):
            var entry = try requireEntry(account, finished.payment, in: store)
            entry.finishedAt = position
            store.setEntry(entry, of: account)

        case .consumed(let consumed):
            let item = UTF8Key(consumed.item)
            store.setBalance((store.balance(account, item) ?? 0) - consumed.amount, of: account, item: item)

        case .revoked(let revoked):
            let key = UTF8Key(revoked.transaction)
            guard store.revocation(of: key) == nil else { return }
            store.setRevocation(position, of: key)
            // A refund takes back what the purchase credited, in the account that holds it.
            if let holder = store.consumableCredit(of: key),
               let entry = store.entry(UTF8Key(holder.account), UTF8Key(holder.payment)) {
                credit(entry, of: UTF8Key(holder.account), catalog: catalog, sign: -1, in: &store)
            }
        }
    }

    /// Adds (or, with sign -1, takes back) what a purchased consumable entry credits.
    private static func credit(
        _ entry: QueueEntry, of account: UTF8Key, catalog: Catalog, sign: Int64, in store: inout some ProjectionStore
    ) {
        guard let product = catalog[entry.product] else { return }
        for (item, amount) in product.grants {
            let key = UTF8Key(item)
            store.setBalance((store.balance(account, key) ?? 0) + sign * amount * Int64(entry.quantity), of: account, item: key)
        }
    }

    private static func product(_ id: String, in catalog: Catalog) throws(ProjectionInconsistency) -> Catalog.Product {
        guard let product = catalog[id] else {
            throw ProjectionInconsistency(description: "product \(id) is not in the catalog")
        }
        return product
    }

    private static func requireEntry(_ account: UTF8Key, _ payment: String, in store: some ProjectionStore) throws(ProjectionInconsistency) -> QueueEntry {
        guard let entry = store.entry(account, UTF8Key(payment)) else {
            throw ProjectionInconsistency(description: "event for unknown payment \(payment)")
        }
        return entry
    }
}
