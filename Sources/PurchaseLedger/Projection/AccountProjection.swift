/// What an account owns, as of a time: the answer an app or a server needs at launch.
public struct AccountProjection: Sendable, Hashable {
    public var account: String
    /// Sorted product ids of non-consumables and subscriptions with a `purchased` or `restored`
    /// entry (finished or not) whose transaction and original transaction are not revoked and
    /// whose `expiresAt`, if any, is after the as-of time.
    public var entitlements: [String]
    /// Consumable balances per item: credits of purchased consumables (quantity × grant), minus
    /// `consumed`, minus refunded credits. May be negative after a refund; never clamped.
    public var balances: [String: Int64]
    /// Every entry not yet finished, in the order opened: what StoreKit redelivers at launch.
    public var unfinished: [UnfinishedTransaction]
}

/// A queue entry that has not been finished.
public struct UnfinishedTransaction: Sendable, Hashable {
    public var payment: String
    public var product: String
    public var state: QueueEntryState
    /// The store transaction id, once `purchased` or `restored`.
    public var transaction: String?
    public var downloads: [DownloadStatus]
}

public struct DownloadStatus: Sendable, Hashable {
    public var id: String
    public var state: DownloadState
    public var progress: Double
}

extension AccountProjection {
    init(account: String, state: AccountState, asOf time: Timestamp, isRevoked: (UTF8Key) throws -> Bool) rethrows {
        var entitled: Set<UTF8Key> = []
        var unfinished: [QueueEntry] = []
        for entry in state.entries.values {
            if try entry.entitles(at: time, isRevoked: isRevoked) { entitled.insert(UTF8Key(entry.product)) }
            if !entry.isFinished { unfinished.append(entry) }
        }
        unfinished.sort { $0.openedAt < $1.openedAt }
        self.account = account
        entitlements = entitled.sorted().map(\.string)
        // Balance items are catalog grant items, which the catalog keeps distinct as strings too.
        balances = Dictionary(state.balances.map { ($0.key.string, $0.value) }, uniquingKeysWith: { first, _ in first })
        self.unfinished = unfinished.map { entry in
            UnfinishedTransaction(
                payment: entry.payment, product: entry.product, state: entry.state, transaction: entry.transaction,
                downloads: entry.downloads.map { DownloadStatus(id: $0.id, state: $0.state, progress: $0.progress) })
        }
    }
}
