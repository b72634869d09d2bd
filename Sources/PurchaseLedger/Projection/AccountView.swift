/// One account's state as a view of some environments sees it, ready to answer at any
/// instant: the projection as of a time reads it once, the timeline at every instant where
/// something takes effect. A class: it never changes once made, and the change feed hands
/// each one to several readers (a struct of this many references was copied, reference by
/// reference, at each).
final class AccountView {
    /// What is granted at an instant, and by what: the timeline's intervals are runs of equal
    /// grants.
    struct Grant {
        /// What grants: of several grants of one product, the kind decides which one the
        /// product's answer is (`precedes(_:)`).
        enum Kind {
            /// The transaction in force of this subscription group.
            case group(String)
            /// A report of a non-consumable or non-renewing product.
            case report
            /// An entry of the device's queue, opened at this position.
            case entry(openedAt: UInt64)
        }

        var kind: Kind
        /// The store transaction that grants (an entry's, for the device's queue).
        var transaction: String?
        /// For an auto-renewable subscription, its status then (active or grace period).
        var status: SubscriptionStatus.Status?
        /// The store's report that grants; nil for an entry of the device's queue.
        var record: StoreTransactionRecord?
        /// When the granting transaction was upgraded away from, if it was.
        var upgradedAt: Timestamp?
        /// The grace period's end, for a subscription in billing retry.
        var gracePeriodEndsAt: Timestamp?
        /// The entry's `expiresAt`, for the device's queue.
        var entryExpiresAt: Timestamp?

        func continues(_ other: Grant) -> Bool {
            sameBytes(transaction, other.transaction) && status == other.status
        }

        /// Whether this grant answers for its product before `other`, a grant of the same
        /// product: a group's transaction in force (of two groups, the later by name) before a
        /// report, the report that starts later (then the greater transaction id) before
        /// another, a report before an entry of the device's queue, and the first-opened entry
        /// before another. A total order, so `grants(at:)` never depends on storage order.
        func precedes(_ other: Grant) -> Bool {
            switch (kind, other.kind) {
            case (.group(let name), .group(let otherName)): otherName.utf8.lexicographicallyPrecedes(name.utf8)
            case (.group, _): true
            case (_, .group): false
            case (.report, .report): AccountView.startsLater(record!, than: other.record!)
            case (.report, _): true
            case (_, .report): false
            case (.entry(let openedAt), .entry(let otherOpenedAt)): openedAt < otherOpenedAt
            }
        }
    }

    let account: String
    /// The state with the view's reports in force.
    let state: AccountState
    /// The state over every environment: which entries the store reported on at all.
    let unscoped: AccountState
    let groups: [SubscriptionGroup]
    /// The catalog's named entitlements, reported with the projection.
    let entitlementDefinitions: [Catalog.Entitlement]
    /// The balances the view shows: the account's, less, in a view that leaves environments
    /// out, the credits of the consumables bought only in those (FORMAT.md, "Environments").
    let balances: [UTF8Key: Int64]
    private let revokedByEvent: Set<UTF8Key>
    /// The chains the account transferred to another: its entries of them grant nothing, and
    /// the store's reports of them are left out (FORMAT.md, "Transfers").
    private let transferredAway: Set<UTF8Key>

