import Logging
import PurchaseLedger
import ServiceLifecycle

/// The server's one derivation of the change feed in one scope (the environments it leaves
/// out): it follows the ledger and keeps the most recent changes (at most `capacity`) for every
/// reader in that scope, the readers of `GET /v1/changes` and its stream, and the webhook
/// endpoints, and wakes the ones waiting for a change. A reader further behind is answered from
/// a derivation of its own (`Ledger.changes(after:follow:)`): slower, never wrong. Following a
/// ledger open for writing, it ticks the ledger's clock when an instant where a projection
/// changes has passed. It derives at its `priority`: by default below the appends'.
public actor ChangeFeedHub: Service {
    private let ledger: Ledger
    let excluded: Set<StoreEnvironment>
    private let priority: FeedPriority
    private let capacity: Int
    private let logger: Logger
    /// The changes after `retainedAfter`, in order.
    private var recent: [LedgerChange] = []
    private var retainedAfter = FeedCursor.start
    private var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
    private var nextWaiter = 0
    /// Derivations of readers behind what is kept, parked between their pages by the reader's
    /// API key and the cursor they stopped at: the key's next page continues there instead of
    /// deriving from the log's start again (which made a reader paging through a long history
    /// quadratic). At most `parkedCatchUpLimit`, each holding a replay's state, and at most
    /// `parkedCatchUpsPerKey` of one key: a key at its share gives up its own oldest, so that
    /// one client asking from many cursors cannot push every other reader's out; otherwise the
    /// oldest goes first.
    private var parkedCatchUps: [ParkedCatchUp: (changes: LedgerChanges.Iterator, parkedAt: ContinuousClock.Instant)] = [:]
    static let parkedCatchUpLimit = 4
    static let parkedCatchUpsPerKey = 2

    private struct ParkedCatchUp: Hashable {
        var key: String
        var cursor: FeedCursor
    }
    /// Derivations started for readers behind what is kept (for tests).
    private(set) var catchUpsStarted = 0
    /// The forgets whose `forgotten` record the hub's own derivation may not have passed yet,
    /// by position: a change it keeps from before one is renamed as it is kept. (The window is
    /// renamed when the forget is taken from `forgets`, `forget(_:)`.)
    private var recentForgets: [(position: UInt64, names: [UTF8Key: String])] = []
    /// The forgets not applied yet: taken at every reader's request and every change kept, so
    /// that a reader who knows of a forget (`Ledger.forgetGeneration` moved) is never answered
    /// from a window that still names the old names.
    private nonisolated let forgets: ForgetMailbox

    /// The expensive reads' slots (`ExpensiveReads`), shared with the server's other hubs and
    /// routes: a reader behind what is kept derives in one, or is told the server is busy.
    nonisolated let reads: ExpensiveReads
    /// Most of the log's events one catch-up request derives (`Limits.feedCatchUpEvents`).
    let catchUpEvents: Int
    /// A parked derivation not continued for this long is dropped (it holds a replay's state).
    static let parkedLifetime = Duration.seconds(60)

    public init(
        ledger: Ledger, excluding excluded: Set<StoreEnvironment> = [], priority: FeedPriority = .background, capacity: Int = 10_000,
        expensiveReads: Int = ServerConfiguration.Limits().expensiveReads,
        catchUpEvents: Int = ServerConfiguration.Limits().feedCatchUpEvents, logger: Logger
    ) {
        self.ledger = ledger
        self.excluded = excluded
        self.priority = priority
        self.capacity = max(1, capacity)
        self.reads = ExpensiveReads(limit: expensiveReads)
        self.catchUpEvents = max(1, catchUpEvents)
        self.logger = logger
        self.forgets = ledger.forgetMailbox()
    }

    init(
        ledger: Ledger, excluding excluded: Set<StoreEnvironment>, priority: FeedPriority, reads: ExpensiveReads, catchUpEvents: Int,
        logger: Logger
    ) {
        self.ledger = ledger
        self.excluded = excluded
        self.priority = priority
        self.capacity = 10_000
        self.reads = reads
        self.catchUpEvents = max(1, catchUpEvents)
        self.logger = logger
        self.forgets = ledger.forgetMailbox()
    }

    /// A reader behind what is kept found no free slot for its derivation (`ExpensiveReads`).
    public struct Busy: Error {}

    /// Follows the feed until graceful shutdown, renaming what it keeps at each forget.
    public nonisolated func run() async throws {
        try? await cancelWhenGracefulShutdown {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await self.follow() }
                group.addTask {
                    // Renamed at once, not only at the next request: the window holds no old name longer.
                    for await _ in self.forgets.arrivals { await self.takeForgets() }
                }
                try await group.next()
                group.cancelAll()
            }
        }
    }

    /// Applies the forgets not applied yet, oldest first.
    private func takeForgets() {
        for notice in forgets.take() { forget(notice) }
    }

    /// A forget: the kept changes that name a renamed name are renamed (their cursors too,
    /// which may move them among the others: kept in cursor order again), and the parked
    /// derivations dropped (what they read ahead named the old names). Readers' cursors that
    /// name a renamed account are lowered when they ask (`changes(after:…)`).
    private func forget(_ notice: ForgetNotice) {
        let names = notice.newNames
        guard !names.isEmpty else { return }
        // Kept until the derivation passes the forget (`keep`), however many come meanwhile.
        recentForgets.append((notice.position, names))
        var renamed = false
        for index in recent.indices {
            if let change = recent[index].renaming(names) {
                recent[index] = change
                renamed = true
            }
        }
        if renamed { recent.sort { $0.cursor < $1.cursor } }
        parkedCatchUps.removeAll()
    }

    /// `change` as kept: renamed by each forget after it that the derivation had not read yet.
    private func renamedByForgets(_ change: LedgerChange) -> LedgerChange {
        var change = change
        for forget in recentForgets where change.position < forget.position {
            change = change.renaming(forget.names) ?? change
        }
        return change
    }

    /// `cursor` as a reader sent it, lowered when it names an account the ledger no longer
    /// knows (a forgotten one: `FeedCursor.lowered`), so that nothing answered echoes it.
    func current(_ cursor: FeedCursor) -> FeedCursor {
        cursor.lowered { (try? ledger.accountHandle(of: $0)) != nil }
    }

    /// Follows the feed until cancelled. A failure (a read the storage refused, say) is logged
    /// and the feed resumed after the last change kept, a second later: the server serves on.
    /// Off the actor, so that readers are answered while it derives.
    nonisolated func follow() async throws {
        // The window starts at the newest snapshot, where a derivation starts from the snapshot's
        // state rather than the log's start: a server opens its feed in the time of the log's tail.
        await startAtTheNewestSnapshot()
        try await withTaskExecutorPreference(priority.executor) {
            while !Task.isCancelled {
                do {
                    let changes = self.ledger.changes(after: await self.lastKept, excluding: self.excluded, pollInterval: .milliseconds(100))
                    for try await change in changes {
                        await self.keep(change)
                    }
                } catch is CancellationError {
                    return
                } catch {
                    self.logger.error("the change feed failed; resuming in a second", metadata: ["error": "\(error)"])
                    try await Task.sleep(for: .seconds(1))
                }
            }
        }
    }

    private var lastKept: FeedCursor { recent.last?.cursor ?? retainedAfter }

    /// Before anything is kept: keeps what comes after the newest snapshot (readers from before it
    /// derive for themselves, from a snapshot too).
    private func startAtTheNewestSnapshot() {
        guard recent.isEmpty, retainedAfter == .start, let snapshot = ledger.statistics().snapshotPosition else { return }
        retainedAfter = FeedCursor(position: snapshot)
    }

    private func keep(_ change: LedgerChange) {
        takeForgets()
        recent.append(recentForgets.isEmpty ? change : renamedByForgets(change))
        // A change at or after a forget's record comes from a state that applied it: its renames are done with.
        if !recentForgets.isEmpty { recentForgets.removeAll { $0.position <= change.position } }
        if recent.count > capacity * 2 {
            // Dropped in halves, so that keeping one change costs O(1) on average.
            let dropped = recent.count - capacity
            retainedAfter = recent[dropped - 1].cursor
            recent.removeFirst(dropped)
        }
        for waiter in waiters.values { waiter.resume() }
        waiters.removeAll()
    }

    /// The changes after `cursor`, at most `limit`; when there is none yet, waits up to `wait`
    /// for one. `next` is where to read from next time.
    /// A forget told while the page was read (it may name an old name) reads it again.
    ///
    /// A reader behind what is kept is answered from a derivation of its own, an expensive read
    /// (`ExpensiveReads`): in a slot (else `Busy`), on the idle class's threads, stopped when
    /// `clientLeft` turns true, and at most `catchUpEvents` of the log's events a request (a
    /// page then holds what was found, and `next` where the derivation got to: the reader's
    /// next request continues it). `key` names the reader's API key, whose share of the slots
    /// is bounded.
    public func changes(
        after asked: FeedCursor, limit: Int, wait: Duration, key: String = "", clientLeft: @escaping @Sendable () -> Bool = { false }
    ) async throws -> (changes: [LedgerChange], next: FeedCursor) {
        while true {
            let generation = ledger.forgetGeneration
            let page = try await changes(from: current(asked), limit: limit, wait: wait, key: key, clientLeft: clientLeft)
            if ledger.forgetGeneration == generation { return page }
        }
    }

    private func changes(
        from cursor: FeedCursor, limit: Int, wait: Duration, key: String, clientLeft: @escaping @Sendable () -> Bool
    ) async throws -> (changes: [LedgerChange], next: FeedCursor) {
        // `kept` took the forgets (a parked derivation across one is dropped by `forget`).
        guard let found = await kept(after: cursor, limit: limit, wait: wait) else {
            dropStaleCatchUps()
            guard let slot = reads.tryAcquire(key: key) else { throw Busy() }
            let parked = parkedCatchUps.removeValue(forKey: ParkedCatchUp(key: key, cursor: cursor))?.changes
            if parked == nil { catchUpsStarted += 1 }
            let (ledger, excluded, budget) = (self.ledger, self.excluded, catchUpEvents)
            let generation = ledger.forgetGeneration
            let (changes, catchUp, next) = try await ExpensiveReads.run(in: slot, until: clientLeft) {
                var catchUp = parked ?? ledger.changes(after: cursor, follow: false, excluding: excluded).makeAsyncIterator()
                let start = catchUp.eventsDerived
                var changes: [LedgerChange] = []
                var next = cursor
                reading: while changes.count < limit {
                    // Past the budget, the changes already derived wait in the derivation for the next request.
                    let spent = catchUp.eventsDerived - start
                    if spent >= budget, !changes.isEmpty { break reading }
                    switch try await catchUp.next(within: max(1, budget - spent)) {
                    case .change(let change):
                        changes.append(change)
                        next = change.cursor
                    case .reached(let reached):
                        next = max(next, reached)
                        break reading
                    case .end:
                        return (changes, nil as LedgerChanges.Iterator?, next)
                    }
                }
                return (changes, catchUp, next)
            }
            // More to read: the reader asks from `next`, where this derivation waits for it;
            // unless a forget came meanwhile (its state names the old names).
            if let catchUp, ledger.forgetGeneration == generation { park(catchUp, at: ParkedCatchUp(key: key, cursor: next)) }
            return (changes, next)
        }
        return (found, found.last?.cursor ?? cursor)
    }

    private func park(_ catchUp: LedgerChanges.Iterator, at place: ParkedCatchUp) {
        let own = parkedCatchUps.filter { $0.key.key == place.key }
        let giving = own.count >= Self.parkedCatchUpsPerKey ? own : parkedCatchUps.count >= Self.parkedCatchUpLimit ? parkedCatchUps : [:]
        if let oldest = giving.min(by: { $0.value.parkedAt < $1.value.parkedAt })?.key {
            parkedCatchUps[oldest] = nil
        }
        parkedCatchUps[place] = (catchUp, .now)
    }

    /// How many derivations are parked, in all or of `key` (for tests).
    func parkedCount(of key: String? = nil) -> Int {
        key.map { key in parkedCatchUps.keys.filter { $0.key == key }.count } ?? parkedCatchUps.count
    }

    /// Drops the parked derivations nobody continued within `parkedLifetime`.
    private func dropStaleCatchUps() {
        let now = ContinuousClock.now
        parkedCatchUps = parkedCatchUps.filter { now - $0.value.parkedAt < Self.parkedLifetime }
    }

    /// The kept changes after `cursor`, at most `limit`, waiting up to `wait` when there is none
    /// yet; nil when some change after `cursor` is no longer kept.
    func kept(after cursor: FeedCursor, limit: Int, wait: Duration) async -> [LedgerChange]? {
        takeForgets()
        guard cursor >= retainedAfter else { return nil }
        var found = available(after: cursor, limit: limit)
        if found.isEmpty, wait > .zero {
            await waitForChange(timeout: wait)
            // A burst during the wait may have pushed the cursor out of what is kept.
            takeForgets()
            guard cursor >= retainedAfter else { return nil }
            found = available(after: cursor, limit: limit)
        }
        return found
    }

    /// The feed after `cursor`, following: from what is kept, and from a derivation of its own
    /// while the cursor is behind it.
    nonisolated func changes(following cursor: FeedCursor) -> Following {
        Following(hub: self, after: cursor)
    }

    private func available(after cursor: FeedCursor, limit: Int) -> [LedgerChange] {
        // The first change after the cursor, by binary search: the changes are in cursor order.
        var low = 0
        var high = recent.count
        while low < high {
            let middle = (low + high) / 2
            if recent[middle].cursor <= cursor { low = middle + 1 } else { high = middle }
        }
        return Array(recent[low..<min(recent.count, low + limit)])
    }

    private func waitForChange(timeout: Duration) async {
        let id = nextWaiter
        nextWaiter += 1
        let timer = Task {
            try? await Task.sleep(for: timeout)
            self.resumeWaiter(id)
        }
        await withCheckedContinuation { waiters[id] = $0 }
        timer.cancel()
    }

    private func resumeWaiter(_ id: Int) {
        waiters.removeValue(forKey: id)?.resume()
    }
}

