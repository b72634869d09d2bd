import Dispatch
import Foundation
import Logging
import Synchronization

/// The single writer. One serial dispatch queue takes whatever waits in the `WriteQueue`,
/// commits it in one write transaction (group commit), completes each submission with its own
/// results only then, and writes snapshots between commits by `SnapshotPolicy`.
///
/// The commit runs synchronously on the writer's thread: an LMDB write transaction begins and
/// commits on one thread and never spans an `await`, and no task of the cooperative pool
/// blocks on a disk flush.
final class LedgerWriter: Sendable {
    private let queue: WriteQueue
    /// The writer's thread: the one serial queue where the projections change (a follower of
    /// other processes changes them there too).
    let changes: DispatchQueue
    private let storage: any LedgerStorage
    private let live: LiveProjections
    private let snapshots: SnapshotPolicy
    private let follower: OtherProcessesFollower?
    private let logger: Logger
    private let onCommit: (@Sendable (CommitReport) -> Void)?
    private let committed: CommitSignal
    /// False while `ledger copy` fills a copy: the copy gets the source's readings instead
    /// (`Ledger.copyFeed`), so that its feed is the source's.
    private let recordsClock: Bool

    init(
        storage: any LedgerStorage, live: LiveProjections, changes: DispatchQueue, follower: OtherProcessesFollower?,
        configuration: Ledger.Configuration, committed: CommitSignal
    ) {
        self.committed = committed
        queue = WriteQueue(maximumBatchEvents: configuration.maximumBatchEvents, maximumQueuedEvents: configuration.maximumQueuedEvents)
        self.changes = changes
        self.storage = storage
        self.live = live
        self.follower = follower
        snapshots = SnapshotPolicy(configuration)
        logger = configuration.logger
        onCommit = configuration.onCommit
        recordsClock = !configuration.copying
    }

    /// Queues work behind everything submitted before (see `WriteQueue.submit`).
    func submit(_ work: WriteQueue.Request.Work) async throws -> PendingAppends {
        // Not kept by the queue (no cycle between queue and writer); the block scheduled holds
        // the writer only until it drained.
        try await queue.submit(work) { changes.async { self.drain() } }
    }

