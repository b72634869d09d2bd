import Dispatch
import Synchronization
import Testing
@testable import PurchaseLedger
@testable import PurchaseLedgerLMDB
import LedgerTestSupport

/// The single writer under load: many appenders share commits, the queue stays bounded, and a
/// cancelled appender either appended or did not, and is told which.
struct GroupCommitTests {
    static func configuration(queue: Int) -> Ledger.Configuration {
        var configuration = Ledger.Configuration.testing
        configuration.maximumQueuedEvents = queue
        configuration.maximumBatchEvents = 64
        return configuration
    }

    @Test func theQueueStaysBoundedAndEveryoneGetsIn() async throws {
        try await withLedger(configuration: Self.configuration(queue: 20)) { ledger, _ in
            let watching = Atomic<Bool>(true)
            let largest = Atomic<Int>(0)
            let watcher = Task {
                while watching.load(ordering: .relaxed) {
                    let queued = ledger.writer?.queuedEventCount ?? 0
                    var current = largest.load(ordering: .relaxed)
                    while queued > current {
                        let (exchanged, original) = largest.compareExchange(expected: current, desired: queued, ordering: .relaxed)
                        if exchanged { break }
                        current = original
                    }
                    await Task.yield()
                }
            }
            let tasks = 48
            let perTask = 25
            try await withThrowingTaskGroup(of: [UInt64].self) { group in
                for task in 0..<tasks {
                    group.addTask {
                        var script = Script("user-\(task)")
                        var positions: [UInt64] = []
                        for index in 0..<perTask {
                            positions.append(try await ledger.append(script.add("p\(index)", "com.example.gem")).position)
                        }
                        return positions
                    }
                }
                var all: [UInt64] = []
                for try await positions in group {
                    // Each appender's events keep its order.
                    #expect(positions == positions.sorted())
                    all += positions
                }
                #expect(all.sorted() == Array(1...UInt64(tasks * perTask)))
            }
            watching.store(false, ordering: .relaxed)
            await watcher.value
            #expect(largest.load(ordering: .relaxed) <= 20)
        }
    }

    @Test func aCancelledAppenderAppendedExactlyWhenItWasToldSo() async throws {
        try await withLedger(configuration: Self.configuration(queue: 100_000)) { ledger, _ in
            var outcomes: [(Event, Bool)] = []
            for round in 0..<40 {
                // Keep the writer busy, then race an append against its cancellation.
                let busy = (0..<200).map { Event.paymentAdded(id: "busy-\(round)-\($0)", account: "b", at: newYear, payment: "b-\(round)-\($0)", product: "com.example.gem") }
                async let filler = ledger.append(contentsOf: busy)
                let event = Event.paymentAdded(id: "raced-\(round)", account: "r", at: newYear, payment: "r-\(round)", product: "com.example.gem")
                let task = Task { try await ledger.append(event) }
                if round % 2 == 0 { await Task.yield() }
                task.cancel()
                switch await task.result {
                case .success(.appended):
                    outcomes.append((event, true))
                case .failure(is CancellationError):
                    outcomes.append((event, false))
                case let other:
                    Issue.record("unexpected \(other)")
                }
                _ = try await filler
            }
            let history = try ledger.history(account: "r")
            let logged = Set(history.map(\.event.id))
            #expect(history.count == logged.count, "nothing appended twice")
            for (event, appended) in outcomes {
                #expect(logged.contains(event.id) == appended, "\(event.id)")
            }
            // Appends cancelled while the writer was busy were withdrawn.
            #expect(outcomes.contains { !$0.1 }, "\(outcomes.count { $0.1 }) of \(outcomes.count) appended")
        }
    }

