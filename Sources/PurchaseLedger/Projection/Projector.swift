/// A log record that cannot be applied: the log and the catalog disagree, or the record is
/// one the rules never let through.
struct ProjectionInconsistency: Error, CustomStringConvertible {
    enum Kind {
        /// The catalog read lacks the product: a newer catalog may have it.
        case productNotInCatalog
        case unknownPayment
        case transferOfNeitherAccount
        case balanceOutOfRange
    }

    var kind: Kind
    var description: String

    /// What it is to a reader of the log: damage at the record's position.
    func damage(at position: UInt64) -> StorageError {
        StorageError(.damaged, "the event at position \(position) cannot be applied: \(description)", position: position)
    }
}

/// How each appended event changes the projections: the single place where state changes.
/// The rules decide beforehand whether an event may be appended; replaying the log through
/// `apply` rebuilds exactly the state that appending built.
enum Projector {
    /// The store transaction whose holder and revocation `apply` may look up for `event`:
    /// what a reader of a remote storage reads ahead for a run of events, in one query.
    static func transactionLookedUp(by event: Event) -> String? {
        switch event.payload {
        case .transactionUpdated(let update) where update.state == .purchased || update.state == .restored: update.transaction
        case .revoked(let revoked): revoked.transaction
        case .storeTransaction(let fact): fact.transaction
        default: nil
        }
    }

