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
        var accounts: [UTF8Key: AccountState] = [:]
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
            precondition(accounts[account] == nil, "an owned account is not in memory")
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

        /// Applies a change to an account in memory.
        mutating func change(_ account: UTF8Key, _ change: AccountChange) {
            guard let moved = accounts[account]?.apply(change) else {
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
    private let published: Mutex<Published>
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
        published.lastChanged = state.accounts.mapValues { _ in state.position }
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
                return state.accounts[key] == nil && seen.insert(key).inserted
            }
        }
    }

    /// The account's state in the current snapshot; nil when it has none there (or there is no
    /// snapshot). A damaged stored state is rebuilt from the account's history instead.
    func loadFromSnapshot(_ account: UTF8Key, reader: any LedgerStorageReader) throws -> AccountState? {
        guard let snapshot = published.withLock({ $0.snapshot?.position }) else { return nil }
        return try Self.load(account, snapshot: snapshot, reader: reader, catalog: catalog, logger: logger)
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
            return try AccountRebuilder(reader: reader, catalog: catalog).state(of: account.string, through: snapshot)
        }
    }

    /// What `account` owns as of `time` (nil when the ledger has no event of it), and the
    /// position the answer reflects, read in one view.
    func projection(
        of account: UTF8Key, asOf time: Timestamp, excluding environments: Set<StoreEnvironment> = []
    ) throws -> (projection: AccountProjection?, position: UInt64) {
        try view(of: account) { state, position, reader in
            guard let state else { return (nil, position) }
            let projection = try AccountProjection(account: account.string, state: state, asOf: time, excluding: environments) {
                try Self.isRevoked($0, by: position, reader: reader)
            }
            return (projection, position)
        }
    }

    /// Runs `body` on one consistent view of the account: its state as of the published
    /// position, that position, and which store transactions were revoked by then. Nil when the
    /// ledger has no event of the account.
    func withAccount<R>(
        _ account: UTF8Key, _ body: (AccountState, UInt64, (UTF8Key) throws -> Bool) throws -> R
    ) throws -> R? {
        try view(of: account) { state, position, reader in
            guard let state else { return nil }
            return try body(state, position) { try Self.isRevoked($0, by: position, reader: reader) }
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

    private static func isRevoked(_ transaction: UTF8Key, by position: UInt64, reader: any LedgerStorageReader) throws -> Bool {
        try reader.revocation(ofTransaction: transaction.string).map { $0 <= position } ?? false
    }

    /// The whole state, every account decoded (for audits and tests: O(accounts)).
    func materialize() throws -> LedgerState {
        let (inMemory, snapshot, position) = published.withLock { ($0.accounts, $0.snapshot?.position, $0.position) }
        return try storage.read { reader in
            var state = try SnapshotStates.materialize(
                reader: reader, snapshot: snapshot, factsThrough: position, catalog: catalog, logger: logger)
            for (account, accountState) in inMemory {
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

    // MARK: Snapshots (the writer's thread only)

    /// A snapshot being written: the states of the accounts changed since the last snapshot,
    /// captured at `header.position`, and how many of them are already stored.
    struct SnapshotWrite {
        var header: SnapshotHeader
        var states: [(account: UTF8Key, state: AccountState)]
        var written = 0
        /// No usable snapshot before it: it replaces whatever was stored (unless other processes
        /// share the storage and may read what is stored).
        var replacesAll: Bool
        var started: ContinuousClock.Instant
    }

    /// The snapshot being written a slice at a time, between commits.
    private let snapshotWrite = Mutex<SnapshotWrite?>(nil)

    var isWritingSnapshot: Bool {
        snapshotWrite.withLock { $0 != nil }
    }

    /// Captures the accounts changed since the last snapshot, at the current position, as the
    /// next snapshot to write. False when nothing changed since the last one (or one is already
    /// being written).
    func beginSnapshot() -> Bool {
        guard !isWritingSnapshot else { return false }
        let (changed, previous, position, counts) = published.withLock { state in
            (state.lastChanged.keys.map { ($0, state.accounts[$0]!) }, state.snapshot, state.position,
             (state.accountCount, state.entryCount, state.unfinishedCount))
        }
        guard position > 0, position != previous?.position else { return false }
        let header = SnapshotHeader(
            position: position, fingerprint: SnapshotFormat.fingerprint, previous: previous?.position ?? 0,
            accountsWritten: changed.count, accounts: counts.0, entries: counts.1, unfinished: counts.2,
            createdAt: .now())
        // In the order LMDB keys account states (length, then bytes), so that each slice
        // rewrites a run of neighbouring pages instead of pages all over the table.
        let ordered = changed.sorted { lhs, rhs in
            let (left, right) = (lhs.0.string.utf8, rhs.0.string.utf8)
            return left.count != right.count ? left.count < right.count : left.lexicographicallyPrecedes(right)
        }
        snapshotWrite.withLock {
            $0 = SnapshotWrite(header: header, states: ordered, replacesAll: previous == nil, started: .now)
        }
        return true
    }

    /// Writes the next slice of the snapshot being written, in its own write transaction: states
    /// until `budget` has passed (checked every 32). The slice that
    /// stores the last state also stores the header, which is what makes the snapshot exist:
    /// readers, opens and `verify` see no state of a snapshot without its header, so a crash
    /// between slices leaves the previous snapshot in force (and states the next one replaces).
    /// Returns the header once the snapshot is complete.
    @discardableResult
    func writeSnapshotSlice(keep: Int, budget: Duration = .seconds(3600)) throws -> SnapshotHeader? {
        guard let job = snapshotWrite.withLock({ $0 }) else { return nil }
        let position = job.header.position
        let clock = ContinuousClock()
        let sliceStarted = clock.now
        // The write may run twice (the map grows and it is retried): it changes nothing outside.
        let written = try storage.write { writer -> Int? in
            if job.written == 0, job.replacesAll, !storage.isShared {
                // A full snapshot replaces whatever was stored (possibly unusable snapshots).
                try writer.removeAllSnapshots()
            }
            // Versions any stored snapshot or this one reads are kept; the others go (on shared
            // storage, not those above the newest stored snapshot: another process's snapshot in
            // progress may read them).
            let stored = try writer.snapshotHeaders().map(\.position)
            // Shared storage: another process stored a snapshot at or past this one's position
            // since it began. Pruning only spares versions above the newest stored snapshot, so
            // the older versions this one reads for its unchanged accounts may be gone: it is
            // dropped (what its slices wrote are true states at its position, harmless, pruned
            // later).
            if storage.isShared, let newest = stored.max(), newest >= position { return nil }
            let retained = stored + [position]
            let keepingAbove = storage.isShared ? stored.max() ?? 0 : UInt64.max
            var index = job.written
            var accounts: [String] = []
            while index < job.states.count {
                let (account, state) = job.states[index]
                try writer.putAccountState(AccountStateCodec.encode(state), account: account.string, version: position)
                accounts.append(account.string)
                index += 1
                if accounts.count % 32 == 0, clock.now - sliceStarted > budget { break }
            }
            try SnapshotStates.pruneVersions(writer: writer, retained: retained, accounts: accounts, keepingAbove: keepingAbove)
            if index == job.states.count {
                try writer.putSnapshotHeader(job.header.encode(), position: position)
                // Versions only the dropped snapshots read go when their accounts are next written.
                for old in try writer.snapshotHeaders().map(\.position).dropLast(keep) {
                    try writer.deleteSnapshotHeader(position: old)
                }
            }
            return index
        }
        guard let written else {
            // The ledger then moves to the newer one (`Ledger.followSnapshots`).
            snapshotWrite.withLock { $0 = nil }
            logger.debug("dropped a snapshot another process's newer one overtook", metadata: ["position": "\(position)"])
            return nil
        }
        guard written == job.states.count else {
            snapshotWrite.withLock { $0?.written = written }
            return nil
        }
        snapshotWrite.withLock { $0 = nil }
        published.withLock { state in
            state.snapshot = job.header
            // What changed up to the snapshot is in it now; what changed since stays in memory
            // for the next one. The rest of memory is a cache, trimmed to its capacity.
            state.lastChanged = state.lastChanged.filter { $0.value > position }
            state.trimCache(to: cacheCapacity)
        }
        logger.info("wrote snapshot", metadata: [
            "position": "\(position)", "accounts": "\(job.states.count)", "took": "\(clock.now - job.started)",
        ])
        return job.header
    }

    /// Shared storage: moves to a newer snapshot another process wrote, so that reads go to a
    /// snapshot that pruning keeps. Valid once this process has applied every event through the
    /// snapshot's position: an account not in memory is unchanged since this process's own
    /// snapshot, hence the same in the newer one; accounts in memory are current, and those
    /// changed only up to the newer snapshot need not be written again. A snapshot of its own
    /// in progress at or before the newer one's position is overtaken, and dropped; a later one
    /// goes on (it captured its accounts when it began, and reads nothing of the one in force).
    func adopt(_ header: SnapshotHeader) {
        precondition(header.position <= position, "a snapshot is adopted once its events are applied")
        if let writing = snapshotWrite.withLock({ $0?.header.position }), writing <= header.position {
            abandonSnapshot()
        }
        published.withLock { state in
            guard header.position > state.snapshot?.position ?? 0 else { return }
            state.snapshot = header
            state.lastChanged = state.lastChanged.filter { $0.value > header.position }
            state.trimCache(to: cacheCapacity)
        }
    }

    /// Shared storage: starts over from a snapshot another process wrote past everything this
    /// one has applied (the caller then applies the events after it). Nothing in memory is
    /// needed: every account changed up to the snapshot's position is in it. This process's own
    /// snapshot (older) may read versions that pruning no longer keeps, so it is not read again.
    func restart(from header: SnapshotHeader) {
        precondition(header.position > position, "a restart moves forward")
        abandonSnapshot()
        published.withLock { $0 = Published(snapshot: header) }
    }

    /// Drops the snapshot being written (after a failure): nothing of it is in force, and its
    /// accounts stay changed, for the next one.
    func abandonSnapshot() {
        snapshotWrite.withLock { $0 = nil }
    }

    /// Writes a snapshot now, whole: finishes the one being written, then, when anything changed
    /// since, one at the current position. Returns the newest header written, nil when nothing
    /// changed since the last snapshot.
    @discardableResult
    func writeSnapshot(keep: Int) throws -> SnapshotHeader? {
        var header = try writeSnapshotSlice(keep: keep)
        if beginSnapshot() {
            header = try writeSnapshotSlice(keep: keep)
        }
        return header
    }
}
