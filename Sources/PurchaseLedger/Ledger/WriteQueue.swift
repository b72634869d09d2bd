import Dispatch
import Synchronization

/// Appends submitted to the ledger, awaiting their commit. Submitted in order, applied in
/// that order: a producer that submits several batches one after the other can wait for
/// their results later and still have them checked and logged in submission order.
public final class PendingAppends: Sendable {
    private enum State {
        case pending
        case waiting(CheckedContinuation<[AppendResult], any Error>)
        case done(Result<[AppendResult], any Error>)
        case taken
    }

    private let state = Mutex(State.pending)

    init() {}

    init(failure: any Error) {
        state.withLock { $0 = .done(.failure(failure)) }
    }

    init(results: [AppendResult]) {
        state.withLock { $0 = .done(.success(results)) }
    }

    /// One result per submitted event, once the commit that holds them is durable. Throws when
    /// the storage failed (nothing of the submission was written) or the ledger was closed.
    /// Call it once.
    public func results() async throws -> [AppendResult] {
        try await withCheckedThrowingContinuation { continuation in
            let ready: Result<[AppendResult], any Error>? = state.withLock { state in
                switch state {
                case .pending:
                    state = .waiting(continuation)
                    return nil
                case .done(let result):
                    state = .taken
                    return result
                case .waiting, .taken:
                    preconditionFailure("PendingAppends.results() called twice")
                }
            }
            if let ready { continuation.resume(with: ready) }
        }
    }

    func complete(_ result: Result<[AppendResult], any Error>) {
        let waiting: CheckedContinuation<[AppendResult], any Error>? = state.withLock { state in
            switch state {
            case .pending:
                state = .done(result)
                return nil
            case .waiting(let continuation):
                state = .taken
                return continuation
            case .done, .taken:
                preconditionFailure("an append completed twice")
            }
        }
        waiting?.resume(with: result)
    }
}

/// The single writer. Appends from any number of tasks are queued here in the order they are
/// submitted; one serial dispatch queue takes whatever is waiting, commits it in one write
/// transaction (group commit), and only then completes each submission with its own results.
///
/// The commit runs synchronously on the writer's thread: an LMDB write transaction begins and
/// commits on one thread and never spans an `await`, and no task of the cooperative pool
/// blocks on a disk flush.
final class WriteQueue: Sendable {
    struct Request: Sendable {
        enum Work: Sendable {
            case append([Event])
            /// A snapshot of the projections, written between commits.
            case snapshot
        }

        let work: Work
        let pending: PendingAppends

        var events: [Event] {
            if case .append(let events) = work { events } else { [] }
        }

        var isSnapshot: Bool {
            if case .snapshot = work { true } else { false }
        }
    }

    private struct Queue {
        var requests: [Request] = []
        /// Requests before `head` were taken by the writer (compacted now and then).
        var head = 0
        var isDraining = false
        var isClosed = false
    }

    private let queued = Mutex(Queue())
    private let dispatchQueue = DispatchQueue(label: "PurchaseLedger.writer", qos: .userInitiated)
    /// Most events one transaction takes from the queue (a larger single request goes alone).
    private let maximumBatchEvents: Int
    private let commit: @Sendable ([Request]) -> Void

    /// `commit` must complete every request's `pending` exactly once.
    init(maximumBatchEvents: Int, commit: @escaping @Sendable ([Request]) -> Void) {
        self.maximumBatchEvents = maximumBatchEvents
        self.commit = commit
    }

    /// Queues `events` behind everything submitted before; returns at once.
    func submit(_ events: [Event]) -> PendingAppends {
        submit(.append(events))
    }

    /// Queues work behind everything submitted before; returns at once.
    func submit(_ work: Request.Work) -> PendingAppends {
        let pending = PendingAppends()
        let accepted = queued.withLock { queue -> Bool in
            guard !queue.isClosed else { return false }
            queue.requests.append(Request(work: work, pending: pending))
            if !queue.isDraining {
                queue.isDraining = true
                // Scheduled under the lock, so that `close()`'s barrier lands after it.
                dispatchQueue.async { self.drain() }
            }
            return true
        }
        if !accepted {
            pending.complete(.failure(StorageError(.closed, "the ledger is closed")))
        }
        return pending
    }

    /// Stops accepting appends and returns once everything accepted before is committed.
    func close() async {
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            queued.withLock { queue in
                queue.isClosed = true
                dispatchQueue.async { done.resume() }
            }
        }
    }

    private func drain() {
        while let batch = takeBatch() {
            commit(batch)
        }
    }

    /// Whole requests, in order, up to `maximumBatchEvents` (at least one request); a snapshot
    /// goes alone.
    private func takeBatch() -> [Request]? {
        queued.withLock { queue in
            guard queue.head < queue.requests.count else {
                queue.requests.removeAll(keepingCapacity: true)
                queue.head = 0
                queue.isDraining = false
                return nil
            }
            var end = queue.head
            var events = 0
            while end < queue.requests.count {
                let request = queue.requests[end]
                let count = request.events.count
                if end > queue.head && (events + count > maximumBatchEvents || request.isSnapshot || queue.requests[queue.head].isSnapshot) { break }
                events += count
                end += 1
            }
            let batch = Array(queue.requests[queue.head..<end])
            queue.head = end
            if queue.head > 1024 && queue.head * 2 > queue.requests.count {
                queue.requests.removeFirst(queue.head)
                queue.head = 0
            }
            return batch
        }
    }
}
