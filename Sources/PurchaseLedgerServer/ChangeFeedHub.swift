import Logging
import PurchaseLedger
import ServiceLifecycle

/// The server's one follower of the ledger's change feed: it keeps the most recent changes
/// (at most `capacity`) for the readers of `GET /v1/changes` and its stream, and wakes the ones
/// waiting for a change. A reader further behind is answered from a derivation of its own
/// (`Ledger.changes(after:follow:)`): slower, never wrong. Following a ledger open for writing,
/// it ticks the ledger's clock when an instant where a projection changes has passed.
public actor ChangeFeedHub: Service {
    private let ledger: Ledger
    private let capacity: Int
    private let logger: Logger
    /// The changes after `retainedAfter`, in order.
    private var recent: [LedgerChange] = []
    private var retainedAfter = FeedCursor.start
    private var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
    private var nextWaiter = 0

    public init(ledger: Ledger, capacity: Int = 10_000, logger: Logger) {
        self.ledger = ledger
        self.capacity = max(1, capacity)
        self.logger = logger
    }

    /// Follows the feed until shutdown. A failure (a read the storage refused, say) is logged
    /// and the feed resumed after the last change kept, a second later: the server serves on.
    public func run() async throws {
        try? await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do {
                    for try await change in self.ledger.changes(after: await self.lastKept, pollInterval: .milliseconds(100)) {
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
        if cursor < retainedAfter {
            var changes: [LedgerChange] = []
            for try await change in ledger.changes(after: cursor, follow: false) {
                changes.append(change)
                if changes.count == limit { break }
            }
            return (changes, changes.last?.cursor ?? cursor)
        }
        var found = available(after: cursor, limit: limit)
        if found.isEmpty, wait > .zero {
            await waitForChange(timeout: wait)
            // A burst during the wait may have pushed the cursor out of what is kept.
            if cursor < retainedAfter { return try await changes(after: cursor, limit: limit, wait: .zero) }
            found = available(after: cursor, limit: limit)
        }
        return (found, found.last?.cursor ?? cursor)
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
