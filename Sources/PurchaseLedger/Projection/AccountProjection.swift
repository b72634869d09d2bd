/// What an account owns, as of a time: the answer an app or a server needs at launch.
public struct AccountProjection: Sendable, Hashable {
    public var account: String
    /// Sorted product ids the account may use at the as-of time (docs/FORMAT.md, "Valid time"):
    /// - non-consumables and subscriptions with a `purchased` or `restored` entry (finished or
    ///   not) whose transaction and original transaction are not revoked and whose `expiresAt`,
    ///   if any, is after the as-of time, unless the store reported on that transaction (then
    ///   the store's report decides, below);
    /// - non-consumables and non-renewing subscriptions the store reports, started (purchased)
    ///   by then, not yet expired, and not revoked by then;
    /// - the product in force of each subscription group whose status is active or in its grace
    ///   period (`subscriptions`).
    public var entitlements: [String]
    /// Consumable balances per item: credits of purchased consumables (quantity × grant), minus
    /// `consumed`, minus refunded credits. May be negative after a refund; never clamped. In a
    /// view scoped to some environments, without the credits of consumables the store reported
    /// only in others (FORMAT.md, "Environments").
    public var balances: [String: Int64]
    /// Every entry not yet finished, in the order opened: what StoreKit redelivers at launch.
    public var unfinished: [UnfinishedTransaction]
    /// Per subscription group the store reported on, Apple's status; by group.
    public var subscriptions: [SubscriptionStatus] = []
    /// The store's report in force for each transaction, by transaction id.
    public var storeTransactions: [StorePurchase] = []
    /// The customer's consent to share consumption data with Apple (the `consumptionConsent`
    /// in force); nil when none was recorded.
    public var consumptionConsent: Bool? = nil
    /// When asked for: for each product granted at some instant, the intervals it was.
    public var timeline: [ProductTimeline]? = nil
    /// The customer's app transaction, when Apple's was read (`appTransaction` events).
    public var appTransaction: AppTransactionInfo? = nil
    /// Each named entitlement of the catalog, in the catalog's order (none without any).
    public var namedEntitlements: [NamedEntitlementStatus] = []
}

/// A queue entry that has not been finished.
public struct UnfinishedTransaction: Sendable, Hashable {
    public var payment: String
    public var product: String
    public var state: QueueEntryState
    /// The store transaction id, once `purchased` or `restored`.
    public var transaction: String?
    public var downloads: [DownloadStatus]
    /// The store's environment of the transaction, when the store reported it.
    public var environment: StoreEnvironment? = nil
}

public struct DownloadStatus: Sendable, Hashable {
    public var id: String
    public var state: DownloadState
    public var progress: Double
}

/// The store's report in force about one transaction, and whether it stands revoked (by the
/// store or by a `revoked` event).
public struct StorePurchase: Sendable, Hashable {
    public var report: StoreTransaction
    public var isRevoked: Bool
}

extension AccountProjection {
    /// What the account had at `time`, as the state knows it (FORMAT.md, "Valid time").
    /// `excluding` leaves out the store's reports from those environments: per transaction the
    /// report in force is the latest among the other environments' ("Environments"), so that,
    /// for example, sandbox purchases never count; the balances leave out the credits of
    /// consumables bought only there (with `catalog`'s grants). The unfinished set is not
    /// scoped.
    init(
        account: String, state: AccountState, asOf time: Timestamp, excluding excluded: Set<StoreEnvironment> = [],
        entitlements definitions: [Catalog.Entitlement] = [], catalog: Catalog?, isRevoked: (UTF8Key) throws -> Bool
    ) rethrows {
        self.init(
            view: try AccountView(
                account: account, state: state, excluding: excluded, entitlements: definitions, catalog: catalog, isRevoked: isRevoked),
            asOf: time)
    }

    /// The same, with the account's timeline when `timeline` is set.
    init(
        account: String, state: AccountState, asOf time: Timestamp, excluding excluded: Set<StoreEnvironment>, timeline: Bool,
        entitlements definitions: [Catalog.Entitlement] = [], catalog: Catalog?, isRevoked: (UTF8Key) throws -> Bool
    ) rethrows {
        let view = try AccountView(
            account: account, state: state, excluding: excluded, entitlements: definitions, catalog: catalog, isRevoked: isRevoked)
        self.init(view: view, asOf: time)
        if timeline { self.timeline = view.timeline() }
    }

    init(view: AccountView, asOf time: Timestamp) {
        let state = view.unscoped
        account = view.account
        entitlements = view.grantedProducts(at: time).map(\.string)
        // Balance items are catalog grant items, which the catalog keeps distinct as strings too.
        balances = Dictionary(view.balances.map { ($0.key.string, $0.value) }, uniquingKeysWith: { first, _ in first })
        unfinished = state.entries.unfinished.map { entry in
            UnfinishedTransaction(
                payment: entry.payment, product: entry.product, state: entry.state, transaction: entry.transaction,
                downloads: entry.downloads.isEmpty ? [] : entry.downloads.map { DownloadStatus(id: $0.id, state: $0.state, progress: $0.progress) },
                environment: view.environment(of: entry))
        }
        subscriptions = view.subscriptions(at: time)
        storeTransactions = view.purchases(at: time)
        consumptionConsent = state.consent?.consented
        appTransaction = state.appTransaction?.info
        namedEntitlements = view.namedEntitlements(view.entitlementDefinitions, at: time)
    }
}
