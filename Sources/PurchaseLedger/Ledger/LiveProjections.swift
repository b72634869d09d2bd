import Logging
import Synchronization

/// Whether an account's state is in memory (it changed since the snapshot), and a fact of it.
enum Residence<Value: Sendable>: Sendable {
    case inMemory(Value)
    case inSnapshot

    var value: Value? {
        if case .inMemory(let value) = self { value } else { nil }
    }
}

/// The projections of an open ledger: every account that changed since the newest snapshot is
/// in memory, and a bounded cache of others; every other account is in that snapshot, read and
/// decoded when it is asked for. The ledger-wide facts about store transactions live in the
/// storage's indexes.
///
/// So an open reads the snapshot's header and replays the tail after it, whatever the log's
/// length, and memory holds what changed since the last snapshot plus the cache, not the whole
/// history.
///
/// Only the writer changes it (`publish`, `writeSnapshot`), always on the writer's thread.
/// Readers take what they need under the lock, then read storage without it.
final class LiveProjections: Sendable {
    struct Published {
        var position: UInt64 = 0
        /// The snapshot the accounts not in memory are read from; nil when every account is in memory.
        var snapshot: SnapshotHeader?
        /// Accounts that changed since `snapshot` (all of them, without one), and cached ones,
        /// equal to their state in the snapshot.
        var accounts = CompactTable<AccountState>()
        /// The accounts changed since `snapshot`, with the position of their last change: what
        /// the next snapshot writes.
        var lastChanged: [UTF8Key: UInt64] = [:]
        var accountCount = 0
        var entryCount = 0
        var unfinishedCount = 0

        init() {}

        /// The accounts of `snapshot` on disk, nothing in memory.
        init(snapshot: SnapshotHeader) {
            position = snapshot.position
            self.snapshot = snapshot
            accountCount = snapshot.accounts
            entryCount = snapshot.entries
            unfinishedCount = snapshot.unfinished
        }

        /// Takes a whole account into memory: read from the snapshot and changed since (the
        /// counts include what the snapshot held: `counted`), or new.
        mutating func adopt(_ account: UTF8Key, state: AccountState, isNew: Bool, counted: (entries: Int, unfinished: Int)) {
            precondition(!accounts.contains(account), "an owned account is not in memory")
            if isNew { accountCount += 1 }
            entryCount -= counted.entries
            unfinishedCount -= counted.unfinished
            accounts[account] = state
            let counts = state.counts
            entryCount += counts.entries
            unfinishedCount += counts.unfinished
        }

        /// Past `capacity` accounts in memory, drops unchanged ones (they are in the snapshot)
        /// down to half of it.
        mutating func trimCache(to capacity: Int) {
            guard accounts.count > capacity else { return }
            var excess = accounts.count - capacity / 2
            for account in Array(accounts.keys) where excess > 0 && lastChanged[account] == nil {
                accounts.removeValue(forKey: account)
                excess -= 1
            }
        }

        /// A forget's renames (`Forgetting`): an account in memory under an old name moves to its
        /// pseudonym, and every state in memory names the new names; the storage renamed the
        /// same in the same commit. `droppingCache` (another process forgot: this one may hold an
        /// account it loaded by name without reading its handle) drops the accounts unchanged
        /// since the snapshot, which are read again from it.
        mutating func rename(_ renames: [Forgetting.Rename], droppingCache: Bool) {
            if droppingCache {
                for account in Array(accounts.keys) where lastChanged[account] == nil { accounts.removeValue(forKey: account) }
            }
            guard !renames.isEmpty else { return }
            let names = Forgetting.newNames(renames)
            accounts.rename(names)
            lastChanged.moveKeys(names)
        }

        /// Applies a change to an account in memory.
        mutating func change(_ account: UTF8Key, _ change: AccountChange) {
            guard let moved = accounts.modifyIfPresent(account, { $0.apply(change) }) else {
                preconditionFailure("a change to an account in memory")
            }
            entryCount += moved.entries
            unfinishedCount += moved.unfinished
        }
    }

    let storage: any LedgerStorage
    let logger: Logger
    /// How many unchanged accounts may stay in memory after a snapshot.
    let cacheCapacity: Int
    let published: Mutex<Published>
    /// The catalog in force. It changes only when another process sharing the storage grew it
    /// (catalogs only grow, so an older one still describes every product it has).
    private let currentCatalog: Mutex<Catalog>