    /// A feed consumer's state written while appends wait joins their commit (one flush for
    /// all); one that throws writes nothing and takes nothing from the appends it was queued with.
    @Test(arguments: Backend.available)
    func feedStateWritesJoinTheAppendsCommitAndOneThatThrowsWritesNothing(on backend: Backend) async throws {
        struct Refused: Error {}
        let reports = Mutex<[CommitReport]>([])
        var configuration = Self.configuration(queue: 100_000)
        configuration.onCommit = { report in reports.withLock { $0.append(report) } }
        try await withLedger(on: backend, configuration: configuration) { ledger, _ in
            var filled = 0
            for round in 0..<2 {
                // The writer busy with a large append (alone in its commit: it is over a batch's
                // 64 events), so that what follows waits in its queue together.
                let filler = (0..<2000).map {
                    Event.paymentAdded(id: "fill-\(round)-\($0)", account: "f", at: newYear, payment: "f-\(round)-\($0)", product: "com.example.gem")
                }
                let busy = try await ledger.submit(contentsOf: filler)
                filled += filler.count
                let refuse = round == 1
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for index in 0..<6 {
                        group.addTask {
                            let event = Event.paymentAdded(
                                id: "e\(round)-\(index)", account: "u", at: newYear, payment: "p\(round)-\(index)", product: "com.example.gem")
                            let outcome = try await ledger.append(event)
                            guard case .appended = outcome else {
                                Issue.record("\(event.id): \(outcome)")
                                return
                            }
                        }
                        group.addTask {
                            do {
                                try await ledger.updateFeedState { state in
                                    try state.set("test/\(round)/\(index)", [UInt8(index)])
                                    if refuse && index == 3 { throw Refused() }
                                }
                                #expect(!(refuse && index == 3))
                            } catch is Refused {
                                #expect(refuse && index == 3)
                            }
                        }
                    }
                    try await group.waitForAll()
                }
                _ = try await busy.results()
                let states = try ledger.feedStates(prefix: "test/\(round)/")
                let written: [UInt8] = refuse ? [0, 1, 2, 4, 5] : [0, 1, 2, 3, 4, 5]
                let keys: [String] = written.map { "test/\(round)/\($0)" }
                let values: [[UInt8]] = written.map { [$0] }
                #expect(states.map(\.key) == keys)
                #expect(states.map(\.value) == values)
                #expect(try ledger.history(account: "u").count == (round + 1) * 6)
                #expect(ledger.position == UInt64(filled + (round + 1) * 6))
            }
            // Writes went into commits of appends: a commit held more requests than events.
            let committed = reports.withLock { $0 }.filter { $0.failure == nil }
            #expect(committed.contains { $0.requests > $0.events }, "\(committed.map { ($0.requests, $0.events) })")
        }
    }

    @Test func closingRefusesWaitingSubmittersAndCommitsQueuedOnes() async throws {
        try await withTemporaryDirectory { directory in
            let ledger = try Ledger.open(at: directory + "/ledger", catalog: wordGameCatalog, configuration: Self.configuration(queue: 100_000))
            var pending: [PendingAppends] = []
            for index in 0..<20 {
                pending.append(try await ledger.submit(contentsOf: [
                    Event.paymentAdded(id: "e\(index)", account: "u", at: newYear, payment: "p\(index)", product: "com.example.gem"),
                ]))
            }
            await ledger.close()
            for (index, submission) in pending.enumerated() {
                #expect(try await submission.results().map(\.summary) == ["appended \(index + 1)"])
            }
            let refused = await #expect(throws: StorageError.self) { try await ledger.submit(contentsOf: [
                Event.paymentAdded(id: "late", account: "u", at: newYear, payment: "late", product: "com.example.gem"),
            ]) }
            #expect(refused?.code == .closed)
        }
    }
}

/// Lines rejected before the ledger (they did not decode) and the ledger's own outcomes, merged
/// in one place for the server's `POST /v1/events` and `ledger import`.
struct AppendLinesTests {
    @Test func eachLineGetsItsOwnResultInOrder() async throws {
        try await withLedger { ledger, _ in
            var script = Script("ana")
            let undecodable = LedgerError(.invalidEvent, "line 2 is not JSON")
            let added = script.add("A1", "com.example.gem")
            let lines: [Result<Event, LedgerError>] = [
                .success(added), .failure(undecodable), .success(added),
                .success(script.purchased("A2", "t1")), .failure(LedgerError(.invalidEvent, "line 5")),
            ]
            let results = try await ledger.append(lines: lines)
            #expect(results.count == 5)
            #expect(try results[0].get() == .appended(position: 1))
            #expect(results[1] == .failure(undecodable))
            #expect(try results[2].get() == .duplicate(of: 1))
            #expect(results[3].failureCode == .unknownPayment)
            #expect(results[4] == .failure(LedgerError(.invalidEvent, "line 5")))
            #expect(ledger.position == 1)
            // Nothing but rejections: nothing reaches the writer, each line keeps its own.
            #expect(try await ledger.append(lines: [.failure(undecodable)]) == [.failure(undecodable)])
            #expect(ledger.position == 1)
        }
    }
}

extension Result where Failure == LedgerError {
    var failureCode: LedgerError.Code? {
        if case .failure(let error) = self { error.code } else { nil }
    }
}