    /// `catalog` gives what each consumable credits, which a view that leaves environments out
    /// takes out of the balances (`scopedBalances`); without one, balances are the account's.
    init(
        account: String, state: AccountState, excluding excluded: Set<StoreEnvironment>,
        entitlements definitions: [Catalog.Entitlement] = [], catalog: Catalog?, isRevoked: (UTF8Key) throws -> Bool
    ) rethrows {
        self.account = account
        entitlementDefinitions = definitions
        transferredAway = state.chainsTransferredAway
        let owned = transferredAway.isEmpty ? state : state.leavingOut(chains: transferredAway)
        unscoped = owned
        self.state = owned.scoped(excluding: excluded)
        // `revoked` events are final: read once for every transaction the account names.
        var revoked: Set<UTF8Key> = []
        func check(_ transaction: String?) throws {
            guard let transaction else { return }
            let key = UTF8Key(transaction)
            if try isRevoked(key) { revoked.insert(key) }
        }
        // Only entries that may grant ask (`QueueEntry.entitles`).
        for entry in state.entries.granting {
            try check(entry.transaction)
            try check(entry.originalTransaction)
        }
        for record in self.state.storeTransactions.values {
            try check(record.fact.transaction)
            try check(record.fact.originalTransaction)
        }
        revokedByEvent = revoked
        if let catalog, !excluded.isEmpty {
            balances = Self.scopedBalances(of: state, reported: owned, inView: self.state, catalog: catalog, revokedByEvent: revoked)
        } else {
            balances = state.balances
        }
        var byGroup: [String: [StoreTransactionRecord]] = [:]
        for record in self.state.storeTransactions.values where record.productType == .autoRenewable {
            byGroup[record.group, default: []].append(record)
        }
        groups = byGroup.keys.sorted(by: utf8Order).map { SubscriptionGroup(name: $0, records: byGroup[$0]!) }
    }

    /// The account's balances less what each consumable transaction the view leaves out
    /// credited: one the store reported (`reported`) with no report in force in the view
    /// (`inView`), the rule entries follow. Its credit is the one the entry that first held it
    /// made (`Projector`: a `purchased` consumable entry, quantity × the product's grants), and
    /// only while it stands (not taken back by a `revoked` event or a revoking report in force,
    /// as `Projector` judges it). `consumed` names no environment: it is not scoped, so a
    /// scoped balance may be lower than the account's, even negative.
    private static func scopedBalances(
        of state: AccountState, reported: AccountState, inView scoped: AccountState, catalog: Catalog, revokedByEvent: Set<UTF8Key>
    ) -> [UTF8Key: Int64] {
        var balances = state.balances
        guard !reported.storeTransactions.isEmpty else { return balances }
        // Per transaction left out, the entry that first held it: the one that credited it, if any did.
        var firstHolders: [UTF8Key: QueueEntry] = [:]
        for entry in state.entries.values {
            guard let transaction = entry.transaction else { continue }
            let key = UTF8Key(transaction)
            guard reported.storeTransactions[key] != nil, scoped.storeTransactions[key] == nil else { continue }
            if let first = firstHolders[key], first.stateSetAt <= entry.stateSetAt { continue }
            firstHolders[key] = entry
        }
        for (key, entry) in firstHolders where entry.state == .purchased && entry.productType == .consumable {
            if revokedByEvent.contains(key) || state.storeTransactions[key]?.isRevokedByStore == true { continue }
            guard let product = catalog[entry.product] else { continue }
            for (item, amount) in product.grants {
                balances[UTF8Key(item), default: 0] -= amount * Int64(entry.quantity)
            }
        }
        return balances
    }

    func isTransferredAway(_ entry: QueueEntry) -> Bool {
        guard !transferredAway.isEmpty, let chain = entry.chain else { return false }
        return transferredAway.contains(UTF8Key(chain))
    }

    func isRevokedByEvent(_ transaction: UTF8Key) -> Bool {
        revokedByEvent.contains(transaction)
    }

    /// Revoked at `time`: by Apple's revocation in effect then, or by a `revoked` event of it
    /// or of its original transaction (final).
    func isRevoked(_ record: StoreTransactionRecord, at time: Timestamp) -> Bool {
        if record.isRevokedByStore(by: time) { return true }
        if revokedByEvent.contains(UTF8Key(record.fact.transaction)) { return true }
        return record.fact.originalTransaction.map { revokedByEvent.contains(UTF8Key($0)) } ?? false
    }

    func renewal(of record: StoreTransactionRecord) -> RenewalInfo? {
        state.renewals[UTF8Key(record.fact.chain)]?.info
    }