    /// Throws `ProjectionInconsistency` when the event cannot be applied, and whatever the
    /// store throws when it reads from storage.
    static func apply(
        _ event: Event, at position: UInt64, catalog: Catalog, to store: inout some ProjectionStore
    ) throws {
        let account = UTF8Key(event.account)
        switch event.payload {
        case .paymentAdded(let added):
            let product = try self.product(added.product, in: catalog)
            try store.setEntry(QueueEntry(payment: added.payment, product: product, quantity: added.quantity ?? 1, openedAt: position), of: account)

        case .transactionUpdated(let update):
            let purchased = update.state == .purchased || update.state == .restored
            func change(_ entry: inout QueueEntry) {
                entry.state = QueueEntryState(update.state)
                entry.stateSetAt = position
                if purchased, let transaction = update.transaction {
                    entry.transaction = transaction
                    entry.originalTransaction = update.originalTransaction
                    entry.expiresAt = update.expiresAt
                }
            }
            // Changed in place; copied out only when it now holds a transaction (its holder
            // and its credit read it).
            let holdsTransaction = purchased && update.transaction != nil
            let entry: QueueEntry?
            if let updated = try store.updateEntry(account, UTF8Key(update.payment), { entry -> QueueEntry? in
                change(&entry)
                return holdsTransaction ? entry : nil
            }) {
                entry = updated
            } else {
                // StoreKit delivered a transaction the app never added: the update opens the entry.
                guard let productID = update.product else {
                    throw ProjectionInconsistency(kind: .unknownPayment, description: "update of unknown payment \(update.payment) without a product")
                }
                var opened = QueueEntry(payment: update.payment, product: try product(productID, in: catalog),
                                        quantity: update.quantity ?? 1, openedAt: position)
                change(&opened)
                try store.setEntry(opened, of: account)
                entry = opened
            }
            if purchased, let entry, let transaction = update.transaction {
                let key = UTF8Key(transaction)
                // The entry's own payment id, not this event's copy of it: a payment too long to
                // be held inline is then one string, shared by the entry and its holder.
                let reference = EntryReference(account: event.account, paymentID: entry.paymentID)
                // Another entry of the account holds it already (1.1): this one holds it too and
                // can be finished, but the transaction was credited, once, by the first.
                if let holder = try store.holder(of: key), holder.entry != reference { return }
                let creditsConsumable = update.state == .purchased && entry.productType == .consumable
                try store.setHolder(TransactionHolder(
                    entry: reference, position: position,
                    creditsConsumable: creditsConsumable), of: key)
                if creditsConsumable {
                    try credit(entry, of: account, catalog: catalog, sign: 1, in: &store)
                    // A transaction revoked before it was credited (through another entry's
                    // original transaction, or by the store's report) takes its credit back at
                    // once: projections depend on the log, not on the order in which refund and
                    // purchase arrived.
                    if try store.isRevoked(key, in: account) {
                        try credit(entry, of: account, catalog: catalog, sign: -1, in: &store)
                    }
                }
            }

        case .downloadUpdated(let update):
            let download = QueueEntry.Download(id: update.download, state: update.state, progress: update.progress ?? 0)
            try changeEntry(account, update.payment, in: &store) { entry in
                if let index = entry.downloadIndex(update.download) {
                    entry.downloads[index] = download
                } else {
                    entry.downloads.append(download)
                }
            }

        case .transactionFinished(let finished):
            try changeEntry(account, finished.payment, in: &store) { $0.finishedAt = position }

        case .consumed(let consumed):
            let item = UTF8Key(consumed.item)
            try store.setBalance(try sum(try store.balance(account, item) ?? 0, -consumed.amount), of: account, item: item)

        case .revoked(let revoked):
            let key = UTF8Key(revoked.transaction)
            guard try store.revocation(of: key) == nil else { return }
            // A refund takes back what the purchase credited, in the account that holds it,
            // unless the store's report there had taken it back already.
            // (A store that holds one account only, rebuilding it, has no other account's entries.)
            let holder = try store.holder(of: key)
            let wasRevoked = try holder.map { try store.isRevoked(key, in: UTF8Key($0.entry.account)) } ?? false
            try store.setRevocation(position, of: key)
            if !wasRevoked, let holder {
                try takeBackCredit(of: holder, sign: -1, catalog: catalog, in: &store)
            }

        case .storeTransaction(let fact):
            let key = UTF8Key(fact.transaction)
            var kept = fact
            kept.signed = nil  // The proof stays in the log; state and snapshots need not carry it.
            let record = StoreTransactionRecord(
                fact: kept, signedAt: event.at, eventID: event.id, product: try product(fact.product, in: catalog))
            // Only the report Apple signed last is in force, whatever order they came in; and
            // the last of each environment, once two reported, for views of some of them.
            let update = ReportsUpdate(
                adding: record, current: try store.storeTransaction(account, key),
                byEnvironment: try store.read(account) { $0.environmentReports[key] } ?? [])
            if let reports = update.byEnvironment { try store.change(account, .environmentReports(reports)) }
            guard let inForce = update.inForce else { return }
            let wasRevoked = try store.isRevoked(key, in: account)
            try store.change(account, .storeTransaction(inForce))
            let isRevoked = try store.isRevoked(key, in: account)
            // A refund takes back what the purchase credited in this account; a reversed refund
            // gives it again. (The store's report never credits on its own: a purchase does.)
            if wasRevoked != isRevoked, let holder = try store.holder(of: key), sameBytes(holder.entry.account, event.account) {
                try takeBackCredit(of: holder, sign: isRevoked ? -1 : 1, catalog: catalog, in: &store)
            }

        case .renewalInfo(let info):
            var kept = info
            kept.signed = nil
            let record = RenewalRecord(info: kept, signedAt: event.at, eventID: event.id)
            let key = UTF8Key(info.originalTransaction)
            let update = ReportsUpdate(
                adding: record, current: try store.renewal(account, key),
                byEnvironment: try store.read(account) { $0.environmentRenewals[key] } ?? [])
            if let reports = update.byEnvironment { try store.change(account, .environmentRenewals(reports)) }
            if let inForce = update.inForce { try store.change(account, .renewal(inForce)) }

        case .consumptionConsent(let consent):
            // A withdrawal is in force from when it is recorded, whatever its `at`; a consent
            // counts only when dated after every consent event recorded before it. So a later
            // withdrawal always wins, and a client's clock cannot keep a consent in force past
            // one (ties go to the withdrawal). `signedAt` keeps the latest `at` recorded.
            let current = try store.read(account, \.consent)
            let latest = max(current?.signedAt ?? event.at, event.at)
            let record: ConsentRecord
            if !consent.consented {
                record = ConsentRecord(consented: false, signedAt: latest, eventID: event.id)
            } else if let current, !current.consented, event.at <= current.signedAt {
                return
            } else {
                let newest = current.map { event.at >= $0.signedAt } ?? true
                record = ConsentRecord(consented: true, signedAt: latest, eventID: newest ? event.id : current?.eventID ?? event.id)
            }
            if record != current { try store.change(account, .consent(record)) }

        case .appTransaction(let info):
            var kept = info
            kept.signed = nil
            let record = AppTransactionRecord(info: kept, signedAt: event.at, eventID: event.id)
            if let current = try store.read(account, { $0.appTransaction }), !record.supersedes(current) {
                try store.change(account, .opened)
            } else {
                try store.change(account, .appTransaction(record))
            }

        case .transferred(let transfer):
            guard let side = transfer.side(of: event.account) else {
                throw ProjectionInconsistency(kind: .transferOfNeitherAccount, description: "transfer \(event.id) belongs to neither of its accounts")
            }
            // The transactions index keeps the entry that first held each transaction (its
            // credit's); who owns the chain now follows from the accounts' transfers
            // (`Rules.owner`).
            try store.change(account, .transfer(
                chain: UTF8Key(transfer.originalTransaction),
                ChainTransfer(side: side, other: side == .leaving ? transfer.to : transfer.from, position: position)))

        case .shared(let share):
            // The owner keeps the chain and its holds; this account may hold its transactions
            // too (`Rules.mayHold`), and its own records of them grant here.
            try store.change(account, .transfer(
                chain: UTF8Key(share.originalTransaction), ChainTransfer(side: .sharing, other: share.from, position: position)))

        case .forgotten:
            // The account's state stays, as its pseudonym's (the books): the commit that
            // appended this renamed the account everywhere (`Forgetting`), and a replay reads
            // every earlier event of it as the pseudonym's already.
            break

        case .consumptionRequest, .consumptionAnswer, .appStoreCall:
            // In the log for audit and for answering again; the account exists (every account
            // with an event is listed), and nothing else changes.
            // (Applied every time: a writer's session holds a new account before it changes.)
            try store.change(account, .opened)
        }
    }

