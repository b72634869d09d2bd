import Logging

/// Reading and decoding the log of a storage, shared by `Ledger` and `LedgerLog`.
///
/// Long reads go in chunks of short read transactions, so that a replay or an export never pins
/// old pages while a writer appends; the log is append-only, so the chunks join up exactly.
struct LogReader: Sendable {
    /// Progress is reported every 4,096 records: often enough for a person, rarely enough to cost nothing.
    static let progressMask: UInt64 = 4095

    let storage: any LedgerStorage
    static let chunkSize = 4096

    /// The last position of the log.
    func lastPosition() throws -> UInt64 {
        try storage.read { try $0.lastPosition() }
    }

    /// Decodes records `start...end` in order, calling `body` for each, in chunks.
    /// A damaged record or a gap throws `StorageError.damaged` naming its position.
    /// `readingProofs` false leaves out the proofs records keep apart (a replay needs none).
    func forEachRecord(
        from start: UInt64, through end: UInt64, readingProofs: Bool = true, _ body: (LogRecord) throws -> Void
    ) throws {
        try forEachChunk(from: start, through: end) { first, last in
            var records: [LogRecord] = []
            try decode(first...last, into: &records, readingProofs: readingProofs)
            for record in records { try body(record) }
        }
    }

    /// Calls `body` with each run of at most `chunkSize` positions of `start...end`, in order:
    /// the span of one short read. After more than one, the storage lets go of the pages the
    /// reads mapped in: a short last chunk does not let go of what the chunks before it left.
    private func forEachChunk(from start: UInt64, through end: UInt64, _ body: (UInt64, UInt64) throws -> Void) throws {
        var chunks = 0
        defer { if chunks > 1 { storage.letGoOfReadPages() } }
        try Self.forEachChunk(from: start, through: end) { first, last in
            chunks += 1
            try body(first, last)
        }
    }

    /// Calls `body` with each run of at most `size` positions of `start...end`, in order.
    static func forEachChunk(
        from start: UInt64, through end: UInt64, size: Int = chunkSize, _ body: (UInt64, UInt64) throws -> Void
    ) throws {
        var next = max(start, 1)
        while next <= end {
            let (chunkLimit, overflow) = next.addingReportingOverflow(UInt64(size) - 1)
            let chunkEnd = overflow ? end : min(end, chunkLimit)
            try body(next, chunkEnd)
            guard chunkEnd < end else { return }
            next = chunkEnd + 1
        }
    }

    /// Decodes the records `start...end` as `reader` sees them, in order, checking that they run
    /// without a gap. On a remote storage the chunk is read whole first, and the accounts it
    /// names that this process has not seen are read in one query, not one each; then `ahead`
    /// gets the events decoded, for what else to read at once, before `body` gets each in turn
    /// (a record that does not decode is thrown in its turn).
    static func forEachDecoded(
        _ reader: any LedgerStorageReader, storage: any LedgerStorage, from start: UInt64, through end: UInt64,
        readingProofs: Bool, ahead: (([Event]) throws -> Void)? = nil, _ body: (consuming LogRecord) throws -> Void
    ) throws {
        var expected = start
        func checkSequence(_ position: UInt64) throws {
            guard position == expected else {
                throw StorageError(.damaged, "the log has no record at position \(expected)", position: expected)
            }
            expected += 1
        }
        let names = storage.accountNames
        if storage.isShared {
            var chunk: [(position: UInt64, bytes: [UInt8])] = []
            try reader.forEachRecord(from: start, through: end) { position, bytes in
                try checkSequence(position)
                chunk.append((position, Array(bytes)))
                return true
            }
            try names.prefetch(chunk.compactMap { $0.bytes.withUnsafeBytes(LogRecordCodec.accountHandle(in:)) }, reader: reader)
            func decoded(_ index: Int) throws -> Event {
                try chunk[index].bytes.withUnsafeBytes { raw in
                    try decode(raw, at: chunk[index].position, reader: reader, names: names, readingProofs: readingProofs)
                }
            }
            if let ahead {
                let events = chunk.indices.map { index in Result { try decoded(index) } }
                try ahead(events.compactMap { try? $0.get() })
                // A forget renames accounts (`body` takes the renames in): the records after it
                // are decoded again, with the names it left.
                var forgot = false
                for index in chunk.indices {
                    let event = forgot ? try decoded(index) : try events[index].get()
                    forgot = forgot || event.type == .forgotten
                    try body(LogRecord(position: chunk[index].position, event: event))
                }
            } else {
                for index in chunk.indices { try body(LogRecord(position: chunk[index].position, event: try decoded(index))) }
            }
        } else {
            try reader.forEachRecord(from: start, through: end) { position, bytes in
                try checkSequence(position)
                try body(LogRecord(position: position, event: try decode(
                    bytes, at: position, reader: reader, names: names, readingProofs: readingProofs)))
                return true
            }
        }
        guard expected == end + 1 else {
            throw StorageError(.damaged, "the log has no record at position \(expected)", position: expected)
        }
    }

