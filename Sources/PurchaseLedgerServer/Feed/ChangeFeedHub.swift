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
    /// Derivations of readers behind what is kept, parked between their pages by the cursor
    /// they stopped at: the next page continues there instead of deriving from the log's start
    /// again (which made a reader paging through a long history quadratic). At most
    /// `parkedCatchUpLimit`, each holding a replay's state; the oldest goes first.
    private var parkedCatchUps: [FeedCursor: (changes: LedgerChanges.Iterator, parkedAt: ContinuousClock.Instant)] = [:]
    static let parkedCatchUpLimit = 4
    /// Derivations started for readers behind what is kept (for tests).
    private(set) var catchUpsStarted = 0

    public init(
        ledger: Ledger, excluding excluded: Set<StoreEnvironment> = [], priority: FeedPriority = .background, capacity: Int = 10_000,
        logger: Logger
    ) {
        self.ledger = ledger
        self.excluded = excluded
        self.priority = priority
        self.capacity = max(1, capacity)
        self.logger = logger
    }

    /// Follows the feed until graceful shutdown.
    public nonisolated func run() async throws {
        try? await cancelWhenGracefulShutdown { try await self.follow() }
    }

    /// Follows the feed until cancelled. A failure (a read the storage refused, say) is logged
    /// and the feed resumed after the last change kept, a second later: the server serves on.
    /// Off the actor, so that readers are answered while it derives.
    nonisolated func follow() async throws {
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

    private func keep(_ change: LedgerChange) {
        recent.append(change)
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
    public func changes(after cursor: FeedCursor, limit: Int, wait: Duration) async throws -> (changes: [LedgerChange], next: FeedCursor) {
        guard let found = await kept(after: cursor, limit: limit, wait: wait) else {
            var catchUp: LedgerChanges.Iterator
            if let parked = parkedCatchUps.removeValue(forKey: cursor) {
                catchUp = parked.changes
            } else {
                catchUpsStarted += 1
                catchUp = ledger.changes(after: cursor, follow: false, excluding: excluded).makeAsyncIterator()
            }
            var changes: [LedgerChange] = []
            while changes.count < limit, let change = try await catchUp.next() {
                changes.append(change)
            }
            // A full page: the reader will ask from its last change next.
            if changes.count == limit, let last = changes.last { park(catchUp, at: last.cursor) }
            return (changes, changes.last?.cursor ?? cursor)
        }
        return (found, found.last?.cursor ?? cursor)
    }

    private func park(_ catchUp: LedgerChanges.Iterator, at cursor: FeedCursor) {
        if parkedCatchUps.count >= Self.parkedCatchUpLimit,
           let oldest = parkedCatchUps.min(by: { $0.value.parkedAt < $1.value.parkedAt })?.key {
            parkedCatchUps[oldest] = nil
        }
        parkedCatchUps[cursor] = (catchUp, .now)
    }

    /// The kept changes after `cursor`, at most `limit`, waiting up to `wait` when there is none
    /// yet; nil when some change after `cursor` is no longer kept.
    func kept(after cursor: FeedCursor, limit: Int, wait: Duration) async -> [LedgerChange]? {
        guard cursor >= retainedAfter else { return nil }
        var found = available(after: cursor, limit: limit)
        if found.isEmpty, wait > .zero {
            await waitForChange(timeout: wait)
            // A burst during the wait may have pushed the cursor out of what is kept.
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