    /// Stops accepting appends and returns once everything queued before is committed.
    func close() async {
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            queue.close { changes.async { done.resume() } }
        }
    }

    /// Records that time has passed with the log where it is (a tick of the feed's clock), on
    /// the writer's thread, between commits; returns the reading.
    func recordClock() async throws -> ClockReading {
        try await write { writer in
            let reading = ClockReading(position: try writer.lastPosition(), time: try Self.clockTime(writer))
            try writer.recordClock(reading)
            return reading
        }
    }

    /// Now, or the newest reading's time if that is later: readings are read in (position,
    /// time) order, and one that went back in time could land before readings a feed already
    /// passed.
    static func clockTime(_ writer: any LedgerStorageWriter) throws -> Timestamp {
        max(.now(), try writer.lastClockReading()?.time ?? .earliest)
    }

    /// Runs `body` in one write of its own on the writer's thread, between commits: writes
    /// besides appends (the clock, the feeds' consumers' state) go through the one writer too.
    func write<R: Sendable>(_ body: @escaping @Sendable (any LedgerStorageWriter) throws -> R) async throws -> R {
        try await withCheckedThrowingContinuation { (done: CheckedContinuation<R, any Error>) in
            changes.async { [storage] in
                do {
                    done.resume(returning: try storage.write(body))
                } catch {
                    done.resume(throwing: StorageErrors.map(error))
                }
            }
        }
    }

    /// Runs `body` in the next group commit, with the appends queued with it (one disk flush
    /// for all); durable when this returns. If `body` throws, nothing of it is written, and
    /// the appends it was grouped with are committed without it.
    func writeWithAppends<R: Sendable>(_ body: @escaping @Sendable (any LedgerStorageWriter) throws -> R) async throws -> R {
        let result = Mutex<R?>(nil)
        let pending = try await submit(.write { writer in
            let value = try body(writer)
            result.withLock { $0 = value }
        })
        _ = try await pending.results()
        guard let value = result.withLock({ $0 }) else {
            throw StorageError(.io, "a write committed without its result")
        }
        return value
    }

    /// Events queued and not yet taken by the writer (for tests and metrics).
    var queuedEventCount: Int {
        queue.queuedEventCount
    }

    /// Runs `body` on the writer, between batches (for tests that drive its steps).
    func onWriter<R>(_ body: () throws -> R) rethrows -> R {
        try changes.sync(execute: body)
    }

    /// Takes batches until the queue is empty. Then, when appends have been coming one after
    /// another (its last batch held one request, and the last lingering caught one or the
    /// writer was woken within `lingering` of finding the queue empty), it lingers a moment
    /// before it ends the drain: a submitter that comes meanwhile is taken without waking a
    /// thread, which costs about as much as the rest of a one-event commit when no disk sync
    /// hides it. What it catches is taken by a drain posted behind whatever else waits on the
    /// writer's queue (a clock tick, a feed's state, a follower's catch-up, a close), so a
    /// steady appender cannot hold those off. After a miss the writer goes idle, and lingers
    /// again only if woken soon after.
    private func drain() {
        let woken = ContinuousClock.now
        var lastBatchRequests = 0
        // The drain goes on while the queue is empty, until it lingers or ends below.
        while let batch = queue.takeBatch(endingTheDrain: false) {
            lastBatchRequests = batch.count
            if !batch.isEmpty { work(on: batch) }
        }
        let emptied = ContinuousClock.now
        // One request a batch: an appender that waits for each answer before the next. With
        // more, submissions come while the writer commits, and a spin would take a core from
        // the tasks and event loops that make them.
        if Self.mayLinger, lastBatchRequests == 1, lingeringPolicy.withLock({ $0.shouldLinger(wokenAt: woken) }),
           queue.lingerForSubmission(upTo: Self.lingering) {
            lingeringPolicy.withLock { $0.caughtOne = true }
            continueDraining()
            return
        }
        lingeringPolicy.withLock { $0.wentIdle(at: emptied) }
        // Ends the drain, unless a submission came since the last look: that one is this
        // drain's, and so is what follows it.
        if let batch = queue.takeBatch() {
            if !batch.isEmpty { work(on: batch) }
            continueDraining()
        }
    }

    /// The drain goes on in a drain posted behind what else waits on the writer's queue; in
    /// place once the queue is closed, so that a close returns only after everything queued
    /// before it is committed.
    private func continueDraining() {
        if !queue.postContinuation({ changes.async { self.drain() } }) { drain() }
    }

    /// How long the writer lingers for the next submission before it ends a drain.
    private static let lingering = Duration.microseconds(50)
    /// Not on one processor: the submitter could not run while the writer spins.
    private static let mayLinger = ProcessInfo.processInfo.activeProcessorCount > 1
    private let lingeringPolicy = Mutex(LingeringPolicy())

    /// Whether the writer lingers at the end of a drain (`drain()`): only when submissions have
    /// been coming within `lingering` of each other.
    private struct LingeringPolicy {
        /// When the last drain that ended found the queue empty.
        var wentIdleAt: ContinuousClock.Instant?
        var caughtOne = false

        /// The drain ended, its lingering (if any) having caught nothing.
        mutating func wentIdle(at instant: ContinuousClock.Instant) {
            wentIdleAt = instant
            caughtOne = false
        }

        func shouldLinger(wokenAt now: ContinuousClock.Instant) -> Bool {
            caughtOne || wentIdleAt.map { now - $0 <= LedgerWriter.lingering } == true
        }
    }

    /// A batch of appends, or a snapshot.
    private func work(on requests: [WriteQueue.Request]) {
        if requests.count == 1, requests[0].isSnapshot {
            do {
                try live.writeSnapshot(keep: snapshots.kept)
                followSnapshots()
                requests[0].pending.complete(.success([]))
            } catch {
                let failure = StorageErrors.map(error)
                logger.error("snapshot failed", metadata: ["error": "\(failure)"])
                requests[0].pending.complete(.failure(failure))
            }
            return
        }
        commit(requests)
        if snapshots.afterCommit(live, appendsWaiting: { queue.queuedEventCount > 0 }) {
            followSnapshots()
        }
    }

    /// Group commit: one write transaction for the queued requests. If it fails and held
    /// several requests, each is committed alone, so that one request (one that reaches the
    /// size limit, say) cannot fail the others.
    private func commit(_ requests: [WriteQueue.Request]) {
        let started = ContinuousClock.now
        do {
            let results = try commitTogether(requests)
            // Writes besides appends are no commit of events.
            if requests.contains(where: { !$0.events.isEmpty }) {
                onCommit?(CommitReport(requests: requests.count, results: results, duration: .now - started))
            }
            for (request, result) in zip(requests, results) {
                request.pending.complete(.success(result))
            }
        } catch where requests.count > 1 {
            let failure = StorageErrors.map(error)
            onCommit?(CommitReport(failedRequests: requests.map(\.events.count), failure: failure, duration: .now - started))
            for request in requests { commit([request]) }
        } catch {
            let failure = StorageErrors.map(error)
            // A write besides appends that throws is its caller's answer (a lease lost, say).
            if !requests[0].events.isEmpty {
                onCommit?(CommitReport(failedRequests: [requests[0].events.count], failure: failure, duration: .now - started))
                logger.error("append failed; nothing of it was written", metadata: [
                    "events": "\(requests[0].events.count)", "error": "\(failure)",
                ])
            }
            requests[0].pending.complete(.failure(failure))
        }
    }

    /// A fact of several events (`WriteQueue.Appends.facts`) one of whose events the rules
    /// refused: the write is abandoned, and done again with the fact answered by the refusal.
    private struct FactRefused: Error {
        var request: Int
        var fact: Range<Int>
        var refused: Int
        var error: LedgerError
    }

    /// One transaction for the requests: the facts found refused, answered without being
    /// appended, and the write done again until none is (each pass answers at least one more).
    private func commitTogether(_ requests: [WriteQueue.Request]) throws -> [[AppendResult]] {
        var refusedFacts: [FactRefused] = []
        while true {
            do {
                return try commitTogether(requests, refusedFacts: refusedFacts)
            } catch let refused as FactRefused {
                refusedFacts.append(refused)
            }
        }
    }

    /// The answers of a fact's events when one of them was refused: its own error, and the
    /// same code for the others, saying which.
    private static func answers(to refused: FactRefused, events: [Event]) -> [AppendResult] {
        refused.fact.map { index in
            index == refused.refused
                ? .failure(refused.error)
                : .failure(LedgerError(refused.error.code,
                    "not appended: it is one fact with event \"\(events[refused.refused].id)\", which was refused: \(refused.error.message)"))
        }
    }

    private func commitTogether(_ requests: [WriteQueue.Request], refusedFacts: [FactRefused]) throws -> [[AppendResult]] {
        let (results, session) = try storage.write(lookingUp: lookups(of: requests)) { writer in
            try follower?.catchUp(writer)
            var session = ProjectionSession(
                live: live, reader: writer, facts: IndexedFacts(writer: writer), catalog: live.catalog, position: live.position)
            // A forget goes alone (the queue takes it so): it renames what other events would read.
            session.mayForget = requests.count == 1 && requests[0].events.count == 1
            var results: [[AppendResult]] = []
            results.reserveCapacity(requests.count)
            let latest = Event.latestAcceptedTime()
            var wroteBesides = false
            for (index, request) in requests.enumerated() {
                if case .write(let body) = request.work {
                    try body(writer)
                    wroteBesides = true
                }
                let appends = request.appends
                var answered: [AppendResult] = []
                answered.reserveCapacity(appends.events.count)
                var facts = appends.facts[...]
                var offset = 0
                while offset < appends.events.count {
                    guard let fact = facts.first, fact.lowerBound == offset else {
                        answered.append(try session.append(appends.events[offset], notAfter: latest, writer: writer, duplicates: appends.duplicates))
                        offset += 1
                        continue
                    }
                    facts = facts.dropFirst()
                    offset = fact.upperBound
                    if let refused = refusedFacts.first(where: { $0.request == index && $0.fact == fact }) {
                        answered += Self.answers(to: refused, events: appends.events)
                        continue
                    }
                    for event in fact {
                        let result = try session.append(appends.events[event], notAfter: latest, writer: writer, duplicates: appends.duplicates)
                        if case .failure(let error) = result {
                            throw FactRefused(request: index, fact: fact, refused: event, error: error)
                        }
                        answered.append(result)
                    }
                }
                results.append(answered)
            }
            // Nothing to store: abort, so that not even LMDB's meta page changes.
            if session.appendedCount == 0 && !wroteBesides {
                writer.discard()
            } else if recordsClock {
                // When the log reached this position, in the same commit: the feed's clock,
                // which never goes back (another process's, or a wall clock stepped back).
                try writer.recordClock(ClockReading(position: session.position, time: try Self.clockTime(writer)))
            }
            return (results, session)
        }
        if session.appendedCount > 0 {
            session.publish(to: live)
            committed.signal()
        }
        if session.didForget {
            live.forgets.publish(position: session.position, renames: session.forgotten)
            scrubAfterForget()
        }
        return results
    }

    /// A forget committed: the storage's old page versions that named the account are
    /// overwritten now (`LedgerStorage.scrubFreedPages`). The forget stands if this fails: a
    /// later forget scrubs again.
    private func scrubAfterForget() {
        do {
            if let pages = try storage.scrubFreedPages() {
                logger.info("scrubbed freed pages after a forget", metadata: ["pages": "\(pages)"])
            }
        } catch {
            logger.error("scrubbing freed pages after a forget failed", metadata: ["error": "\(StorageErrors.map(error))"])
        }
    }

    /// What the batch's rules will look up (see `LedgerStorage.write(lookingUp:_:)`); nil for
    /// storage whose lookups are local.
    private func lookups(of requests: [WriteQueue.Request]) -> Lookups? {
        guard storage.isShared else { return nil }
        var lookups = Lookups()
        var named = Set<UTF8Key>()
        for request in requests {
            for event in request.events {
                Rules.lookups(of: event, into: &lookups)
                for account in event.accountsNamed where storage.accountNames.cachedHandle(of: account) == nil
                    && named.insert(UTF8Key(account)).inserted {
                    lookups.accountHandles.append(account)
                }
            }
        }
        if let snapshot = live.snapshot?.position {
            lookups.snapshot = snapshot
            lookups.accounts = live.notInMemory(requests.flatMap { $0.events.map(\.account) })
        }
        return lookups
    }

    /// Shared storage, once no snapshot of this process is being written (written, or dropped
    /// because another process's overtook it): moves to the newest stored snapshot, at once
    /// rather than at the next catch-up, since the dropped one's predecessor may be too old for
    /// pruning to keep what it reads.
    private func followSnapshots() {
        guard let follower, !live.isWritingSnapshot else { return }
        follower.catchUpLogged()
    }
}
