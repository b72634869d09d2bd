import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An LMDB environment: one memory-mapped data file in a directory, with named tables.
///
/// - Reads run in read-only transactions opened with `MDB_NOTLS`, so they are not tied to a
///   thread and any number of tasks can read at once.
/// - Writes run in a synchronous closure (`write`), so a write transaction can never span an
///   `await`: it begins and commits on the same thread, as LMDB requires.
/// - The map starts at `initialMapSize` and grows by itself: when a write hits `MDB_MAP_FULL`
///   it is aborted, the map grows, and the closure runs again from the start.
public final class Environment: @unchecked Sendable {
    /// How commits reach the disk.
    public enum Durability: Sendable, Hashable {
        /// Every commit is flushed to disk (fsync) before `write` returns. The default.
        case synchronous
        /// Commits are not flushed (`MDB_NOSYNC`): much faster, but after an operating-system
        /// crash or power loss the last commits may be lost or, on some file systems, the
        /// environment damaged. A process crash alone loses nothing. Only for data that can be
        /// rebuilt (benchmarks, tests, bulk loads followed by `sync()`).
        case noSync
    }

    public struct Configuration: Sendable {
        /// The map size to start with; grown on demand. LMDB keeps a larger size already
        /// recorded in an existing environment.
        public var initialMapSize: Int = 1 << 20
        /// The largest map the environment may grow to; nil means no limit. A write that needs
        /// more throws `LMDBError` with code `.mapFull`.
        public var maximumMapSize: Int? = nil
        public var maxTables: Int = 32
        public var maxReaders: Int = 256
        public var readOnly: Bool = false
        /// Opens without the lock file (`MDB_NOLOCK`): only for a process that has excluded
        /// every other one itself (`ExclusiveEnvironmentUse`), since LMDB then coordinates no
        /// reader or writer. It leaves this process's lock on the lock file alone.
        public var withoutLockFile: Bool = false
        public var durability: Durability = .synchronous
        /// Permissions of created files.
        public var fileMode: UInt32 = 0o644
        /// Each time the read-only transactions' lookups (`withValue`, each counting at least
        /// the page its value lies in) and scans have handed out this many bytes since the last
        /// time, the read that crossed it lets go of every page of the map the reads handed out
        /// values from, and of those between (`ReadTransaction.releaseEveryReadPage`): what
        /// they keep resident stays about that much, however long they run. Reads through a
        /// cursor of the caller's own (`withCursor`) count nothing, and what they map goes only
        /// when it lies in that span. nil (or 0): only when asked.
        public var releasesReadPagesEvery: Int? = nil

        public init() {}
    }

    private let handle: LMDBCall.Environment
    private let configuration: Configuration
    private let mapLock = ReadWriteLock()
    /// Guarded by `mapLock` held exclusively; read under the shared lock.
    private var mapSize: Int
    /// What the reads of the current map handed out; forgotten, under `mapLock` held
    /// exclusively, before the map is mapped again.
    let readSpan: MapReadSpan
    private let closed = Atomic<Bool>(false)
    /// Set when a map growth failed half-way: LMDB's map is gone, so nothing may touch it again.
    private let failed = Atomic<Bool>(false)
    private let growthCount = Atomic<Int>(0)
    /// Transactions open on this thread: a second would deadlock against a pending map growth.
    private let depth = ThreadLocalCounter()

    /// Opens (creating if writable and absent) the environment in `directory`, which must exist.
    public init(directory: String, configuration: Configuration = .init()) throws(LMDBError) {
        self.configuration = configuration
        readSpan = MapReadSpan(releasingEvery: configuration.releasesReadPagesEvery)
        let handle = try LMDBCall.createEnvironment()
        do {
            try LMDBCall.setMaxTables(handle, configuration.maxTables)
            try LMDBCall.setMaxReaders(handle, configuration.maxReaders)
            // An existing environment keeps the map size recorded in its file (LMDB reads it
            // when none was set); a new one starts at `initialMapSize`.
            if !Self.dataFileExists(in: directory) {
                try LMDBCall.setMapSize(handle, Self.roundedMapSize(configuration.initialMapSize))
            }
            var flags: EnvironmentFlags = [.noThreadLocalStorage]
            if configuration.readOnly { flags.insert(.readOnly) }
            if configuration.withoutLockFile { flags.insert(.noLock) }
            if configuration.durability == .noSync { flags.insert(.noSync) }
            try LMDBCall.open(handle, path: directory, flags: flags, mode: configuration.fileMode)
            var size = try LMDBCall.info(handle).mapSize
            if size < configuration.initialMapSize, !configuration.readOnly {
                try LMDBCall.setMapSize(handle, Self.roundedMapSize(configuration.initialMapSize))
                size = try LMDBCall.info(handle).mapSize
            }
            // Reader slots left by crashed processes; best effort.
            _ = try? LMDBCall.clearStaleReaders(handle)
            mapSize = size
        } catch {
            LMDBCall.close(handle)
            throw error
        }
        self.handle = handle
    }