    var catalog: Catalog {
        currentCatalog.withLock { $0 }
    }

    /// Shared storage: takes the catalog another process recorded (the writer's thread only).
    func adoptCatalog(_ catalog: Catalog) {
        currentCatalog.withLock { $0 = catalog }
    }

    init(storage: any LedgerStorage, catalog: Catalog, logger: Logger, cacheCapacity: Int, published: Published) {
        self.storage = storage
        self.logger = logger
        self.cacheCapacity = cacheCapacity
        self.published = Mutex(published)
        self.currentCatalog = Mutex(catalog)
    }

    /// Everything in memory, from a state replayed in full.
    convenience init(storage: any LedgerStorage, catalog: Catalog, logger: Logger, cacheCapacity: Int, replayed state: LedgerState) {
        var published = Published()
        published.position = state.position
        published.accounts = state.accounts
        published.lastChanged = Dictionary(uniqueKeysWithValues: state.accounts.keys.lazy.map { ($0, state.position) })
        published.accountCount = state.accounts.count
        published.entryCount = state.entryCount
        published.unfinishedCount = state.unfinishedCount
        self.init(storage: storage, catalog: catalog, logger: logger, cacheCapacity: cacheCapacity, published: published)
    }

    /// The accounts of `snapshot` on disk, nothing in memory yet.
    convenience init(storage: any LedgerStorage, catalog: Catalog, logger: Logger, cacheCapacity: Int, snapshot: SnapshotHeader) {
        self.init(storage: storage, catalog: catalog, logger: logger, cacheCapacity: cacheCapacity, published: Published(snapshot: snapshot))
    }

    var position: UInt64 {
        published.withLock { $0.position }
    }

    var snapshot: SnapshotHeader? {
        published.withLock { $0.snapshot }
    }

    var counts: (position: UInt64, accounts: Int, entries: Int, unfinished: Int, inMemory: Int, changed: Int) {
        published.withLock { ($0.position, $0.accountCount, $0.entryCount, $0.unfinishedCount, $0.accounts.count, $0.lastChanged.count) }
    }

    // MARK: Reading

    /// A fact of the account when it is in memory (changed since the snapshot, or cached).
    func readInMemory<R: Sendable>(_ account: UTF8Key, _ fact: (AccountState) -> R) -> Residence<R> {
        published.withLock { state in
            state.accounts[account].map { .inMemory(fact($0)) } ?? .inSnapshot
        }
    }

    /// Those of `accounts` that are not in memory, each once (by bytes).
    func notInMemory(_ accounts: [String]) -> [String] {
        published.withLock { state in
            var seen = Set<UTF8Key>()
            return accounts.filter { account in
                let key = UTF8Key(account)
                return !state.accounts.contains(key) && seen.insert(key).inserted
            }
        }
    }

    /// The account's state in the current snapshot; nil when it has none there (or there is no
    /// snapshot). A damaged stored state is rebuilt from the account's history instead.
    func loadFromSnapshot(_ account: UTF8Key, reader: any LedgerStorageReader) throws -> AccountState? {
        guard let snapshot = published.withLock({ $0.snapshot?.position }) else { return nil }
        if let state = try Self.load(account, snapshot: snapshot, reader: reader, catalog: catalog, logger: logger) {
            return state
        }
        // Another process forgot the account, and this one has not applied the forget's record
        // yet (a catch-up on its way to it): storage keeps its states under the pseudonym of
        // the handle this process knows it by already.
        guard let handle = storage.accountNames.cachedHandle(of: account.string),
              case let pseudonym = Forgotten.pseudonym(ofHandle: handle), !sameBytes(pseudonym, account.string) else { return nil }
        return try Self.load(UTF8Key(pseudonym), snapshot: snapshot, reader: reader, catalog: catalog, logger: logger)
    }

