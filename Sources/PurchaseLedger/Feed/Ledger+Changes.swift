import Synchronization

/// The change feed of an open ledger, and the ledger's clock.
extension Ledger {
    /// The changes after `cursor`, derived from storage; with `follow`, it then waits for new
    /// commits (and ticks the clock when time changes something) instead of ending.
    /// `excluding` scopes the projections to the other environments: a change is then one of
    /// that view (a sandbox purchase is no change of a production feed).
    public func changes(
        after cursor: FeedCursor = .start, follow: Bool = true, excluding environments: Set<StoreEnvironment> = [],
        pollInterval: Duration = .milliseconds(200)
    ) -> LedgerChanges {
        var tick: (@Sendable () async throws -> Void)?
        if writer != nil {
            tick = { [self] in _ = try await self.recordClock() }
        }
        return LedgerChanges(
            storage: storage, after: cursor, follow: follow, excluding: environments, tick: tick, commits: commitSignal,
            pollInterval: pollInterval, follower: follower)
    }

    /// Records that time has passed with the log where it is: a tick of the clock the change
    /// feed reads, durable when this returns. Feeds that follow this ledger tick it themselves
    /// when an instant where a projection changes has passed.
    @discardableResult
    public func recordClock() async throws -> Timestamp {
        guard let writer else { throw StorageError(.readOnly, "the ledger at \(location) is open read-only") }
        let reading = try await writer.recordClock()
        commitSignal.signal()
        return reading.time
    }

    /// A ledger written before the clock was kept gets readings when first opened for
    /// writing, so that its feed is the same whenever it is derived: one every 4,096 positions
    /// and one at the last, all now (a feed then reads its history a bounded piece at a time).
    static func startClock(_ storage: any LedgerStorage) throws {
        try storage.write { writer in
            let last = try writer.lastPosition()
            guard last > 0, try writer.lastClockReading() == nil else {
                writer.discard()
                return
            }
            let now = Timestamp.now()
            for position in stride(from: UInt64(4096), to: last, by: 4096) {
                try writer.recordClock(ClockReading(position: position, time: now))
            }
            try writer.recordClock(ClockReading(position: last, time: now))
        }
    }
}

extension LedgerLog {
    /// The changes after `cursor`, derived from the ledger's storage; with `follow`, it waits
    /// for the writer's commits and ticks (polling every `pollInterval`).
    public func changes(
        after cursor: FeedCursor = .start, follow: Bool = false, excluding environments: Set<StoreEnvironment> = [],
        pollInterval: Duration = .milliseconds(200)
    ) -> LedgerChanges {
        LedgerChanges(
            storage: storage, after: cursor, follow: follow, excluding: environments, tick: nil, commits: nil, pollInterval: pollInterval)
    }
}

extension Ledger {
    /// `ledger copy`: the source's clock readings through `last` (after the copy's newest, so
    /// that an interrupted copy resumes) and its feed consumers' `states`, so that the copy's
    /// feed is the source's (the same changes, ids and order) and its webhook endpoints go on
    /// where they were instead of sending the whole history again. Call it on a ledger opened
    /// with `Configuration.copying`, once its events are copied through `last`; `states` must
    /// have been read before `last` was, so that no cursor in them is past the copy's events.
    package func copyFeed(from source: LedgerLog, through last: UInt64, states: [(key: String, value: [UInt8])]) async throws {
        guard let writer else { throw StorageError(.readOnly, "the ledger at \(location) is open read-only") }
        var newest = try storage.read { try $0.lastClockReading() }
        while case let readings = try source.clockReadings(after: newest, through: last), !readings.isEmpty {
            _ = try await writer.write { storage in
                for reading in readings { try storage.recordClock(reading) }
            }
            newest = readings.last
        }
        // In the proof tree's turn: the source's tree and commitments replace this ledger's,
        // so neither a batch worked out from its own (whose write checks the tree's size
        // only) nor what it kept between batches may outlive the write.
        try await proofTreeTurns.inTurn {
            try await writer.writeWithAppends { storage in
                for (key, value) in states {
                    try storage.setFeedState(key, try AccountCommitment.copied(value, under: key, over: try storage.feedState(key)))
                }
            }
            proofTreeAccounts.withLock { $0.reset(at: 0) }
        }
    }
}

extension LedgerLog {
    /// The next page of clock readings after `newest` (from the first when nil) and at or
    /// before `last`; empty once there is none.
    package func clockReadings(after newest: ClockReading?, through last: UInt64) throws -> [ClockReading] {
        try storage.read { try $0.clockReadings(after: newest, limit: 4096) }.filter { $0.position <= last }
    }

    /// Every clock reading at or before `last`, in order, a page at a time.
    package func forEachClockReading(through last: UInt64, _ body: (ClockReading) throws -> Void) throws {
        var newest: ClockReading?
        while case let page = try clockReadings(after: newest, through: last), !page.isEmpty {
            for reading in page { try body(reading) }
            newest = page.last
        }
    }
}
