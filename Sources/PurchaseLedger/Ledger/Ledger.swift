import LMDB
import Logging
import Synchronization

/// A purchase ledger: an append-only, durable log of payment-queue events in a directory, and
/// the projections rebuilt from it (entitlements, balances, unfinished transactions).
///
/// ```swift
/// let ledger = try Ledger.open(at: "/var/lib/store/ledger", catalog: catalog)
/// let outcome = try await ledger.append(event)          // durable when it returns
/// let owned = ledger.projection(of: "user-42")
/// await ledger.close()
/// ```
///
/// - One writer: appends from any number of tasks are queued to a single writer, validated in
///   order against the state each leaves behind, and committed together; each caller resumes
///   after the commit that holds its event is on disk.
/// - Many readers: queries answer from the in-memory projections (kept up to date on every
///   append, rebuilt from the log at open); log reads use their own LMDB read transactions.
/// - One process writes a ledger at a time (an advisory lock enforces it); any number may open
///   it read-only.
public final class Ledger: Sendable {
    public struct Configuration: Sendable {
        /// `.synchronous` by default: an append returns only once its commit is on disk.
        /// `.noSync` skips the flush, and may lose the last appends on an OS crash or power loss.
        public var durability: Environment.Durability = .synchronous
        /// Open for reading only: appends throw `StorageError.readOnly`.
        public var readOnly = false
        /// The map size to start with; the map grows by itself.
        public var initialMapSize = 16 << 20
        /// The largest the data file may grow to; appends beyond throw `StorageError.storageFull`.
        public var maximumSize: Int? = nil
        /// Most events committed in one transaction by group commit.
        public var maximumBatchEvents = 4096
        public var logger = Logger(label: "PurchaseLedger")

        public init() {}
    }

    public let directory: String
    public let catalog: Catalog
    let configuration: Configuration
    let storage: any LedgerStorage
    let log: LogReader
    let state: Mutex<LedgerState>
    private let writeQueue: WriteQueue?
    private let writerLock: ExclusiveFileLock?
    private let isClosed = Atomic<Bool>(false)

    /// Opens the ledger in `directory`, creating it (and the directory) when it does not exist
    /// yet, and rebuilds the projections by replaying the log.
    ///
    /// - Parameter catalog: required to create a ledger. For an existing one it may be omitted;
    ///   given, it must keep every product the ledger has unchanged, and new products are added
    ///   to the ledger's catalog from the next position on.
    public static func open(
        at directory: String, catalog: Catalog? = nil, configuration: Configuration = .init()
    ) throws -> Ledger {
        try Ledger(directory: directory, catalog: catalog, configuration: configuration)
    }

    private init(directory: String, catalog newCatalog: Catalog?, configuration: Configuration) throws {
        let clock = ContinuousClock()
        let started = clock.now
        self.directory = directory
        self.configuration = configuration
        let logger = configuration.logger

        if configuration.readOnly {
            try LedgerDirectory.checkExists(directory)
        } else {
            try LedgerDirectory.prepareForWriting(directory, creating: newCatalog != nil)
        }
        storage = try LedgerDirectory.openStorage(directory, configuration: configuration)
        var lock: ExclusiveFileLock?
        do {
            if !configuration.readOnly {
                lock = try LedgerDirectory.lockForWriting(directory)
            }
            log = LogReader(storage: storage)
            catalog = try Self.establishCatalog(newCatalog, storage: storage, directory: directory, logger: logger)
            let last = try log.lastPosition()
            state = Mutex(try log.state(at: last, catalog: catalog))
            logger.info("opened ledger", metadata: [
                "directory": "\(directory)", "events": "\(last)",
                "replay": "\(clock.now - started)", "readOnly": "\(configuration.readOnly)",
            ])
        } catch {
            lock?.release()
            storage.close()
            throw error
        }
        writerLock = lock
        if configuration.readOnly {
            writeQueue = nil
        } else {
            // The queue calls back into `self` only while the ledger is open.
            let box = WeakLedger()
            writeQueue = WriteQueue(maximumBatchEvents: configuration.maximumBatchEvents) { requests in
                guard let ledger = box.ledger else {
                    for request in requests { request.pending.complete(.failure(StorageError(.closed, "the ledger is closed"))) }
                    return
                }
                ledger.commit(requests)
            }
            box.ledger = self
        }
    }

