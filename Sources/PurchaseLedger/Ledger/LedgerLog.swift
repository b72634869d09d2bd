import Logging

/// Read-only access to a ledger's log, without rebuilding its projections: what audit tools
/// need to export, verify, page through history or replay to a position. Opening one is cheap
/// whatever the log's length, and it may run while another process appends.
public final class LedgerLog: Sendable {
    /// Where the ledger is: its directory, or (PostgreSQL) its database URL without a password.
    public let location: String
    /// The ledger's format marker, such as `purchase-ledger/lmdb/2`.
    public let format: String
    /// Whether the ledger is of a format older than the one this version writes: readable, and
    /// migrated by copying it (`ledger copy`).
    public let isOfOlderFormat: Bool
    let storage: any LedgerStorage
    let log: LogReader
    let logger: Logger

    /// Reads the ledger held by `storage` (another backend's entry point). Takes ownership of
    /// `storage`: it is closed when this throws, or when the log closes.
    /// `copying` reads a copy `ledger copy` has not marked complete yet (to verify it).
    package init(location: String, storage: any LedgerStorage, logger: Logger, copying: Bool = false) throws {
        let marker: String?
        do {
            marker = try storage.read { try $0.formatMarker() }
        } catch {
            storage.close()
            throw StorageErrors.map(error)
        }
        do {
            try IncompleteCopy.check(marker, of: storage, at: location, copying: copying)
        } catch {
            storage.close()
            throw error
        }
        // A ledger of an older format this version still reads: its log, for export, replay
        // and `ledger copy`, which migrates it.
        let readable = !copying && marker.map(storage.readableFormats.contains) == true
        guard marker == IncompleteCopy.expectedMarker(of: storage, copying: copying) || readable else {
            storage.close()
            if marker == nil { throw StorageError(.notALedger, "\(location) holds no ledger") }
            throw StorageError(.unsupportedFormat, "\(location) holds format \(marker!), this version reads \(storage.storageFormat)")
        }
        self.location = location
        self.format = marker ?? storage.storageFormat
        self.isOfOlderFormat = readable
        self.storage = storage
        self.log = LogReader(storage: storage)
        self.logger = logger
    }

    public func close() {
        storage.close()
    }

    /// The catalog in force (the last one recorded).
    public func catalog() throws -> Catalog {
        guard let catalog = try log.currentCatalog() else {
            throw StorageError(.damaged, "the ledger has no catalog")
        }
        return catalog
    }

    /// Every catalog the ledger recorded, oldest first, each with the first position it
    /// governs (1 for the one the ledger was created with).
    public func catalogHistory() throws -> [(effectiveFrom: UInt64, catalog: Catalog)] {
        try log.catalogHistory()
    }

    /// The position of the last event.
    public func lastPosition() throws -> UInt64 {
        try log.lastPosition()
    }

    /// Visits records `start...end` in order (through the last one when `end` is nil or beyond).
    public func forEachRecord(from start: UInt64 = 1, through end: UInt64? = nil, _ body: (LogRecord) throws -> Void) throws {
        let last = try log.lastPosition()
        try log.forEachRecord(from: start, through: min(end ?? last, last), body)
    }

    /// The log's records from `position` on, as an async sequence.
    public func records(from position: UInt64 = 1) -> LogRecords {
        LogRecords(log: log, start: position)
    }

    /// `account`'s events after `position`, at most `limit`, in order.
    public func history(account: String, after position: UInt64 = 0, limit: Int = .max) throws -> [LogRecord] {
        try log.history(account: account, after: position, limit: limit)
    }

    /// The projections after the first `position` events (all of them when nil): from the
    /// newest usable snapshot at or before it and the log after it, or, with
    /// `useSnapshots: false` (the audit path), replayed from the start. `progress` is called
    /// now and then with the position replayed to, on this thread (for a progress line).
    public func state(at position: UInt64? = nil, useSnapshots: Bool = true, progress: (UInt64) -> Void = { _ in }) throws -> LedgerState {
        let last = try log.lastPosition()
        let target = position ?? last
        guard target <= last else {
            throw StorageError(.damaged, "position \(target) is beyond the end of the log (\(last))", position: target)
        }
        return try log.state(at: target, catalog: try catalog(), useSnapshots: useSnapshots, logger: logger, progress: progress)
    }

    /// Writes every event as a canonical JSON line (with a newline), in log order, handing
    /// `write` about 64 KiB at a time. The output re-imports to the same log and, exported
    /// again, gives the same bytes. `progress` gets the position written through after each
    /// hand-over, on this thread.
    public func exportJSONLines(progress: (UInt64) -> Void = { _ in }, _ write: ([UInt8]) throws -> Void) throws {
        var writer = JSONWriter(capacity: 1 << 16 + 1024)
        var position: UInt64 = 0
        try forEachRecord { record in
            record.event.write(to: &writer)
            writer.newline()
            position = record.position
            if writer.bytes.count >= 1 << 16 {
                try write(writer.bytes)
                writer.removeAll()
                progress(position)
            }
        }
        if !writer.bytes.isEmpty {
            try write(writer.bytes)
            progress(position)
        }
    }

    /// Bytes of the data file.
    public func fileSize() -> Int {
        storage.sizeOnDisk()
    }

    /// How many accounts have at least one event (from the history index, without a replay).
    public func accountCount() throws -> Int {
        try storage.read { try $0.accountCount() }
    }

    /// The stored snapshots, oldest first: the position each reflects, and whether this
    /// version can use it (and why not).
    public func snapshots() throws -> [SnapshotInfo] {
        try storage.read { reader in
            let last = try reader.lastPosition()
            return try SnapshotStates.headers(reader).map { stored in
                switch stored.header {
                case .success(let header) where header.position > last:
                    SnapshotInfo(position: header.position, createdAt: header.createdAt, accountsWritten: header.accountsWritten,
                                 problem: "it reflects position \(header.position), beyond the log's end at \(last)")
                case .success(let header):
                    SnapshotInfo(position: header.position, createdAt: header.createdAt, accountsWritten: header.accountsWritten, problem: nil)
                case .failure(let problem):
                    SnapshotInfo(position: stored.position, createdAt: nil, accountsWritten: nil, problem: problem.description)
                }
            }
        }
    }

    /// Checks every record and index; see `VerificationReport`. `progress` is called now and
    /// then with the position checked to, on this thread.
    public func verify(progress: (UInt64) -> Void = { _ in }) -> VerificationReport {
        LedgerVerifier(storage: storage).run(progress: progress)
    }
}

/// A stored snapshot, as `ledger stats` shows it.
public struct SnapshotInfo: Sendable, Hashable {
    public var position: UInt64
    public var createdAt: Timestamp?
    public var accountsWritten: Int?
    /// Why this version would not use it; nil when usable.
    public var problem: String?
}
