/// The books (`Books`) at a position, and the position the ledger had reached at a time.
extension Ledger {
    /// The books as known at `position` (default: now), from the state there: the live state
    /// at the head, else the newest snapshot at or before it and the log after it.
    ///
    /// - Parameters:
    ///   - query: the periods, the instant and the environments.
    ///   - position: what the ledger knew: the first `position` events.
    /// - Returns: the figures, valid time as `query` asks, known at `position`.
    /// - Throws: `StorageError` when the position is beyond the log or storage fails;
    ///   `CancellationError` when its task is cancelled.
    public func books(_ query: BooksQuery, atPosition position: UInt64? = nil) throws -> Books {
        let state = try position.map { try self.state(at: $0) } ?? currentState()
        return try state.books(query, catalog: try log.catalog(governing: state.position) ?? catalog)
    }

    /// The last position committed by `time`, by the ledger's clock readings: the position
    /// `knownAt` answers as of (0 before the first commit).
    public func position(knownAt time: Timestamp) throws -> UInt64 {
        try log.position(knownAt: time)
    }
}

extension LedgerLog {
    /// The books as known at `position` (default: the head), replaying from the newest
    /// snapshot at or before it unless `useSnapshots` is false.
    public func books(_ query: BooksQuery, atPosition position: UInt64? = nil, useSnapshots: Bool = true,
                      progress: (UInt64) -> Void = { _ in }) throws -> Books {
        let state = try state(at: position, useSnapshots: useSnapshots, progress: progress)
        return try state.books(query, catalog: try log.catalog(governing: state.position) ?? catalog())
    }

    /// The last position committed by `time`, by the ledger's clock readings.
    public func position(knownAt time: Timestamp) throws -> UInt64 {
        try log.position(knownAt: time)
    }
}

extension LogReader {
    /// The catalog that governed event `position` (the first catalog for 0): the newest
    /// recorded to govern it or earlier. Not one grown after it, which governs the next: the
    /// books at a position never change.
    func catalog(governing position: UInt64) throws -> Catalog? {
        try catalogHistory().last { $0.effectiveFrom <= max(position, 1) }?.catalog
    }

    /// The greatest position of the clock readings taken at or before `time`; 0 when none was.
    func position(knownAt time: Timestamp) throws -> UInt64 {
        var known: UInt64 = 0
        var after: ClockReading?
        // Readings are ordered by position and their times never go back: stop at the first
        // one after `time`.
        while case let readings = try storage.read({ try $0.clockReadings(after: after, limit: 4096) }), let last = readings.last {
            for reading in readings {
                guard reading.time <= time else { return known }
                known = reading.position
            }
            after = last
        }
        let kept = try storage.read { try $0.lastClockReading() } != nil
        let empty = try lastPosition() == 0
        guard known > 0 || kept || empty else {
            throw StorageError(.damaged, "the ledger keeps no clock readings yet (it was written before they were kept): open it writable once")
        }
        return known
    }
}
