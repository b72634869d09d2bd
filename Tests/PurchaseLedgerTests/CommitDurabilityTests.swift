import Foundation
import LMDB
import LedgerTestSupport
import Logging
import Synchronization
import Testing
@testable import PurchaseLedger
@testable import PurchaseLedgerLMDB

/// The writer's commits between their commit and their flush (`CommitDurability`): nothing is
/// answered, and the feed reads nothing, before the flush that makes it durable returned.
struct CommitDurabilityTests {
    /// What closures on other threads collect.
    private final class Collected<Value: Sendable>: Sendable {
        private let values: Mutex<Value>
        init(_ value: Value) { values = Mutex(value) }
        var value: Value { values.withLock { $0 } }
        func change<R>(_ body: (inout Value) -> R) -> R { values.withLock { body(&$0) } }
    }

    private static func reading(_ position: UInt64) -> ClockReading {
        ClockReading(position: position, time: Timestamp(seconds: newYear.seconds + Int64(position), nanoseconds: 0))
    }

    private static func withStorage(_ body: (LMDBLedgerStorage, CommitDurability) throws -> Void) async throws {
        try await withTemporaryDirectory { directory in
            let storage = try LMDBLedgerStorage(directory: directory, configuration: Environment.Configuration())
            defer { storage.close() }
            try body(storage, CommitDurability(storage: storage, committed: CommitSignal(), logger: Logger(label: "test")))
        }
    }

    /// Commits `reading` the way the writer does, deferring its flush; `answered` gets `index`
    /// (or its negation, on failure) once it is flushed.
    private static func commit(
        _ reading: ClockReading?, as index: Int, in storage: LMDBLedgerStorage, _ durability: CommitDurability,
        answered: Collected<[Int]>
    ) throws {
        try storage.writeSyncingLater(lookingUp: nil) { writer in
            guard let reading else { return writer.discard() }
            durability.committing(reading)
            try writer.recordClock(reading)
        }
        durability.committed(wrote: reading != nil, appended: true) { outcome in
            answered.change { $0.append((try? outcome.get()) == nil ? -index : index) }
        }
    }

    @Test func commitsAreAnsweredInOrderOnlyOnceFlushedAndWritesOfNothingWaitForThoseBefore() async throws {
        try await Self.withStorage { storage, durability in
            #expect(storage.syncsCommitsLater)
            let answered = Collected<[Int]>([])
            try Self.commit(Self.reading(1), as: 1, in: storage, durability, answered: answered)
            // A duplicate's answer says its event is in the log: it waits for the commit before.
            try Self.commit(nil, as: 2, in: storage, durability, answered: answered)
            try Self.commit(Self.reading(3), as: 3, in: storage, durability, answered: answered)
            // Readers see the commits at once; nothing is answered, and the feed stops short.
            #expect(try storage.read { try $0.lastClockReading() } == Self.reading(3))
            #expect(answered.value.isEmpty)
            #expect(durability.undurableFrom() == Self.reading(1))
            durability.syncNow()
            #expect(answered.value == [1, 2, 3])
            #expect(durability.undurableFrom() == nil)
            // Nothing waits: a flush answers nothing again.
            durability.syncNow()
            #expect(answered.value == [1, 2, 3])
        }
    }