    private static func dataFileExists(in directory: String) -> Bool {
        access(directory + "/data.mdb", F_OK) == 0
    }

    deinit {
        close()
    }

    /// `ReadTransaction.releaseEveryReadPage` outside a transaction: after a long read made of
    /// many short transactions, what they left mapped. Nothing on a thread inside a transaction
    /// (its shared hold on the map's lock could wait behind a growth that waits for it), nor
    /// once the environment is closed or its map gone.
    public func releaseEveryReadPage() {
        guard depth.value == 0 else { return }
        mapLock.withShared {
            guard !closed.load(ordering: .acquiring), !failed.load(ordering: .acquiring),
                  let (low, high) = readSpan.current else { return }
            LMDBCall.releaseMappedPages(from: low, to: high)
        }
    }

    /// Closes the environment. Waits for transactions of this process to end; later calls throw.
    public func close() {
        mapLock.withExclusive {
            if !closed.exchange(true, ordering: .acquiringAndReleasing) {
                LMDBCall.close(handle)
            }
        }
    }

    /// Opens the named tables once, in one transaction. Table handles stay valid until `close()`.
    /// On a writable environment missing tables are created.
    public func openTables<R>(_ body: (borrowing TableOpener) throws -> R) throws -> R {
        try withTransaction(readOnly: configuration.readOnly) { txn in
            let opener = TableOpener(transaction: txn.live, create: !configuration.readOnly)
            return try body(opener)
        } finish: { txn in
            try LMDBCall.commit(txn.end())
        }
    }

    /// Runs `body` in a read-only transaction. Values must be copied or decoded inside `body`.
    public func read<R>(_ body: (ReadTransaction) throws -> R) throws -> R {
        try withTransaction(readOnly: true, body) { txn in LMDBCall.abort(txn.end()) }
    }

    /// Runs `body` in a write transaction and commits it; with `.synchronous` durability the
    /// commit is on disk when this returns. Throwing from `body`, or calling `discard()` on the
    /// transaction, aborts it: nothing is written.
    ///
    /// `body` may run more than once: when the map is full the transaction is aborted, the map
    /// grown, and `body` called again on a fresh transaction. It must therefore derive
    /// everything it writes from its inputs and the transaction, not from state it mutated on
    /// an earlier, aborted attempt.
    public func write<R>(_ body: (WriteTransaction) throws -> R) throws -> R {
        precondition(!configuration.readOnly, "write transaction on a read-only LMDB environment")
        while true {
            do {
                return try withTransaction(readOnly: false) { txn in
                    try body(txn as! WriteTransaction)
                } finish: { txn in
                    let write = txn as! WriteTransaction
                    if write.isDiscarded {
                        LMDBCall.abort(write.end())
                    } else {
                        try LMDBCall.commit(write.end())
                    }
                }
            } catch let error as LMDBError where error.code == .mapFull {
                try grow(after: error)
            }
        }
    }

    /// Flushes buffered commits to disk (useful with `.noSync`).
    public func sync() throws {
        try mapLock.withShared {
            try checkOpen()
            try LMDBCall.sync(handle, force: true)
        }
    }

    public struct Info: Sendable, Hashable {
        /// Current size of the memory map, in bytes.
        public var mapSize: Int
        /// Bytes of the data file in use (last used page + 1, times the page size).
        public var usedSize: Int
        public var pageSize: Int
        public var maxReaders: Int
        /// Reader slots in use, by any process.
        public var readers: Int
        /// How many times this process grew the map.
        public var growthCount: Int
    }

    /// Frees the reader slots of processes that died holding them (which would keep freed
    /// pages from being reused); returns how many.
    @discardableResult
    public func clearStaleReaders() throws -> Int {
        try mapLock.withShared { () throws -> Int in
            try checkOpen()
            return try LMDBCall.clearStaleReaders(handle)
        }
    }