extension ChangeFeedHub {
    /// A hub's feed after a cursor, following (`changes(following:)`). A reader behind what the
    /// hub keeps derives for itself until the log's end, then reads from the hub again.
    struct Following: AsyncSequence {
        typealias Element = LedgerChange
        let hub: ChangeFeedHub
        let after: FeedCursor

        func makeAsyncIterator() -> Iterator {
            Iterator(hub: hub, cursor: after)
        }

        struct Iterator: AsyncIteratorProtocol {
            let hub: ChangeFeedHub
            var cursor: FeedCursor
            private var buffer: [LedgerChange] = []
            private var index = 0
            private var own: LedgerChanges.Iterator?

            init(hub: ChangeFeedHub, cursor: FeedCursor) {
                self.hub = hub
                self.cursor = cursor
            }

            mutating func next() async throws -> LedgerChange? {
                while true {
                    try Task.checkCancellation()
                    if index < buffer.count {
                        defer { index += 1 }
                        cursor = buffer[index].cursor
                        return buffer[index]
                    }
                    if own != nil {
                        if let change = try await own!.next() {
                            cursor = change.cursor
                            return change
                        }
                        own = nil
                    }
                    // A short wait: a cancelled reader (a shutdown, a lease lost) ends within it.
                    if let kept = await hub.kept(after: cursor, limit: 1000, wait: .milliseconds(250)) {
                        buffer = kept
                        index = 0
                    } else {
                        own = hub.ledger.changes(after: cursor, follow: false, excluding: hub.excluded).makeAsyncIterator()
                    }
                }
            }
        }
    }
}