    // MARK: At one instant

    /// What grants each product at `time`: of `allGrants(at:)`, the one that answers for its
    /// product first (`Grant.precedes`): a subscription group's transaction in force (active or
    /// in grace), else the latest started report of a non-consumable or non-renewing product,
    /// else the first-opened entry of the device's queue that entitles. The timeline's grants.
    func grants(at time: Timestamp) -> [UTF8Key: Grant] {
        var grants: [UTF8Key: Grant] = [:]
        forEachGrant(at: time) { product, grant in
            if let current = grants[product], !grant.precedes(current) { return }
            grants[product] = grant
        }
        return grants
    }

    /// Every grant at `time`, of every product, in no particular order: each entry of the
    /// device's queue that entitles, is not transferred away and whose transaction the store
    /// did not report; each started, unexpired, unrevoked report in force of a non-consumable
    /// or non-renewing product; each subscription group's transaction in force that grants
    /// access (active or in grace). A named entitlement weighs them all (`namedEntitlements`).
    func allGrants(at time: Timestamp) -> [(product: UTF8Key, grant: Grant)] {
        var grants: [(product: UTF8Key, grant: Grant)] = []
        forEachGrant(at: time) { grants.append(($0, $1)) }
        return grants
    }

    private func forEachGrant(at time: Timestamp, _ body: (UTF8Key, Grant) -> Void) {
        let reportedOn = unscoped.storeTransactions
        for entry in unscoped.entries.granting {
            // Where the store reported on the entry's transaction (in any environment), its
            // report decides, in the view of its environment.
            if !reportedOn.isEmpty, let transaction = entry.transaction, reportedOn[UTF8Key(transaction)] != nil { continue }
            if !isTransferredAway(entry), entry.entitles(at: time, isRevoked: isRevokedByEvent) {
                body(UTF8Key(entry.product), Grant(
                    kind: .entry(openedAt: entry.openedAt), transaction: entry.transaction, entryExpiresAt: entry.expiresAt))
            }
        }
        for record in state.storeTransactions.values where record.productType == .nonConsumable || record.productType == .nonRenewing {
            guard record.hasStarted(by: time), !record.hasExpired(by: time), !isRevoked(record, at: time) else { continue }
            body(UTF8Key(record.fact.product), Grant(kind: .report, transaction: record.fact.transaction, record: record))
        }
        for group in groups {
            guard let index = group.inForce(at: time) else { continue }
            let record = group.records[index]
            let renewal = renewal(of: record)
            let status = group.status(of: index, at: time, revoked: isRevoked(record, at: time), renewal: renewal)
            guard status.grantsAccess else { continue }
            body(UTF8Key(record.fact.product), Grant(
                kind: .group(group.name), transaction: record.fact.transaction, status: status, record: record,
                upgradedAt: group.upgradedAt[index], gracePeriodEndsAt: status == .gracePeriod ? renewal?.gracePeriodEndsAt : nil))
        }
    }

    /// The products granted at `time`, in byte order: the keys of `grants(at:)`, found without
    /// building what grants them (a projection needs no more, and the change feed builds one
    /// after every event).
    func grantedProducts(at time: Timestamp) -> [UTF8Key] {
        var products: [UTF8Key] = []
        func grant(_ product: String) {
            let key = UTF8Key(product)
            if !products.contains(key) { products.append(key) }
        }
        let reportedOn = unscoped.storeTransactions
        for entry in unscoped.entries.granting {
            if !reportedOn.isEmpty, let transaction = entry.transaction, reportedOn[UTF8Key(transaction)] != nil { continue }
            if !isTransferredAway(entry), entry.entitles(at: time, isRevoked: isRevokedByEvent) { grant(entry.product) }
        }
        for record in state.storeTransactions.values where record.productType == .nonConsumable || record.productType == .nonRenewing {
            if record.hasStarted(by: time), !record.hasExpired(by: time), !isRevoked(record, at: time) { grant(record.fact.product) }
        }
        for group in groups {
            guard let index = group.inForce(at: time) else { continue }
            let record = group.records[index]
            if group.status(of: index, at: time, revoked: isRevoked(record, at: time), renewal: renewal(of: record)).grantsAccess {
                grant(record.fact.product)
            }
        }
        return products.count > 1 ? products.sorted() : products
    }