    static func load(
        _ account: UTF8Key, snapshot: UInt64, reader: any LedgerStorageReader, catalog: Catalog, logger: Logger
    ) throws -> AccountState? {
        let stored: Result<AccountState, AccountStateCodec.Damage>? = try reader.accountState(account.string, atOrBefore: snapshot) { _, bytes in
            Result { () throws(AccountStateCodec.Damage) in try AccountStateCodec.decode(bytes) }
        }
        switch stored {
        case nil:
            return nil
        case .success(let state)?:
            return state
        case .failure(let damage)?:
            logger.warning("a snapshot's state of an account is damaged; rebuilt from the account's history", metadata: [
                "account": "\(account)", "snapshot": "\(snapshot)", "damage": "\(damage)",
            ])
            return try AccountRebuilder(reader: reader, catalog: catalog, names: AccountNames()).state(of: account.string, through: snapshot)
        }
    }

    /// What `account` owns as of `time` (nil when the ledger has no event of it), and the
    /// position the answer reflects, read in one view. Only the account's state and its
    /// revocations are read in the read transaction; the judging (a timeline's sweep over
    /// every instant of a long account) runs after it ended, so that no long read keeps the
    /// writer from reusing freed pages or the map from growing. A timeline stops, throwing
    /// `CancellationError`, when its task is cancelled.
    func projection(
        of account: UTF8Key, asOf time: Timestamp, excluding environments: Set<StoreEnvironment> = [], timeline: Bool = false
    ) throws -> (projection: AccountProjection?, position: UInt64) {
        let catalog = self.catalog
        let (view, position) = try self.view(of: account) { state, position, reader in
            let view = try state.map { state in
                let revoked = RevokedTransactions(of: state, by: position, reader: reader)
                return try AccountView(
                    account: account.string, state: state, excluding: environments, entitlements: catalog.entitlements, catalog: catalog,
                    isRevoked: revoked.isRevoked)
            }
            return (view, position)
        }
        guard let view else { return (nil, position) }
        var projection = AccountProjection(view: view, asOf: time)
        if timeline {
            projection.timeline = try view.timeline { () throws(CancellationError) in
                if Task.isCancelled { throw CancellationError() }
            }
        }
        return (projection, position)
    }

    /// Runs `body` on one consistent view of the account: its state as of the published
    /// position, that position, and which store transactions were revoked by then. Nil when the
    /// ledger has no event of the account.
    func withAccount<R>(
        _ account: UTF8Key, _ body: (AccountState, UInt64, (UTF8Key) throws -> Bool) throws -> R
    ) throws -> R? {
        try view(of: account) { state, position, reader in
            guard let state else { return nil }
            return try body(state, position, RevokedTransactions(of: state, by: position, reader: reader).isRevoked)
        }
    }

    /// The account's state (nil without one) at the published position, and that position, with
    /// the read transaction they come from.
    private func view<R>(
        of account: UTF8Key, _ body: (AccountState?, UInt64, any LedgerStorageReader) throws -> R
    ) throws -> R {
        let (inMemory, snapshot, position) = published.withLock { ($0.accounts[account], $0.snapshot?.position, $0.position) }
        return try storage.read { reader in
            var state = inMemory
            if state == nil, let snapshot {
                state = try Self.load(account, snapshot: snapshot, reader: reader, catalog: catalog, logger: logger)
            }
            return try body(state, position, reader)
        }
    }

    /// The whole state, every account decoded (for audits and tests: O(accounts)).
    func materialize() throws -> LedgerState {
        let (inMemory, snapshot, position) = published.withLock { ($0.accounts, $0.snapshot?.position, $0.position) }
        return try storage.read { reader in
            var state = try SnapshotStates.materialize(
                reader: reader, snapshot: snapshot, factsThrough: position, catalog: catalog, logger: logger)
            for (account, accountState) in inMemory.keysAndValues {
                state.replaceAccount(account, with: accountState)
            }
            state.position = position
            return state
        }
    }

    // MARK: Writing (the writer's thread only)

    /// Applies a session's changes and moves the published position.
    func publish(position: UInt64, _ body: (inout Published) -> Void) {
        published.withLock { state in
            body(&state)
            state.position = position
        }
    }

    /// The snapshot being written a slice at a time, between commits (`Snapshot/SnapshotWriting.swift`).
    let snapshotWrite = Mutex<SnapshotWrite?>(nil)

    /// The forgets this process learned of, told to whoever keeps names of its own.
    let forgets = ForgetNotices()
}
