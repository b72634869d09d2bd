import Dispatch
import Logging
import Synchronization

/// Shared storage (PostgreSQL): keeps this process's projections up with what other processes
/// append, the catalog they grow and the snapshots they write.
///
/// It changes the projections only on `changes`, the one serial queue where they change: the
/// writer's, or (read-only) a queue of its own. Inside a write it runs on the writer's thread
/// under the storage's append lock (`catchUp(_:)`), so that the rules see exactly the state the
/// new events follow; when the storage signals appends, a catch-up is scheduled there.
final class OtherProcessesFollower: Sendable {
    private let storage: any LedgerStorage
    private let live: LiveProjections
    private let logger: Logger
    /// Where the projections change (see the type's comment).
    private let changes: DispatchQueue
    /// Which recorded catalog is in force: a newer one another process recorded is taken at
    /// the next catch-up.
    private let catalogVersion: Mutex<CatalogVersion>
    /// A catch-up is scheduled on `changes` and has not started yet.
    private let isScheduled = Atomic<Bool>(false)
    private let isStopped = Atomic<Bool>(false)
    /// Signalled when a catch-up between writes moved the projections.
    private let caughtUp: CommitSignal?

    init(
        storage: any LedgerStorage, live: LiveProjections, catalogVersion: CatalogVersion, changes: DispatchQueue,
        caughtUp: CommitSignal? = nil, logger: Logger
    ) {
        self.storage = storage
        self.live = live
        self.catalogVersion = Mutex(catalogVersion)
        self.changes = changes
        self.caughtUp = caughtUp
        self.logger = logger
    }

    /// Schedules a catch-up whenever the storage signals that another process may have
    /// appended. The storage holds this follower weakly: it does not keep the ledger alive.
    func startWatching() {
        storage.watchForAppends { [weak self] last in
            guard let self else { return }
            // This process's own appends are announced too: nothing to do for those.
            if let last, last <= live.position { return }
            scheduleCatchUp()
        }
    }

    /// Stops scheduling catch-ups and returns once one under way has finished.
    func stop() async {
        isStopped.store(true, ordering: .releasing)
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in changes.async { done.resume() } }
    }

    /// Applies what other processes appended since this one last looked, takes a catalog they
    /// grew and a newer snapshot they wrote. Call it on `changes`: inside a write with the
    /// writer's reader, or with a read's.
    func catchUp(_ reader: any LedgerStorageReader) throws {
        let last = try reader.lastPosition()
        // Nothing new: no query beyond the head and the catalog's position (which a write has
        // already read with its lock).
        if try reader.newestCatalogVersion() != catalogVersion.withLock({ $0 }),
           let (effectiveFrom, json) = try reader.catalogs().last {
            live.adoptCatalog(try Catalog(json: json))
            catalogVersion.withLock { $0 = CatalogVersion(effectiveFrom: effectiveFrom, size: json.count) }
        }
        // A write has read the newest snapshot's position with its lock: the headers are read
        // only when another process wrote a newer one, not at every catch-up.
        let newerSnapshot = try reader.newestSnapshotPosition() ?? 0 > live.snapshot?.position ?? 0
        guard last > live.position || newerSnapshot else { return }
        // Another process's snapshot past this one's position: start from it (this process's
        // own snapshot may be too old for pruning to keep what it reads); one within what is
        // applied: move to it once the events are.
        let newest = newerSnapshot ? try SnapshotStates.newest(reader, lastPosition: last) : nil
        if case .success(let header)? = newest, header.position > live.position {
            live.restart(from: header)
        }
        try Opening.replay(reader, into: live, through: last, catalog: live.catalog)
        if case .success(let header)? = newest { live.adopt(header) }
    }

    /// A catch-up on `changes`, waited for (`Ledger.catchUp()`).
    func catchUpNow() async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            changes.async { [self] in
                continuation.resume(with: Result { try catchUpBetweenWrites() })
            }
        }
    }

    /// A catch-up in a read of its own, between writes (on `changes`); the feeds waiting for
    /// the projections (`LedgerChanges.follower`) read on when it moved them.
    private func catchUpBetweenWrites() throws {
        let before = live.position
        try storage.read { try catchUp($0) }
        if live.position > before { caughtUp?.signal() }
    }

    /// The position the projections have applied through.
    var appliedPosition: UInt64 {
        live.position
    }

    /// A catch-up, from `changes`; a failure is logged (the next signal, poll or write tries
    /// again).
    func catchUpLogged() {
        do {
            try catchUpBetweenWrites()
        } catch {
            logger.error("catching up with other processes failed; retried at the next signal or write", metadata: [
                "error": "\(StorageErrors.map(error))",
            ])
        }
    }

    /// Another process may have appended (the storage signalled it, or a reader found the log
    /// past the projections): a catch-up on `changes`, unless one is already waiting there.
    func scheduleCatchUp() {
        guard !isStopped.load(ordering: .acquiring),
              !isScheduled.exchange(true, ordering: .acquiringAndReleasing) else { return }
        changes.async { [self] in
            isScheduled.store(false, ordering: .releasing)
            // Scheduled just as the ledger closed: the storage may be closed by now.
            guard !isStopped.load(ordering: .acquiring) else { return }
            catchUpLogged()
        }
    }
}