    public func info() throws -> Info {
        try mapLock.withShared {
            try checkOpen()
            let info = try LMDBCall.info(handle)
            let pageSize = try LMDBCall.pageSize(handle)
            return Info(
                mapSize: info.mapSize, usedSize: (info.lastPage + 1) * pageSize, pageSize: pageSize,
                maxReaders: info.maxReaders, readers: info.readers,
                growthCount: growthCount.load(ordering: .relaxed))
        }
    }

    // MARK: Private

    private func checkOpen() throws(LMDBError) {
        if closed.load(ordering: .acquiring) {
            throw LMDBError(code: .unusable, operation: "use of a closed environment")
        }
        if failed.load(ordering: .acquiring) {
            throw LMDBError(code: .unusable, operation: "use of an environment whose map could not grow")
        }
    }

    /// Begins a transaction under the shared map lock, runs `body`, then `finish` (commit or
    /// abort). A throw from `body` aborts. `MDB_MAP_RESIZED` (another process grew the map)
    /// adopts the new size and begins again.
    private func withTransaction<R>(
        readOnly: Bool, _ body: (ReadTransaction) throws -> R,
        finish: (ReadTransaction) throws -> Void
    ) throws -> R {
        // A second transaction on one thread would wait, under the shared map lock, for a map
        // growth that waits for the first: refuse it instead of hanging.
        guard depth.value == 0 else {
            throw LMDBError(code: .unusable, operation: "nested transaction", detail: "a thread may hold one transaction at a time")
        }
        depth.value = 1
        defer { depth.value = 0 }
        var readerRetries = 0
        while true {
            do {
                return try mapLock.withShared {
                    try checkOpen()
                    let raw = try LMDBCall.beginTransaction(handle, readOnly: readOnly)
                    let txn = readOnly ? ReadTransaction(handle: raw, environmentSpan: readSpan)
                        : WriteTransaction(handle: raw, environmentSpan: readSpan, readsFromTheMap: false)
                    let result: R
                    do {
                        result = try body(txn)
                    } catch {
                        LMDBCall.abort(txn.end())
                        throw error
                    }
                    try finish(txn)
                    return result
                }
            } catch let error as LMDBError where error.code == .mapResized {
                try mapLock.withExclusive {
                    try checkOpen()
                    readSpan.forget()
                    do {
                        try LMDBCall.setMapSize(handle, 0)
                    } catch {
                        // As in `grow`: LMDB unmapped the old map before failing to map the new one.
                        failed.store(true, ordering: .releasing)
                        throw error
                    }
                    mapSize = try LMDBCall.info(handle).mapSize
                }
            } catch let error as LMDBError where error.code == .readersFull {
                // Reclaim slots left by dead processes, or wait briefly for live readers to end.
                let cleared = try mapLock.withShared { () throws -> Int in
                    try checkOpen()
                    return try LMDBCall.clearStaleReaders(handle)
                }
                readerRetries += 1
                if cleared == 0 {
                    guard readerRetries <= 20 else { throw error }
                    usleep(UInt32(1000 * readerRetries))
                }
            }
        }
    }

    /// Grows the map after `MDB_MAP_FULL`: doubling up to 1 GiB, then 1 GiB at a time, never
    /// beyond `maximumMapSize` (at which point the original error is rethrown).
    private func grow(after error: LMDBError) throws {
        try mapLock.withExclusive {
            try checkOpen()
            let current = mapSize
            var next = current < 1 << 30 ? current * 2 : current + (1 << 30)
            if let maximum = configuration.maximumMapSize {
                guard current < maximum else { throw error }
                next = min(next, maximum)
            }
            readSpan.forget()
            do {
                try LMDBCall.setMapSize(handle, Self.roundedMapSize(next))
            } catch {
                // LMDB unmapped the old map before failing to map the new one: the environment
                // must not be used again (the process keeps running; reopening recovers).
                failed.store(true, ordering: .releasing)
                throw error
            }
            mapSize = try LMDBCall.info(handle).mapSize
            growthCount.add(1, ordering: .relaxed)
        }
    }

    /// Map sizes are whole multiples of 64 KiB, comfortably a multiple of any OS page size.
    private static func roundedMapSize(_ size: Int) -> Int {
        let unit = 1 << 16
        return max(unit, (size + unit - 1) / unit * unit)
    }
}
