/// What an account owns, as of a time: the answer an app or a server needs at launch.
public struct AccountProjection: Sendable, Hashable {
    public var account: String
    /// Sorted product ids the account may use now:
    /// - non-consumables and subscriptions with a `purchased` or `restored` entry (finished or
    ///   not) whose transaction and original transaction are not revoked and whose `expiresAt`,
    ///   if any, is after the as-of time, unless the store reported on that transaction (then
    ///   the store's report decides, below);
    /// - non-consumables and non-renewing subscriptions the store reports, not revoked and not
    ///   expired;
    /// - the product in force of each subscription group whose status is active or in its grace
    ///   period (`subscriptions`).
    public var entitlements: [String]
    /// Consumable balances per item: credits of purchased consumables (quantity × grant), minus
    /// `consumed`, minus refunded credits. May be negative after a refund; never clamped.
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
    /// `excluding` drops the store's reports from those environments (and the entries holding
    /// their transactions) from entitlements, subscriptions and store transactions, so that, for
    /// example, sandbox purchases never count. Balances are not filtered.
    init(
        account: String, state: AccountState, asOf time: Timestamp, excluding excluded: Set<StoreEnvironment> = [],
        isRevoked: (UTF8Key) throws -> Bool
    ) rethrows {
        var shown = state
        if !excluded.isEmpty {
            shown.storeTransactions = state.storeTransactions.filter { !$0.value.isIn(excluded) }
            shown.renewals = state.renewals.filter { $0.value.info.environment.map(excluded.contains) != true }
        }
        var entitled: Set<UTF8Key> = []
        var unfinished: [QueueEntry] = []
        for entry in state.entries.values {
            if !entry.isFinished { unfinished.append(entry) }
            // Where the store reported on the entry's transaction, its report decides.
            if let transaction = entry.transaction, state.storeTransactions[UTF8Key(transaction)] != nil { continue }
            if try entry.entitles(at: time, isRevoked: isRevoked) { entitled.insert(UTF8Key(entry.product)) }
        }
        var purchases: [StorePurchase] = []
        for record in shown.storeTransactions.sorted(by: { $0.key < $1.key }).map(\.value) {
            let revoked = try record.isRevoked(isRevoked: isRevoked)
            purchases.append(StorePurchase(report: record.fact, isRevoked: revoked))
            switch record.productType {
            case .nonConsumable, .nonRenewing:
                if !revoked, record.fact.expiresAt.map({ $0 > time }) ?? true { entitled.insert(UTF8Key(record.fact.product)) }
            case .consumable, .autoRenewable:
                break
            }
        }
        let subscriptions = try SubscriptionStatus.groups(of: shown, asOf: time, isRevoked: isRevoked)
        for subscription in subscriptions where subscription.status.grantsAccess {
            entitled.insert(UTF8Key(subscription.product))
        }
        unfinished.sort { $0.openedAt < $1.openedAt }
        self.account = account
        entitlements = entitled.sorted().map(\.string)
        // Balance items are catalog grant items, which the catalog keeps distinct as strings too.
        balances = Dictionary(state.balances.map { ($0.key.string, $0.value) }, uniquingKeysWith: { first, _ in first })
        self.unfinished = unfinished.map { entry in
            UnfinishedTransaction(
                payment: entry.payment, product: entry.product, state: entry.state, transaction: entry.transaction,
                downloads: entry.downloads.map { DownloadStatus(id: $0.id, state: $0.state, progress: $0.progress) },
                environment: entry.transaction.flatMap { state.storeTransactions[UTF8Key($0)]?.fact.environment })
        }
        self.subscriptions = subscriptions
        storeTransactions = purchases
        consumptionConsent = state.consent?.consented
    }
}

extension StoreTransactionRecord {
    func isIn(_ environments: Set<StoreEnvironment>) -> Bool {
        fact.environment.map(environments.contains) ?? false
    }
}