    /// Decodes the record at `position`, its accounts' handles resolved through `names` (and
    /// `reader` for those this process has not seen). A storage failure reading the account
    /// table is that failure, not damage.
    static func decode(
        _ bytes: UnsafeRawBufferPointer, at position: UInt64, reader: any LedgerStorageReader, names: AccountNames,
        readingProofs: Bool = true
    ) throws -> Event {
        var failure: (any Error)?
        func recordingFailure<T>(_ read: () throws -> T) throws -> T {
            do {
                return try read()
            } catch {
                failure = error
                throw error
            }
        }
        do {
            return try LogRecordCodec.decode(
                bytes, expectedPosition: position,
                accountName: { handle in try recordingFailure { try names.name(of: handle, reader: reader) } },
                proof: { position in try recordingFailure { try reader.proof(at: position) } },
                readingProofs: readingProofs,
                // Asked only of a record whose proof is missing under a name this process read
                // before another process forgot it (its catch-up renames it at the forget's
                // record): the account table as `reader` sees it, this process's names left as
                // they are.
                forgottenSince: { handle in
                    try recordingFailure {
                        try reader.accountNames(handles: [handle]).contains { Forgotten.handle(ofPseudonym: $0.account) == handle }
                    }
                })
        } catch {
            if let failure { throw failure }
            throw StorageError(.damaged, "record at position \(position): \(error)", position: position)
        }
    }

    /// The state after the first `position` events: from the newest usable snapshot at or
    /// before it (when `useSnapshots`) and the log after it, or replayed from the start.
    ///
    /// A replay past a chunk reads on a second thread (`ReadAhead`), in read transactions of
    /// its own: never call this inside a read (the second thread's read could wait for a map
    /// growth that waits for the caller's). A cancelled task's replay stops at the next run
    /// or chunk with `CancellationError`: the server's expensive reads stop when their client
    /// leaves.
    func state(at position: UInt64, catalog: Catalog, useSnapshots: Bool, logger: Logger, progress: (UInt64) -> Void = { _ in }) throws -> LedgerState {
        var state = LedgerState()
        if useSnapshots {
            state = try storage.read { reader in
                guard let header = try SnapshotStates.newestUsable(reader, atOrBefore: position) else { return LedgerState() }
                return try SnapshotStates.materialize(
                    reader: reader, snapshot: header.position, factsThrough: header.position, catalog: catalog, logger: logger)
            }
        }
        if state.position == 0, let transactions = try storage.read({ try $0.transactionCountHint() }) {
            // The index holds the transactions of the whole log: at most that many by `position`.
            state.reserveCapacity(transactions: transactions)
        }
        func apply(_ record: LogRecord) throws {
            do {
                try state.apply(record.event, at: record.position, catalog: catalog)
            } catch {
                throw StorageError(.damaged, "record at position \(record.position) cannot be replayed: \(error)", position: record.position)
            }
            if record.position & Self.progressMask == 0 { progress(record.position) }
        }
        if position > state.position, position - state.position > UInt64(Self.chunkSize) {
            // A long replay: its records are read and decoded on a second thread, a run ahead of
            // this one, which only applies them (`ReadAhead`).
            var spans: [ClosedRange<UInt64>] = []
            let size = storage.isShared ? Self.chunkSize : Self.readAheadRunSize
            try Self.forEachChunk(from: state.position + 1, through: position, size: size) { spans.append($0...$1) }
            let runs = spans
            defer { storage.letGoOfReadPages() }
            try ReadAhead.forEach(runs.count, depth: Self.runsReadAhead) { [self] index, records in
                try decode(runs[index], into: &records, readingProofs: false)
            } _: { records in
                try Task.checkCancellation()
                // Borrowed where they lie: an iterator would copy each record, and release it.
                try records.withUnsafeBufferPointer { records in
                    for index in records.indices { try apply(records[index]) }
                }
            }
        } else {
            // Each chunk's records are applied as they are decoded, inside the chunk's short read:
            // not collected first (a replay would copy every event once more).
            try forEachChunk(from: state.position + 1, through: position) { first, last in
                try Task.checkCancellation()
                try storage.read { reader in
                    try Self.forEachDecoded(reader, storage: storage, from: first, through: last, readingProofs: false) { try apply($0) }
                }
            }
        }
        state.catalog = catalog
        return state
    }

