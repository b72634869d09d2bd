import Logging
import Synchronization

// Writing snapshots, the one home of it: what the writer's `SnapshotPolicy` asks of the live
// projections, a slice at a time between commits (docs/ARCHITECTURE.md, "Snapshots and opening").
extension LiveProjections {
    // MARK: Snapshots (the writer's thread only)

    /// A snapshot being written: the states of the accounts changed since the last snapshot,
    /// captured at `header.position`, and how many of them are already stored.
    struct SnapshotWrite {
        var header: SnapshotHeader
        /// The accounts changed since the last snapshot, with their states, as captured.
        var states: [(account: UTF8Key, state: AccountState)]
        /// The indices of `states` in the order storage keys their accounts, the order they are
        /// written in (`AccountStorageOrder`).
        var order: [Int]
        var written = 0
        /// No usable snapshot before it: it replaces whatever was stored (unless other processes
        /// share the storage and may read what is stored).
        var replacesAll: Bool
        var started: ContinuousClock.Instant
    }

    /// What a slice's write did.
    enum SliceOutcome {
        /// Stored the states before this index (all of them: the snapshot is complete).
        case wrote(through: Int)
        /// Stored nothing: another process stored a snapshot at or past this one's position.
        case overtaken
        /// Stored nothing: another process forgot a customer after this one's position.
        case predatesAForget
    }

    var isWritingSnapshot: Bool {
        snapshotWrite.withLock { $0 != nil }
    }

    /// Captures the accounts changed since the last snapshot, at the current position, as the
    /// next snapshot to write. False when nothing changed since the last one (or one is already
    /// being written).
    func beginSnapshot() -> Bool {
        guard !isWritingSnapshot else { return false }
        let (changed, previous, position, counts) = published.withLock { state in
            // Labelled as `SnapshotWrite.states` is: an array of other labels is converted
            // element by element.
            let changed: [(account: UTF8Key, state: AccountState)] = state.lastChanged.keys.map { (account: $0, state: state.accounts[$0]!) }
            return (changed, state.snapshot, state.position, (state.accountCount, state.entryCount, state.unfinishedCount))
        }
        guard position > 0, position != previous?.position else { return false }
        let header = SnapshotHeader(
            position: position, fingerprint: SnapshotFormat.fingerprint, previous: previous?.position ?? 0,
            accountsWritten: changed.count, accounts: counts.0, entries: counts.1, unfinished: counts.2,
            createdAt: .now())
        // Written in the storage's order, so that each slice rewrites a run of neighbouring
        // pages instead of pages all over the table.
        let order = AccountStorageOrder.indicesInOrder(changed.lazy.map(\.account))
        snapshotWrite.withLock {
            $0 = SnapshotWrite(header: header, states: changed, order: order, replacesAll: previous == nil, started: .now)
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
        let outcome = try storage.write { writer -> SliceOutcome in
            if job.written == 0, job.replacesAll, !storage.isShared {
                // A full snapshot replaces whatever was stored (possibly unusable snapshots).
                try writer.removeAllSnapshots()
            }
            // Shared storage: another process forgot a customer since this snapshot's position.
            // Its states were captured before, and some may name the forgotten id, which the
            // forget renamed only where it was stored: none of them may be stored now.
            if storage.isShared, try writer.lastForgetPosition() > position { return .predatesAForget }
            let stored = try writer.snapshotHeaders().map(\.position)
            // Shared storage: another process stored a snapshot at or past this one's position
            // since it began. Pruning only spares versions above the newest stored snapshot, so
            // the older versions this one reads for its unchanged accounts may be gone: it is
            // dropped (what its slices wrote are true states at its position, harmless, pruned
            // later).
            if storage.isShared, let newest = stored.max(), newest >= position { return .overtaken }
            // Versions any stored snapshot or this one reads are kept; the others go (on shared
            // storage, not those above the newest stored snapshot: another process's snapshot in
            // progress may read them).
            let retained = stored + [position]
            let keepingAbove = storage.isShared ? stored.max() ?? 0 : UInt64.max
            var index = job.written
            var accounts: [String] = []
            while index < job.states.count {
                let (account, state) = job.states[job.order[index]]
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
            return .wrote(through: index)
        }
        guard case .wrote(let written) = outcome else {
            // Overtaken: the ledger moves to the newer one (`Ledger.followSnapshots`). Begun
            // before a forget: its accounts stay changed, and the next snapshot, begun after
            // this process has read the forget, writes them.
            snapshotWrite.withLock { $0 = nil }
            let level: Logger.Level = if case .overtaken = outcome { .debug } else { .info }
            logger.log(level: level, "dropped a snapshot", metadata: ["position": "\(position)", "why": "\(outcome)"])
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