    /// Records or checks the catalog: a new ledger gets its first catalog; an existing one may
    /// grow by the given catalog's new products.
    private static func establishCatalog(
        _ given: Catalog?, storage: any LedgerStorage, directory: String, logger: Logger
    ) throws -> Catalog {
        let reader = LogReader(storage: storage)
        let (marker, catalogCount, last) = try storage.read { (try $0.formatMarker(), try $0.catalogs().count, try $0.lastPosition()) }
        if marker == nil && catalogCount == 0 && last == 0 {
            guard !storage.isReadOnly else {
                throw StorageError(.notALedger, "\(directory) holds no ledger")
            }
            guard let given else {
                throw CatalogError(.missing, "\(directory) holds no ledger yet: a catalog is needed to create one")
            }
            try storage.write { writer in
                try writer.setFormatMarker(LMDBLedgerStorage.formatMarker)
                try writer.recordCatalog(Array(given.json.utf8), effectiveFrom: 1)
            }
            logger.info("created ledger", metadata: ["directory": "\(directory)", "products": "\(given.products.count)"])
            return given
        }
        guard let recorded = try reader.currentCatalog(), catalogCount > 0 else {
            throw StorageError(.damaged, "\(directory) holds a log without its catalog")
        }
        guard marker == LMDBLedgerStorage.formatMarker else {
            throw StorageError(.unsupportedFormat, "\(directory) holds format \(marker ?? "?"), this version reads \(LMDBLedgerStorage.formatMarker)")
        }
        guard let given, given != recorded else { return recorded }
        try recorded.checkSuccessor(given)
        guard !storage.isReadOnly else {
            throw CatalogError(.conflict, "the ledger is open read-only; its catalog cannot grow")
        }
        try storage.write { writer in
            try writer.recordCatalog(Array(given.json.utf8), effectiveFrom: try writer.lastPosition() + 1)
        }
        logger.info("catalog grew", metadata: ["products": "\(recorded.products.count) → \(given.products.count)"])
        return given
    }

    /// Closes the ledger: waits for queued appends to commit, then closes the storage. Later
    /// appends throw `StorageError.closed`.
    public func close() async {
        guard !isClosed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        await writeQueue?.close()
        // The writer lock first: a reopen in this process must not find it still held.
        writerLock?.release()
        storage.close()
    }

    // MARK: Appending

    /// Appends one event: `.appended(position:)` once its commit is durable, or `.duplicate(of:)`
    /// when the log already holds it (nothing is written). Throws `LedgerError` when a rule
    /// rejects it (nothing is written), `StorageError` when the storage fails.
    @discardableResult
    public func append(_ event: Event) async throws -> AppendOutcome {
        let results = try await append(contentsOf: [event])
        return try results[0].get()
    }

    /// Appends events in order, in one durable transaction, each checked against the state the
    /// ones before it left: one result per event. A rejected event rejects only itself. Throws
    /// only when the storage fails, and then nothing of the batch was written.
    public func append(contentsOf events: [Event]) async throws -> [AppendResult] {
        try await submit(contentsOf: events).results()
    }

    /// Queues events behind everything submitted before, and returns at once; `results()` waits
    /// for the commit. Submissions are checked and logged in the order they were made, so a
    /// producer can pipeline (submit the next batch while the previous one commits) without
    /// reordering its events.
    public func submit(contentsOf events: [Event]) -> PendingAppends {
        guard let writeQueue else {
            return PendingAppends(failure: StorageError(.readOnly, "the ledger at \(directory) is open read-only"))
        }
        guard !events.isEmpty else { return PendingAppends(results: []) }
        return writeQueue.submit(events)
    }

    /// The writer's side of group commit: one write transaction for the queued requests. If it
    /// fails and held several requests, each is committed alone, so that one request (one that
    /// reaches the size limit, say) cannot fail the others.
    private func commit(_ requests: [WriteQueue.Request]) {
        do {
            let results = try commitTogether(requests)
            for (request, result) in zip(requests, results) {
                request.pending.complete(.success(result))
            }
        } catch where requests.count > 1 {
            for request in requests { commit([request]) }
        } catch {
            let failure = StorageErrors.map(error, maximumSize: configuration.maximumSize)
            configuration.logger.error("append failed; nothing of it was written", metadata: [
                "events": "\(requests[0].events.count)", "error": "\(failure)",
            ])
            requests[0].pending.complete(.failure(failure))
        }
    }