    /// A long replay's runs: each decoded in one short read on the replay's second thread, at
    /// most `runsReadAhead` of them waiting for the thread that applies them. Smaller than a
    /// chunk on LMDB: the runs in flight are what a replay holds besides its state (runs of a
    /// chunk held 4 MB more at the peak, for no more speed). A chunk on shared storage, where
    /// each run is a transaction's round trips and the database's own work shares the cores
    /// (runs of 1,024 made a replay from PostgreSQL slower than none).
    static let readAheadRunSize = 1024
    static let runsReadAhead = 1

    /// The records of `positions`, decoded in one short read, appended to `records`.
    private func decode(_ positions: ClosedRange<UInt64>, into records: inout [LogRecord], readingProofs: Bool) throws {
        records.reserveCapacity(records.count + positions.count)
        try storage.read { reader in
            try Self.forEachDecoded(
                reader, storage: storage, from: positions.lowerBound, through: positions.upperBound, readingProofs: readingProofs
            ) { records.append($0) }
        }
    }

    /// The account's records after `position`, at most `limit`.
    func history(account: String, after position: UInt64, limit: Int) throws -> [LogRecord] {
        try storage.read { reader in
            try reader.positions(ofAccount: account, after: position, limit: limit).map { position in
                var event: Event?
                _ = try reader.record(at: position) { bytes in
                    event = try Self.decode(bytes, at: position, reader: reader, names: storage.accountNames)
                }
                guard let event else {
                    throw StorageError(.damaged, "the history index names position \(position), which the log lacks", position: position)
                }
                return LogRecord(position: position, event: event)
            }
        }
    }

    /// Every catalog recorded, with the first position each governed, oldest first.
    func catalogHistory() throws -> [(effectiveFrom: UInt64, catalog: Catalog)] {
        try storage.read { try $0.catalogs() }.map { recorded in
            // Positions start at 1: a catalog in force from 0 names no position a record has.
            guard recorded.effectiveFrom >= 1 else {
                throw StorageError(.damaged, "a catalog is recorded for position 0, where no record is")
            }
            do {
                return (recorded.effectiveFrom, try Catalog(json: recorded.json))
            } catch {
                throw StorageError(.damaged, "the catalog recorded for position \(recorded.effectiveFrom) cannot be read: \(error)")
            }
        }
    }

    /// The catalog in force: the last one recorded.
    func currentCatalog() throws -> Catalog? {
        guard let latest = try storage.read({ try $0.catalogs() }).last else { return nil }
        do {
            return try Catalog(json: latest.json)
        } catch {
            throw StorageError(.damaged, "the ledger's catalog cannot be read: \(error)")
        }
    }
}