    @Test func aCommitBeingWrittenHoldsTheFeedBackAlreadyAndAFailedWriteReleasesIt() async throws {
        try await Self.withStorage { storage, durability in
            #expect(throws: StorageError.self) {
                try storage.writeSyncingLater(lookingUp: nil) { writer in
                    durability.committing(Self.reading(1))
                    // The feed reads storage while the commit is written: it must hold back.
                    #expect(durability.undurableFrom() == Self.reading(1))
                    try writer.recordClock(Self.reading(1))
                    throw StorageError(.io, "the write fails")
                }
            }
            durability.abandoned()
            #expect(durability.undurableFrom() == nil)
        }
    }

    @Test func aFailedFlushFailsItsAnswersAndEveryLaterOneAndTheFeedStaysBehindIt() async throws {
        try await withTemporaryDirectory { directory in
            let storage = try LMDBLedgerStorage(directory: directory, configuration: Environment.Configuration())
            let durability = CommitDurability(storage: storage, committed: CommitSignal(), logger: Logger(label: "test"))
            let answered = Collected<[Int]>([])
            try Self.commit(Self.reading(1), as: 1, in: storage, durability, answered: answered)
            // The flush cannot reach the file any more.
            storage.close()
            durability.syncNow()
            #expect(answered.value == [-1])
            // What was not known durable stays out of the feed; later answers fail unflushed.
            durability.committed(wrote: false, appended: false) { outcome in
                answered.change { $0.append((try? outcome.get()) == nil ? -2 : 2) }
            }
            durability.syncNow()
            #expect(answered.value == [-1, -2])
            #expect(durability.undurableFrom() == Self.reading(1))
        }
    }

    @Test func storageOpenedWithoutSyncOrReadOnlyAnswersAsItCommits() async throws {
        try await withTemporaryDirectory { directory in
            var configuration = Environment.Configuration()
            configuration.durability = .noSync
            let storage = try LMDBLedgerStorage(directory: directory, configuration: configuration)
            defer { storage.close() }
            #expect(!storage.syncsCommitsLater)
            let durability = CommitDurability(storage: storage, committed: CommitSignal(), logger: Logger(label: "test"))
            let answered = Collected<[Int]>([])
            try Self.commit(Self.reading(1), as: 1, in: storage, durability, answered: answered)
            #expect(answered.value == [1])
            #expect(durability.undurableFrom() == nil)
        }
    }

    /// Many appenders, so that the writer hands flushes to the flusher's thread while it
    /// commits the next batch: every answer finds its commit no longer waiting for a flush.
    @Test func aGroupCommitsAnswersComeAfterItsFlush() async throws {
        try await withLedger { ledger, _ in
            let durability = try #require(ledger.writer?.durability)
            let early = Collected<[UInt64]>([])
            try await withThrowingTaskGroup(of: Void.self) { group in
                for task in 0..<16 {
                    var script = Script("a\(task)")
                    let flows = (0..<25).map { script.add("p\($0)", "com.example.tenhints") }
                    group.addTask {
                        for event in flows {
                            guard case .appended(let position) = try await ledger.append(event) else { continue }
                            if let undurable = durability.undurableFrom(), undurable.position <= position {
                                early.change { $0.append(position) }
                            }
                        }
                    }
                }
                try await group.waitForAll()
            }
            #expect(ledger.position == 400)
            #expect(early.value.isEmpty)
        }
    }

    /// The feed of this process reads up to the oldest commit not flushed, and on from it once
    /// it is.
    @Test func theFeedHandsOutNothingAtOrAfterACommitNotFlushed() async throws {
        try await withLedger { ledger, _ in
            var script = Script("a")
            for index in 0..<3 {
                _ = try await ledger.append(script.add("p\(index)", "com.example.tenhints"))
            }
            let readings = try ledger.storage.read { try $0.clockReadings(after: nil, limit: 10) }
            let held = try #require(readings.first { $0.position == 2 })
            var everything: [LedgerChange] = []
            for try await change in ledger.changes(follow: false) { everything.append(change) }
            #expect(everything.map(\.position) == [1, 2, 3])
            // The commit at 2 is not flushed at the feed's first look, and is at its next.
            let looks = Collected(0)
            var changes = ledger.changes(follow: false, pollInterval: .milliseconds(1))
            changes.undurableFrom = { looks.change { looks in looks += 1; return looks == 1 ? held : nil } }
            var handedOut: [(position: UInt64, looks: Int)] = []
            for try await change in changes { handedOut.append((change.position, looks.value)) }
            #expect(handedOut.map(\.position) == everything.map(\.position))
            // Each change handed out after a look that found its commit flushed.
            #expect(handedOut.map(\.looks) == [1, 2, 2])
        }
    }
}
