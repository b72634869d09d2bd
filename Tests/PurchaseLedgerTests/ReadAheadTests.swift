import Foundation
import Synchronization
import Testing
@testable import PurchaseLedger
import PurchaseLedgerLMDB
import PurchaseLedgerLocation
import LedgerTestSupport

#if canImport(Glibc)
import Glibc
#endif

/// A long replay decodes the log on a thread of its own, a chunk ahead of the thread that
/// applies it (`ReadAhead`, `LogReader.state`).
struct ReadAheadTests {
    private struct Failed: Error, Equatable {
        let run: Int
    }

    /// Counts kept across the two threads.
    private final class Counts: Sendable {
        let filled = Atomic<Int>(0)
        /// Runs filled into an array with no room yet: a new one.
        let newArrays = Atomic<Int>(0)
    }

    /// Held by a run's maker: gone once nothing holds the maker.
    private final class Witness: Sendable {}

    @Test(arguments: [1, 2, 3])
    func theRunsComeInOrderEachWhole(depth: Int) throws {
        var taken: [[Int]] = []
        try ReadAhead.forEach(40, depth: depth) { index, run in
            run.append(contentsOf: Array(repeating: index, count: index % 7 + 1))
        } _: { run in
            taken.append(run)
        }
        #expect(taken == (0..<40).map { Array(repeating: $0, count: $0 % 7 + 1) })
    }

