import Dispatch
import Synchronization

/// The single writer. Appends from any number of tasks are queued here; one serial dispatch
/// queue takes whatever is waiting, commits it in one write transaction (group commit) and only
/// then resumes each caller with its own results.
///
/// The commit runs synchronously on the writer's thread: an LMDB write transaction begins and
/// commits on one thread and never spans an `await`, and no task of the cooperative pool blocks
/// on a disk flush.
final class WriteQueue: Sendable {
    struct Request: Sendable {
        let events: [Event]
        let continuation: CheckedContinuation<[AppendResult], any Error>
    }

    private struct Pending {
        var requests: [Request] = []
        var eventCount = 0
        var isDraining = false
        var isClosed = false
    }

    private let pending = Mutex(Pending())
    private let queue = DispatchQueue(label: "PurchaseLedger.writer", qos: .userInitiated)
    /// Most events one transaction takes from the queue (a larger single request goes alone).
    private let maximumBatchEvents: Int
    private let commit: @Sendable ([Request]) -> Void

    /// `commit` must resume every request's continuation exactly once.
    init(maximumBatchEvents: Int, commit: @escaping @Sendable ([Request]) -> Void) {
        self.maximumBatchEvents = maximumBatchEvents
        self.commit = commit
    }

    func submit(_ events: [Event]) async throws -> [AppendResult] {
        try await withCheckedThrowingContinuation { continuation in
            let startDrain = pending.withLock { state -> Bool? in
                guard !state.isClosed else { return nil }
                state.requests.append(Request(events: events, continuation: continuation))
                state.eventCount += events.count
                guard !state.isDraining else { return false }
                state.isDraining = true
                return true
            }
            switch startDrain {
            case nil: continuation.resume(throwing: StorageError(.closed, "the ledger is closed"))
            case true?: queue.async { self.drain() }
            case false?: break
            }
        }
    }

    /// Stops accepting appends and returns once everything accepted before is committed.
    func close() async {
        pending.withLock { $0.isClosed = true }
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            queue.async { done.resume() }
        }
    }

    private func drain() {
        while let batch = takeBatch() {
            commit(batch)
        }
    }

    private func takeBatch() -> [Request]? {
        pending.withLock { state in
            guard !state.requests.isEmpty else {
                state.isDraining = false
                return nil
            }
            var taken = 0
            var events = 0
            for request in state.requests {
                if taken > 0 && events + request.events.count > maximumBatchEvents { break }
                taken += 1
                events += request.events.count
            }
            let batch = Array(state.requests.prefix(taken))
            state.requests.removeFirst(taken)
            state.eventCount -= events
            return batch
        }
    }
}