    static func startsLater(_ record: StoreTransactionRecord, than other: StoreTransactionRecord) -> Bool {
        if record.startsAt != other.startsAt { return record.startsAt > other.startsAt }
        return other.fact.transaction.utf8.lexicographicallyPrecedes(record.fact.transaction.utf8)
    }

    /// Apple's status of each group with a transaction started by `time`, by group.
    func subscriptions(at time: Timestamp) -> [SubscriptionStatus] {
        groups.compactMap { group in
            guard let index = group.inForce(at: time) else { return nil }
            let record = group.records[index]
            let fact = record.fact
            let renewal = renewal(of: record)
            return SubscriptionStatus(
                group: group.name, originalTransaction: fact.originalTransaction ?? fact.transaction,
                transaction: fact.transaction, product: fact.product,
                status: group.status(of: index, at: time, revoked: isRevoked(record, at: time), renewal: renewal),
                expiresAt: fact.expiresAt, gracePeriodEndsAt: renewal?.gracePeriodEndsAt, willRenew: renewal?.willRenew,
                renewsTo: renewal?.renewsTo, environment: fact.environment ?? renewal?.environment,
                billingPlanType: fact.billingPlanType, commitment: SubscriptionStatus.Commitment(transaction: fact, renewal: renewal),
                renewal: renewal.map(SubscriptionStatus.shown))
        }
    }

    /// The reports in force of the transactions started by `time`, by transaction id.
    func purchases(at time: Timestamp) -> [StorePurchase] {
        state.storeTransactions.values.compactMap { record in
            guard record.hasStarted(by: time) else { return nil }
            return StorePurchase(report: record.fact, isRevoked: isRevoked(record, at: time))
        }
    }

    /// The environment an unfinished entry shows: the one its transaction's report in force in
    /// the view belongs to, else its latest report's (Production when the report names none).
    func environment(of entry: QueueEntry) -> StoreEnvironment? {
        guard let transaction = entry.transaction.map({ UTF8Key($0) }) else { return nil }
        return (state.storeTransactions[transaction] ?? unscoped.storeTransactions[transaction])?.environment
    }

    // MARK: Over time

    /// Every instant where something the view holds takes effect, in order: between two of
    /// them, every answer is the same.
    var instants: [Timestamp] {
        var instants: Set<Timestamp> = []
        forEachInstant { instants.insert($0) }
        return instants.sorted()
    }

    /// The first of `instants` after `time`, without building them all (the change feed asks
    /// it after every event).
    func firstInstant(after time: Timestamp) -> Timestamp? {
        var first: Timestamp?
        forEachInstant { instant in
            if instant > time, first.map({ instant < $0 }) ?? true { first = instant }
        }
        return first
    }

    private func forEachInstant(_ body: (Timestamp) -> Void) {
        // An entry's expiry changes an answer only when it may grant.
        for entry in unscoped.entries.granting {
            if let expiresAt = entry.expiresAt { body(expiresAt) }
        }
        for record in state.storeTransactions.values {
            body(record.startsAt)
            if let expiresAt = record.fact.expiresAt { body(expiresAt) }
            if let revokedAt = record.fact.revokedAt { body(revokedAt) }
        }
        for group in groups {
            for case let upgradedAt? in group.upgradedAt { body(upgradedAt) }
        }
        for record in state.renewals.values {
            if let end = record.info.gracePeriodEndsAt { body(end) }
        }
    }
}