    /// Where no thread can be made, the caller makes the runs itself: the same runs, in order,
    /// and a failed run handed over as far as it was made, then thrown.
    @Test func withoutAThreadTheCallerMakesTheRunsItself() {
        var taken: [[Int]] = []
        var threadsAskedFor = 0
        let error = #expect(throws: Failed.self) {
            try ReadAhead.forEach(20, depth: 1, startingThread: { _ in threadsAskedFor += 1; return nil }) { index, run in
                run.append(index)
                if index == 15 { throw Failed(run: index) }
                run.append(index)
            } _: { run in
                taken.append(run)
            }
        }
        #expect(threadsAskedFor == 1)
        #expect(error == Failed(run: 15))
        #expect(taken == (0..<15).map { [$0, $0] } + [[15]])
    }

    /// A run that fails is handed over as far as it was made (a replay applies the records
    /// before a damaged one, as it did without the thread), then thrown, and no run after it
    /// is made.
    @Test func aFailedRunIsHandedOverAsFarAsMadeThenThrown() {
        let counts = Counts()
        var taken: [[Int]] = []
        let error = #expect(throws: Failed.self) {
            try ReadAhead.forEach(100, depth: 2) { index, run in
                counts.filled.add(1, ordering: .relaxed)
                run.append(index)
                if index == 30 { throw Failed(run: index) }
                run.append(index)
            } _: { run in
                taken.append(run)
            }
        }
        #expect(error == Failed(run: 30))
        #expect(taken == (0..<30).map { [$0, $0] } + [[30]])
        #expect(counts.filled.load(ordering: .relaxed) == 31)
    }

    /// The caller stops (it throws): the thread stops too, having made at most `depth` runs past
    /// the last one the caller took, and the arrays go back and forth instead of a new one a run.
    @Test(arguments: [1, 2])
    func theThreadStopsWithItsCallerAndReusesItsArrays(depth: Int) {
        let counts = Counts()
        var taken = 0
        #expect(throws: Failed.self) {
            try ReadAhead.forEach(1_000, depth: depth) { (_, run: inout [Int]) in
                counts.filled.add(1, ordering: .relaxed)
                if run.capacity == 0 { counts.newArrays.add(1, ordering: .relaxed) }
                run.append(contentsOf: 0..<1_000)
            } _: { _ in
                taken += 1
                if taken == 500 { throw Failed(run: 499) }
            }
        }
        #expect(taken == 500)
        #expect(counts.filled.load(ordering: .relaxed) <= taken + depth)
        // At most: `depth` waiting, one with the caller, one being filled.
        #expect(counts.newArrays.load(ordering: .relaxed) <= depth + 2)
    }

    /// Once `forEach` returns, the thread is gone, and what it held with it (a replay's storage,
    /// which must be let go of on the thread that closes it).
    @Test func nothingTheThreadHeldOutlivesTheCall() throws {
        weak var witness: Witness?
        try {
            let held = Witness()
            witness = held
            try ReadAhead.forEach(8, depth: 1) { [held] index, run in
                withExtendedLifetime(held) { run.append(index) }
            } _: { _ in }
        }()
        #expect(witness == nil)
    }

    /// A replay in a cancelled task (a server's client left) stops with `CancellationError`.
    @Test func aCancelledReplayStops() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/ledger"
            let ledger = try Ledger.open(at: path, catalog: wordGameCatalog, configuration: Self.quiet)
            try await Self.appendPurchases(to: ledger)
            await ledger.close()
            let log = try LedgerLog.open(at: path)
            defer { log.close() }
            let (gate, opening) = AsyncStream<Void>.makeStream()
            let replay = Task {
                for await _ in gate {}
                return try log.state(useSnapshots: false)
            }
            replay.cancel()
            opening.finish()
            await #expect(throws: CancellationError.self) { try await replay.value }
        }
    }

    /// A caller in the idle scheduling class (the server's expensive reads) gets a thread in it
    /// too (as Linux creates threads); a caller in the normal class, one in the normal class.
    @Test func theThreadRunsInItsCallersSchedulingClass() async throws {
        #if os(Linux)
        let lowered = try await onThreadOfItsOwn(lowered: true)
        let normal = try await onThreadOfItsOwn(lowered: false)
        #expect(lowered.caller == lowered.helper)
        #expect(lowered.helper.isLowered)
        #expect(normal.caller == normal.helper)
        #expect(!normal.helper.isLowered)
        #endif
    }

    #if os(Linux)
    private struct SchedulingClass: Equatable, Sendable {
        let policy: Int32
        let nice: Int32

        static var current: SchedulingClass {
            SchedulingClass(policy: sched_getscheduler(0), nice: getpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0))
        }

        var isLowered: Bool { policy == linuxIdleSchedulingPolicy || nice > 0 }
    }

    /// Runs a read ahead from a thread of the test's own (lowering a thread of the test pool
    /// would slow every test after it), and reports the caller's and the helper's classes.
    private func onThreadOfItsOwn(lowered: Bool) async throws -> (caller: SchedulingClass, helper: SchedulingClass) {
        try await withCheckedThrowingContinuation { continuation in
            let thread = Thread {
                if lowered { lowerThisThreadsPriority() }
                let caller = SchedulingClass.current
                let helper = Mutex<SchedulingClass?>(nil)
                do {
                    try ReadAhead.forEach(3, depth: 1) { _, run in
                        helper.withLock { $0 = SchedulingClass.current }
                        run.append(0)
                    } _: { _ in }
                    continuation.resume(returning: (caller, helper.withLock { $0 }!))
                } catch {
                    continuation.resume(throwing: error)
                }
            }
            thread.start()
        }
    }
    #endif

    // MARK: The replay

    /// 12,000 events, and a forget among them: three chunks, read ahead in runs.
    private static func appendPurchases(to ledger: Ledger) async throws {
        var batch: [Event] = []
        for index in 0..<6_000 {
            let account = "user-\(index % 300)"
            let at = Timestamp(seconds: newYear.seconds + Int64(index))
            let product = index % 3 == 0 ? "com.example.hardwords" : "com.example.tenhints"
            batch.append(.paymentAdded(id: "a\(index)", account: account, at: at, payment: "p\(index)", product: product))
            batch.append(.transactionUpdated(id: "b\(index)", account: account, at: at, TransactionUpdated(
                payment: "p\(index)", state: .purchased, transaction: "\(10_000_000 + index)")))
            if batch.count == 1_000 {
                _ = try await ledger.append(contentsOf: batch)
                batch.removeAll(keepingCapacity: true)
            }
            if index == 3_000 { _ = try #require(try await ledger.forget("user-7", requestedBy: "test", at: at)) }
        }
        #expect(ledger.position > UInt64(2 * LogReader.chunkSize))
    }

    private static var quiet: Ledger.Configuration {
        var configuration = Ledger.Configuration.testing
        configuration.snapshotInterval = nil
        configuration.snapshotOnClose = false
        return configuration
    }

    /// A full replay of several chunks equals the state the ledger kept, on both backends (on
    /// PostgreSQL each run is a chunk, and its names are read a run at a time).
    @Test(arguments: Backend.available)
    func aReplayOfSeveralChunksEqualsTheLedgersState(_ backend: Backend) async throws {
        try await withLocation(on: backend) { location in
            let ledger = try Ledger.open(location: location, catalog: wordGameCatalog, configuration: Self.quiet)
            try await Self.appendPurchases(to: ledger)
            let kept = try ledger.currentState()
            await ledger.close()
            // The forgotten account's purchases are its pseudonym's; "user-7" bought again after.
            #expect(kept.accountIDs.count == 301)
            let log = try LedgerLog.open(location: location)
            defer { log.close() }
            #expect(try log.state(useSnapshots: false) == kept)
        }
    }

    /// A damaged record in a replay's last chunk stops it, naming the record; up to the record
    /// before it, the replay is whole.
    @Test func aReplayOfSeveralChunksStopsAtADamagedRecord() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/ledger"
            let ledger = try Ledger.open(at: path, catalog: wordGameCatalog, configuration: Self.quiet)
            try await Self.appendPurchases(to: ledger)
            let damaged = ledger.position - 100
            await ledger.close()

            var bytes = try fileBytes(path + "/data.mdb")
            bytes[try LiveBytes.record(at: damaged, in: path) + 7] ^= 0x08
            try writeFile(path + "/data.mdb", bytes)
            let log = try LedgerLog.open(at: path)
            defer { log.close() }
            let error = #expect(throws: StorageError.self) { try log.state(useSnapshots: false) }
            #expect(error?.code == .damaged)
            #expect(error?.position == damaged)
            #expect(try log.state(at: damaged - 1, useSnapshots: false).position == damaged - 1)
        }
    }
}
