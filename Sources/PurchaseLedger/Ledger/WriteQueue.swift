import Synchronization

/// The writer's queue: appends from any number of tasks wait here, in the order they were
/// admitted, until the writer (`LedgerWriter`) takes them, whole requests at a time, for one
/// write transaction (group commit).
///
/// The queue is bounded: when `maximumQueuedEvents` are waiting, submitters wait (in order of
/// arrival) until the writer takes some; a cancelled submitter leaves without queueing.
final class WriteQueue: Sendable {
    /// The events of one submission, what a `duplicate` means to their submitter, and which of
    /// them stand or fall together.
    struct Appends: Sendable {
        var events: [Event]
        var duplicates: DuplicatePolicy = .byID
        /// Runs of events that record one fact: all of a run are appended, or none (the writer
        /// answers the whole run with the refusal of the one it refused). Runs of more than one
        /// event, in order, disjoint; every other event stands alone.
        var facts: [Range<Int>] = []
    }


    struct Request: Sendable {
        enum Work: Sendable {
            case append(Appends)
            /// A snapshot of the projections, written between commits.
            case snapshot
            /// A write besides appends (a feed consumer's state), committed in the same
            /// transaction as the appends queued with it.
            case write(@Sendable (any LedgerStorageWriter) throws -> Void)
        }

        let id: UInt64
        let work: Work
        let pending: PendingAppends
        /// A snapshot, or a forget (`Forgetting`): committed in a write of its own. Decided once,
        /// when queued, not each time the writer looks at the queue; `Ledger.submit` gives a
        /// forget a submission of its own, so one event tells.
        let goesAlone: Bool

        init(id: UInt64, work: Work, pending: PendingAppends) {
            self.id = id
            self.work = work
            self.pending = pending
            goesAlone = switch work {
            case .snapshot: true
            case .append(let appends): appends.events.count == 1 && appends.events[0].type == .forgotten
            case .write: false
            }
        }

        var events: [Event] {
            if case .append(let appends) = work { appends.events } else { [] }
        }

        var appends: Appends {
            if case .append(let appends) = work { appends } else { Appends(events: []) }
        }

        var isSnapshot: Bool {
            if case .snapshot = work { true } else { false }
        }
    }

    private struct Admission {
        let id: UInt64
        let work: Request.Work
        let continuation: CheckedContinuation<PendingAppends, any Error>
    }

    private struct Queue {
        var requests: [Request] = []
        /// Requests before `head` were taken by the writer (compacted now and then).
        var head = 0
        /// Events queued and not yet taken by the writer.
        var queuedEvents = 0
        /// Submitters waiting for room, in order of arrival.
        var admissions: [Admission] = []
        /// Requests withdrawn by their cancelled submitter before the writer took them.
        var withdrawn: Set<UInt64> = []
        var nextID: UInt64 = 0
        var isDraining = false
        var isClosed = false
    }

    private let queued = Mutex(Queue())
    /// Requests queued and not taken, readable without the lock: what a writer lingering
    /// between batches watches (`lingerForSubmission(upTo:)`).
    private let waitingRequests = Atomic<Int>(0)
    /// Most events one transaction takes from the queue (a larger single request goes alone).
    private let maximumBatchEvents: Int
    /// Most events waiting for the writer; a single larger request is admitted when the queue
    /// is empty.
    private let maximumQueuedEvents: Int

    init(maximumBatchEvents: Int, maximumQueuedEvents: Int) {
        self.maximumBatchEvents = maximumBatchEvents
        self.maximumQueuedEvents = maximumQueuedEvents
    }