    /// Takes back (sign -1) or gives again (+1) what the holder's purchase credited, if it
    /// credited a consumable.
    private static func takeBackCredit(
        of holder: TransactionHolder, sign: Int64, catalog: Catalog, in store: inout some ProjectionStore
    ) throws {
        let account = UTF8Key(holder.entry.account)
        guard holder.creditsConsumable, let entry = try store.entry(account, holder.entry.paymentID) else { return }
        try credit(entry, of: account, catalog: catalog, sign: sign, in: &store)
    }

    /// Adds (or, with sign -1, takes back) what a purchased consumable entry credits.
    private static func credit(
        _ entry: QueueEntry, of account: UTF8Key, catalog: Catalog, sign: Int64, in store: inout some ProjectionStore
    ) throws {
        guard let product = catalog[entry.product] else { return }
        for (item, amount) in product.grants {
            let key = UTF8Key(item)
            try store.setBalance(try sum(try store.balance(account, key) ?? 0, sign * amount * Int64(entry.quantity)), of: account, item: key)
        }
    }

    /// A balance moved by `change`. The rules keep every balance far from the bounds (a
    /// consumption at most the balance, a catalog's grants at most 10^9 a unit); a record or a
    /// snapshot that would cross them is damage, not a reason to trap.
    private static func sum(_ balance: Int64, _ change: Int64) throws(ProjectionInconsistency) -> Int64 {
        let (sum, overflow) = balance.addingReportingOverflow(change)
        guard !overflow else { throw ProjectionInconsistency(kind: .balanceOutOfRange, description: "a balance of \(balance) cannot move by \(change)") }
        return sum
    }

    private static func product(_ id: String, in catalog: Catalog) throws(ProjectionInconsistency) -> Catalog.Product {
        guard let product = catalog[id] else {
            throw ProjectionInconsistency(kind: .productNotInCatalog, description: "product \(id) is not in the catalog")
        }
        return product
    }

    /// Changes the entry of `payment` through `change`; throws when the account has none.
    private static func changeEntry(
        _ account: UTF8Key, _ payment: String, in store: inout some ProjectionStore, _ change: (inout QueueEntry) -> Void
    ) throws {
        guard try store.updateEntry(account, UTF8Key(payment), change) != nil else {
            throw ProjectionInconsistency(kind: .unknownPayment, description: "event for unknown payment \(payment)")
        }
    }
}