    private func commitTogether(_ requests: [WriteQueue.Request]) throws -> [[AppendResult]] {
        let (results, session) = try storage.write { writer in
            var session = AppendSession(writer: writer, catalog: catalog, base: AppendSession.Base(
                position: state.withLock { $0.position },
                entry: { account, payment in self.state.withLock { $0.entry(account, payment) } },
                balance: { account, item in self.state.withLock { $0.balance(account, item) } },
                accountHolds: { account, transaction in self.state.withLock { $0.accountHolds(account, transaction: transaction) } },
                revocation: { transaction in self.state.withLock { $0.revocation(of: transaction) } },
                consumableCredit: { transaction in self.state.withLock { $0.consumableCredit(of: transaction) } }))
            var results: [[AppendResult]] = []
            results.reserveCapacity(requests.count)
            for request in requests {
                results.append(try request.events.map { try session.append($0) })
            }
            // Nothing to store: abort, so that not even LMDB's meta page changes.
            if session.appendedCount == 0 { writer.discard() }
            return (results, session)
        }
        if session.appendedCount > 0 {
            state.withLock { session.publish(into: &$0) }
        }
        return results
    }

    // MARK: Queries

    /// The position of the last appended event.
    public var position: UInt64 {
        state.withLock { $0.position }
    }

    /// The current projections of every account (a value: later appends do not change it).
    /// It shares storage with the live state, so the next commit copies what it changes: for
    /// audits and tests, not for every request; `projection(of:)` is the per-account query.
    public var currentState: LedgerState {
        state.withLock { $0 }
    }

    /// What `account` owns as of `time`; nil when the ledger has no event of that account.
    public func projection(of account: String, asOf time: Timestamp = .now()) -> AccountProjection? {
        state.withLock { $0.projection(of: account, asOf: time) }
    }

    /// The sorted product ids `account` is entitled to as of `time`.
    public func entitlements(of account: String, asOf time: Timestamp = .now()) -> [String] {
        projection(of: account, asOf: time)?.entitlements ?? []
    }

    /// `account`'s consumable balances.
    public func balances(of account: String) -> [String: Int64] {
        projection(of: account)?.balances ?? [:]
    }

    /// `account`'s entries not yet finished, in the order opened.
    public func unfinished(of account: String) -> [UnfinishedTransaction] {
        projection(of: account)?.unfinished ?? []
    }

    /// The projections after the first `position` events, replayed from the log.
    public func state(at position: UInt64) throws -> LedgerState {
        let last = self.position
        guard position <= last else {
            throw StorageError(.damaged, "position \(position) is beyond the end of the log (\(last))", position: position)
        }
        return try log.state(at: position, catalog: catalog)
    }

    /// `account`'s events after `position` (from the first when 0), at most `limit`, in order.
    public func history(account: String, after position: UInt64 = 0, limit: Int = .max) throws -> [LogRecord] {
        try log.history(account: account, after: position, limit: limit)
    }

    /// The log's records from `position` on, read in chunks as the sequence is iterated. The
    /// sequence ends at the last record committed when iteration reaches it.
    public func records(from position: UInt64 = 1) -> LogRecords {
        LogRecords(log: log, start: position)
    }

    /// Counts and sizes, for `ledger stats`.
    public func statistics() -> LedgerStatistics {
        let (events, accounts, entries, unfinished) = state.withLock {
            ($0.position, $0.accounts.count, $0.entryCount, $0.unfinishedCount)
        }
        return LedgerStatistics(
            events: events, accounts: accounts, entries: entries, unfinishedEntries: unfinished,
            products: catalog.products.count, fileSize: storage.sizeOnDisk())
    }
}

/// Counts and sizes of a ledger.
public struct LedgerStatistics: Sendable, Hashable {
    public var events: UInt64
    public var accounts: Int
    public var entries: Int
    public var unfinishedEntries: Int
    public var products: Int
    /// Bytes of the data file.
    public var fileSize: Int
}

/// Lets the write queue reach the ledger without keeping it alive.
private final class WeakLedger: @unchecked Sendable {
    weak var ledger: Ledger?
}
