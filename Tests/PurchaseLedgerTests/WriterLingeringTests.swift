import Synchronization
import Testing
@testable import PurchaseLedger

/// The writer's queue when the writer lingers at the end of a drain (`LedgerWriter.drain`): a
/// submission meanwhile is queued without waking it, the lingering sees it, and once the drain
/// ends the next submission wakes the writer again.
struct WriterLingeringTests {
    private static func event(_ index: Int) -> Event {
        .paymentAdded(id: "e\(index)", account: "a", at: newYear, payment: "p\(index)", product: "com.example.tenhints")
    }

    @Test func aSubmissionWhileTheWriterLingersIsTakenWithoutAWake() async throws {
        let queue = WriteQueue(maximumBatchEvents: 64, maximumQueuedEvents: 64)
        let wakes = Atomic<Int>(0)
        let submit = { (index: Int) in
            _ = try await queue.submit(.append(.init(events: [Self.event(index)]))) { wakes.add(1, ordering: .relaxed) }
        }
        try await submit(1)
        #expect(wakes.load(ordering: .relaxed) == 1)
        #expect(queue.takeBatch(endingTheDrain: false)?.count == 1)
        // Empty, and the drain goes on: nothing to linger for yet.
        #expect(queue.takeBatch(endingTheDrain: false) == nil)
        #expect(queue.lingerForSubmission(upTo: .zero) == false)
        try await submit(2)
        #expect(wakes.load(ordering: .relaxed) == 1)
        #expect(queue.lingerForSubmission(upTo: .zero))
        #expect(queue.takeBatch(endingTheDrain: false)?.map(\.events[0].id) == ["e2"])
        // The drain ends: the next submission wakes the writer.
        #expect(queue.takeBatch() == nil)
        #expect(queue.lingerForSubmission(upTo: .zero) == false)
        try await submit(3)
        #expect(wakes.load(ordering: .relaxed) == 2)
    }

    /// The count the lingering writer watches follows the queue: requests withdrawn by their
    /// cancelled submitter, and the queue's compaction after many are taken.
    @Test func theCountOfWaitingRequestsFollowsWithdrawalsAndCompaction() async throws {
        let queue = WriteQueue(maximumBatchEvents: 64, maximumQueuedEvents: 4096)
        let pending = try await queue.submit(.append(.init(events: [Self.event(0)]))) {}
        let waiter = Task { try await pending.results() }
        waiter.cancel()
        await #expect(throws: CancellationError.self) { try await waiter.value }
        #expect(queue.hasWaitingRequests())
        #expect(queue.takeBatch(endingTheDrain: false)?.isEmpty == true)
        #expect(!queue.hasWaitingRequests())
        #expect(queue.takeBatch(endingTheDrain: false) == nil)

        for index in 1...2000 {
            _ = try await queue.submit(.append(.init(events: [Self.event(index)]))) {}
        }
        var taken = 0
        while let batch = queue.takeBatch(endingTheDrain: false) {
            taken += batch.count
            #expect(queue.hasWaitingRequests() == (taken < 2000))
        }
        #expect(taken == 2000)
        #expect(!queue.lingerForSubmission(upTo: .zero))
    }

    /// A draining writer continues in a drain posted behind other work, but not once the queue
    /// is closed: the close's barrier is posted already, and must not run before what was
    /// queued before it.
    @Test func aDrainContinuesInPlaceOnceTheQueueIsClosed() async throws {
        let queue = WriteQueue(maximumBatchEvents: 64, maximumQueuedEvents: 64)
        let posted = Atomic<Int>(0)
        #expect(queue.postContinuation { posted.add(1, ordering: .relaxed) })
        #expect(posted.load(ordering: .relaxed) == 1)
        queue.close {}
        #expect(!queue.postContinuation { posted.add(1, ordering: .relaxed) })
        #expect(posted.load(ordering: .relaxed) == 1)
    }
}
