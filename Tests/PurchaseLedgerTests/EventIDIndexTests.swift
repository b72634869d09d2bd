import Dispatch
import Foundation
import Synchronization
import LMDB
import LedgerTestSupport
import Testing
@testable import PurchaseLedger
@testable import PurchaseLedgerLMDB

/// The LMDB backend's event-id index in two tables (`EventIDIndex`): the newest ids appended
/// by position to `recentEvents`, moved into `events` in key order when they are many. Every
/// earlier id is a duplicate wherever it is, in whatever order the ids come.
struct EventIDIndexTests {
    /// Ids in no order, as an app's UUIDs are.
    private static func id(_ index: Int) -> String {
        var random = SeededGenerator(seed: UInt64(index) &* 0x9E37_79B9 &+ 1)
        return String(UInt64.random(in: 0...UInt64.max, using: &random), radix: 36) + "-\(index)"
    }

    private static func event(_ index: Int, id: String? = nil) -> Event {
        .paymentAdded(
            id: id ?? Self.id(index), account: "a\(index % 7)", at: Timestamp(seconds: newYear.seconds + Int64(index)),
            payment: "p\(index)", product: "com.example.tenhints")
    }

    private static func tables(_ path: String) throws -> (events: Int, recent: Int, mark: UInt64?) {
        var readOnly = Environment.Configuration()
        readOnly.readOnly = true
        let storage = try LMDBLedgerStorage(directory: path, configuration: readOnly)
        defer { storage.close() }
        return try storage.environment.read { txn in
            (try txn.count(storage.tables.events), try txn.count(storage.tables.recentEvents!),
             try EventIDIndex.indexedThrough(storage.tables.meta, in: txn))
        }
    }

    @Test func everyEarlierIDIsADuplicateBeforeAndAfterTheMove() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/ledger"
            let ledger = try Ledger.open(at: path, catalog: wordGameCatalog, configuration: .testing)
            _ = try await ledger.appendAll((1...100).map { Self.event($0) })
            // Not in `events` yet: 100 appends, each at the end of `recentEvents`.
            await ledger.close()
            #expect(try Self.tables(path) == (0, 100, 0))