    /// Queues work behind everything admitted before, waiting for room when the queue is full.
    /// Throws `CancellationError` when cancelled while waiting (nothing was queued), and
    /// `StorageError.closed` after `close(thenUnderLock:)`. `wake` is called, under the
    /// queue's lock, when the writer must be woken to take the work (it returned from
    /// `takeBatch(endingTheDrain: true)` with nil since it last was).
    func submit(_ work: Request.Work, wake: () -> Void) async throws -> PendingAppends {
        let id = queued.withLock { queue -> UInt64 in
            queue.nextID += 1
            return queue.nextID
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<PendingAppends, any Error>) in
                let outcome: Result<PendingAppends, any Error>? = queued.withLock { queue in
                    if queue.isClosed { return .failure(StorageError(.closed, "the ledger is closed")) }
                    if Task.isCancelled { return .failure(CancellationError()) }
                    let count = Self.count(work)
                    if queue.admissions.isEmpty && (queue.queuedEvents == 0 || queue.queuedEvents + count <= maximumQueuedEvents) {
                        return .success(enqueue(&queue, id: id, work: work, wake: wake))
                    }
                    queue.admissions.append(Admission(id: id, work: work, continuation: continuation))
                    return nil
                }
                if let outcome { continuation.resume(with: outcome) }
            }
        } onCancel: {
            let admission: Admission? = queued.withLock { queue in
                guard let index = queue.admissions.firstIndex(where: { $0.id == id }) else { return nil }
                return queue.admissions.remove(at: index)
            }
            admission?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Events queued and not yet taken by the writer (for tests and metrics).
    var queuedEventCount: Int {
        queued.withLock { $0.queuedEvents }
    }

    private static func count(_ work: Request.Work) -> Int {
        if case .append(let appends) = work { appends.events.count } else { 0 }
    }

    /// Adds a request to the queue (under the lock) and wakes the writer if it is not draining.
    private func enqueue(_ queue: inout Queue, id: UInt64, work: Request.Work, wake: () -> Void) -> PendingAppends {
        let pending = PendingAppends { [weak self] in self?.withdraw(id) }
        queue.requests.append(Request(id: id, work: work, pending: pending))
        queue.queuedEvents += Self.count(work)
        waitingRequests.add(1, ordering: .releasing)
        if !queue.isDraining {
            queue.isDraining = true
            // Under the lock, so that a barrier scheduled by `close(thenUnderLock:)` lands after it.
            wake()
        }
        return pending
    }

    /// The submitter of a queued request was cancelled: withdraw it if the writer has not taken it.
    private func withdraw(_ id: UInt64) {
        let pending: PendingAppends? = queued.withLock { queue in
            guard let index = queue.requests[queue.head...].firstIndex(where: { $0.id == id }) else { return nil }
            queue.withdrawn.insert(id)
            return queue.requests[index].pending
        }
        pending?.complete(.failure(CancellationError()))
    }

    /// Spins, for at most `limit`, until a request is queued; true when one is. For a writer
    /// that found the queue empty and did not end its drain (`takeBatch(endingTheDrain:)`):
    /// submissions meanwhile do not wake it.
    func lingerForSubmission(upTo limit: Duration) -> Bool {
        let deadline = ContinuousClock.now + limit
        while !hasWaitingRequests() {
            if ContinuousClock.now >= deadline { return false }
        }
        return true
    }

    /// Posts a draining writer's continuation (`post`, under the lock) unless the queue is
    /// closed; false then, and the writer finishes in place: a close's barrier
    /// (`close(thenUnderLock:)`), posted under the same lock, must find nothing queued before
    /// it still waiting behind it.
    func postContinuation(_ post: () -> Void) -> Bool {
        queued.withLock { queue in
            guard !queue.isClosed else { return false }
            post()
            return true
        }
    }

    /// Whether a request is queued and not taken, read without the lock.
    func hasWaitingRequests() -> Bool {
        waitingRequests.load(ordering: .acquiring) > 0
    }

    /// Stops admitting work: waiting submitters get `StorageError.closed`. `barrier` runs under
    /// the lock, after every wake of the writer already made (the writer schedules its barrier
    /// there, behind everything queued before).
    func close(thenUnderLock barrier: () -> Void) {
        let refused: [Admission] = queued.withLock { queue in
            queue.isClosed = true
            defer { queue.admissions.removeAll() }
            barrier()
            return queue.admissions
        }
        for admission in refused {
            admission.continuation.resume(throwing: StorageError(.closed, "the ledger is closed"))
        }
    }

    /// Whole requests, in order, up to `maximumBatchEvents` (at least one request); a snapshot
    /// or a forget goes alone. Then lets waiting submitters in, in order, as room allows.
    /// Nil once the queue is empty: the next submission wakes the writer again, unless
    /// `endingTheDrain` is false (the writer lingers, `lingerForSubmission(upTo:)`, and takes
    /// it without being woken).
    func takeBatch(endingTheDrain: Bool = true) -> [Request]? {
        var admitted: [(CheckedContinuation<PendingAppends, any Error>, PendingAppends)] = []
        let batch: [Request]? = queued.withLock { queue in
            guard queue.head < queue.requests.count else {
                queue.requests.removeAll(keepingCapacity: true)
                queue.head = 0
                if endingTheDrain { queue.isDraining = false }
                // Nothing waits: a count that said otherwise would keep a lingering writer
                // taking nothing, again and again.
                assert(waitingRequests.load(ordering: .relaxed) == 0, "the queue's count of waiting requests drifted")
                waitingRequests.store(0, ordering: .relaxed)
                return nil
            }
            var end = queue.head
            var events = 0
            while end < queue.requests.count {
                let request = queue.requests[end]
                let count = request.events.count
                if end > queue.head && (events + count > maximumBatchEvents || request.goesAlone || queue.requests[queue.head].goesAlone) { break }
                events += count
                end += 1
            }
            let taken = queue.requests[queue.head..<end].filter { queue.withdrawn.remove($0.id) == nil }
            waitingRequests.subtract(end - queue.head, ordering: .relaxed)
            queue.queuedEvents -= events
            queue.head = end
            if queue.head > 1024 && queue.head * 2 > queue.requests.count {
                queue.requests.removeFirst(queue.head)
                queue.head = 0
            }
            while let next = queue.admissions.first,
                  queue.queuedEvents == 0 || queue.queuedEvents + Self.count(next.work) <= maximumQueuedEvents {
                queue.admissions.removeFirst()
                // The writer is draining (it is here): no wake.
                admitted.append((next.continuation, enqueue(&queue, id: next.id, work: next.work, wake: {})))
            }
            return taken
        }
        for (continuation, pending) in admitted {
            continuation.resume(returning: pending)
        }
        return batch
    }
}