            // A batch across the move (at 8,192), with ids it repeats: an earlier batch's, not
            // moved yet; its own before the move; its own that the move took; its own after.
            let threshold = Int(EventIDIndex.moveThreshold)
            var batch: [Event] = []
            for index in 101...threshold + 50 {
                if index == 121 { batch.append(Self.event(0, id: Self.id(7))) }
                if index == 200 { batch.append(Self.event(0, id: Self.id(150))) }
                if index == threshold + 5 { batch.append(Self.event(0, id: Self.id(threshold - 10))) }
                batch.append(Self.event(index))
            }
            batch.append(Self.event(0, id: Self.id(threshold + 20)))
            let appender = try Ledger.open(at: path, configuration: .testing)
            let results = try await appender.append(contentsOf: batch)
            #expect(results.map(\.summary).filter { $0.hasPrefix("duplicate") }
                == ["duplicate 7", "duplicate 150", "duplicate \(threshold - 10)", "duplicate \(threshold + 20)"])
            #expect(results.count { if case .success(.appended) = $0 { true } else { false } } == threshold + 50 - 100)
            await appender.close()

            // Moved once: the first 8,192 in `events`, the rest (the batch's last 50) recent.
            let tables = try Self.tables(path)
            #expect(tables.events == threshold && tables.recent == 50 && tables.mark == UInt64(threshold))

            // In a new process's memory: every id is found, wherever it is, at its position.
            let reopened = try Ledger.open(at: path, configuration: .testing)
            for index in [1, 100, 101, threshold - 10, threshold, threshold + 1, threshold + 50] {
                #expect(try reopened.position(ofEventID: Self.id(index)) == UInt64(index), "\(index)")
            }
            #expect(try reopened.position(ofEventID: Self.id(threshold + 51)) == nil)
            let again = try await reopened.append(contentsOf: [3, threshold + 40].map { Self.event(0, id: Self.id($0)) })
            #expect(again.map(\.summary) == ["duplicate 3", "duplicate \(threshold + 40)"])
            await reopened.close()

            let log = try LedgerLog.open(at: path)
            #expect(log.verify().isIntact)
            log.close()
        }
    }

    /// The second move of ids in no order puts them among the first move's, before and after
    /// the greatest: each is found at its position, and `verify` finds `events` whole.
    @Test func aSecondMoveOfIDsInNoOrderPutsThemAmongTheFirstOnes() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/ledger"
            let threshold = Int(EventIDIndex.moveThreshold)
            let ledger = try Ledger.open(at: path, catalog: wordGameCatalog, configuration: .testing)
            for first in stride(from: 1, through: 2 * threshold + 10, by: 1000) {
                _ = try await ledger.appendAll((first...min(first + 999, 2 * threshold + 10)).map { Self.event($0) })
            }
            await ledger.close()
            #expect(try Self.tables(path) == (2 * threshold, 10, UInt64(2 * threshold)))

            // The second move's ids fall on both sides of the first's greatest.
            let greatest = (1...threshold).map { UTF8Key(Self.id($0)) }.max()!
            let second = (threshold + 1...2 * threshold).map { UTF8Key(Self.id($0)) }
            #expect(second.contains { $0 < greatest } && second.contains { greatest < $0 })

            // `events` holds each id at its position, in key order (verify reads it whole).
            let log = try LedgerLog.open(at: path)
            #expect(log.verify().isIntact)
            log.close()
            let reopened = try Ledger.open(at: path, configuration: .testing)
            for index in stride(from: 1, through: 2 * threshold + 10, by: 97) {
                #expect(try reopened.position(ofEventID: Self.id(index)) == UInt64(index), "\(index)")
            }
            let again = try await reopened.append(contentsOf: [5, threshold + 5, 2 * threshold + 5].map { Self.event(0, id: Self.id($0)) })
            #expect(again.map(\.summary) == ["duplicate 5", "duplicate \(threshold + 5)", "duplicate \(2 * threshold + 5)"])
            await reopened.close()
        }
    }

    /// A tail that lost an id (damage) stops the move that would have left it out of `events`
    /// for good, where a later duplicate of it would pass: the append fails as damaged and
    /// nothing moves. The appending process holds the tail's ids in memory, so only the move
    /// reads the table.
    @Test func aTailMissingAnIDStopsTheMoveAsDamage() async throws {
        try await withTemporaryDirectory { directory in
            let threshold = Int(EventIDIndex.moveThreshold)
            let ledger = try Ledger.open(at: directory + "/ledger", catalog: wordGameCatalog, configuration: .testing)
            _ = try await ledger.appendAll((1..<threshold).map { Self.event($0) })
            let storage = try #require(ledger.storage as? LMDBLedgerStorage)
            let deleted = try storage.write { writer in
                let lmdb = writer as! LMDBLedgerStorage.Writer
                return try (lmdb.txn as! LMDB.WriteTransaction).delete(in: storage.tables.recentEvents!, key: UInt64(10))
            }
            #expect(deleted)

            let error = await #expect(throws: StorageError.self) { try await ledger.append(Self.event(threshold)) }
            #expect(error?.code == .damaged)
            #expect(error?.position == 10)
            await ledger.close()
            #expect(try Self.tables(directory + "/ledger") == (0, threshold - 2, 0))
        }
    }

    /// A ledger written before `recentEvents` has every id in `events` and no mark: it is
    /// read so, and the first append starts the mark there.
    @Test func aLedgerWhoseEventsTableHoldsEveryIDKeepsFindingThem() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/ledger"
            let ledger = try Ledger.open(at: path, catalog: wordGameCatalog, configuration: .testing)
            _ = try await ledger.appendAll((1...50).map { Self.event($0) })
            await ledger.close()
            try LiveBytes.moveRecentEventIDs(in: path)
            let storage = try LMDBLedgerStorage(directory: path, configuration: .init())
            let deleted = try storage.environment.write { txn in try txn.delete(in: storage.tables.meta, key: EventIDIndex.indexedThroughKey) }
            #expect(deleted)
            storage.close()
            #expect(try Self.tables(path) == (50, 0, nil))

            let reopened = try Ledger.open(at: path, configuration: .testing)
            #expect(try reopened.position(ofEventID: Self.id(20)) == 20)
            _ = try await reopened.appendAll((51...60).map { Self.event($0) })
            let again = try await reopened.append(contentsOf: [20, 55].map { Self.event(0, id: Self.id($0)) })
            #expect(again.map(\.summary) == ["duplicate 20", "duplicate 55"])
            await reopened.close()
            #expect(try Self.tables(path) == (50, 10, 50))
            let log = try LedgerLog.open(at: path)
            #expect(log.verify().isIntact)
            log.close()
        }
    }

    /// A read begun before a move reads `events` as it was then: the ids the move took out of
    /// `recentEvents` are found there still, although this process has read the newer tail
    /// since.
    @Test func aReadBegunBeforeAMoveStillFindsTheIDsItMoved() async throws {
        try await withTemporaryDirectory { directory in
            let ledger = try Ledger.open(at: directory + "/ledger", catalog: wordGameCatalog, configuration: .testing)
            _ = try await ledger.appendAll((1...30).map { Self.event($0) })
            let storage = ledger.storage
            // On a thread of its own, a read begun now waits while the ledger moves on.
            let (begun, goOn, done) = (DispatchSemaphore(value: 0), DispatchSemaphore(value: 0), DispatchSemaphore(value: 0))
            let oldFound = Mutex<[UInt64?]>([])
            let thread = Thread {
                let found = try? storage.read { old in
                    let first = try old.position(ofEventID: Self.id(5))
                    begun.signal()
                    goOn.wait()
                    return [first] + (try [6, 17, 30, 31].map { try old.position(ofEventID: Self.id($0)) }) + [UInt64(try old.counts().eventIDs)]
                }
                oldFound.withLock { $0 = found ?? [] }
                done.signal()
            }
            thread.start()
            begun.wait()
            // A move (at 8,192), then a tail after it, which a later read reads.
            let threshold = Int(EventIDIndex.moveThreshold)
            _ = try await ledger.appendAll((31...threshold + 20).map { Self.event($0) })
            #expect(try ledger.position(ofEventID: "absent") == nil)
            #expect(try ledger.position(ofEventID: Self.id(threshold + 10)) == UInt64(threshold + 10))
            goOn.signal()
            done.wait()
            // Found at their positions in the old read, and 30 ids then; 31 was not appended yet.
            #expect(oldFound.withLock { $0 } == [5, 6, 17, 30, nil, 30])
            await ledger.close()
            #expect(try Self.tables(directory + "/ledger") == (threshold, 20, UInt64(threshold)))
        }
    }

    /// A write that appends and is then discarded leaves no id behind in this process's
    /// memory of the tail, and takes no position from the id appended there next.
    @Test func aDiscardedWriteLeavesNoIDBehind() async throws {
        try await withTemporaryDirectory { directory in
            let ledger = try Ledger.open(at: directory + "/ledger", catalog: wordGameCatalog, configuration: .testing)
            _ = try await ledger.appendAll((1...10).map { Self.event($0) })
            try ledger.storage.write { writer in
                try writer.append(record: [0], at: 11, eventID: "discarded", account: "a1")
                writer.discard()
            }
            #expect(try ledger.position(ofEventID: "discarded") == nil)
            _ = try await ledger.appendAll([Self.event(11)])
            #expect(try ledger.position(ofEventID: "discarded") == nil)
            #expect(try ledger.position(ofEventID: Self.id(11)) == 11)
            let again = try await ledger.append(contentsOf: [Self.event(0, id: Self.id(11)), Self.event(0, id: "discarded")])
            #expect(again.map(\.summary) == ["duplicate 11", "appended 12"])
            await ledger.close()
        }
    }
}
