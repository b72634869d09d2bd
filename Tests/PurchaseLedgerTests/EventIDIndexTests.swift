import Dispatch
import Foundation
import Synchronization
import LMDB
import LedgerTestSupport
import Testing
@testable import PurchaseLedger
@testable import PurchaseLedgerLMDB

/// The LMDB backend's event-id index (`EventIDIndex`): the newest ids are their records' own
/// (`IndexTail`), moved into `events` in key order when they are many. Every earlier id is a
/// duplicate wherever it is, in whatever order the ids come.
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

    /// How many ids `events` holds, how many records the tail has (after the mark), the mark.
    /// The tables of older versions stay empty.
    private static func tables(_ path: String) throws -> (events: Int, tail: Int, mark: UInt64?) {
        var readOnly = Environment.Configuration()
        readOnly.readOnly = true
        let storage = try LMDBLedgerStorage(directory: path, configuration: readOnly)
        defer { storage.close() }
        return try storage.environment.read { txn in
            guard try txn.count(storage.tables.recentEvents!) == 0 else { throw TestFailure("recentEvents is written to") }
            let mark = try EventIDIndex.indexedThrough(storage.tables.meta, in: txn)
            let last = try txn.lastKey(storage.tables.log) ?? 0
            return (try txn.count(storage.tables.events), mark.map { Int(last - $0) } ?? 0, mark)
        }
    }

    @Test func everyEarlierIDIsADuplicateBeforeAndAfterTheMove() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/ledger"
            let ledger = try Ledger.open(at: path, catalog: wordGameCatalog, configuration: .testing)
            _ = try await ledger.appendAll((1...100).map { Self.event($0) })
            // Not in `events` yet: 100 appends, their ids in their records only.
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

            // Moved once: the first 8,192 in `events`, the rest (the batch's last 50) the tail.
            let tables = try Self.tables(path)
            #expect(tables.events == threshold && tables.tail == 50 && tables.mark == UInt64(threshold))

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

    /// A tail that lost a record (damage) stops the move that would have left its id out of
    /// `events` for good, where a later duplicate of it would pass: the append fails as damaged
    /// and nothing moves. The appending process holds the tail's ids in memory, so only the move
    /// reads the records.
    @Test(arguments: [false, true])
    func aTailMissingARecordStopsTheMoveAsDamage(garbled: Bool) async throws {
        try await withTemporaryDirectory { directory in
            let threshold = Int(EventIDIndex.moveThreshold)
            let ledger = try Ledger.open(at: directory + "/ledger", catalog: wordGameCatalog, configuration: .testing)
            _ = try await ledger.appendAll((1..<threshold).map { Self.event($0) })
            let storage = try #require(ledger.storage as? LMDBLedgerStorage)
            try storage.write { writer in
                let lmdb = writer as! LMDBLedgerStorage.Writer
                let write = lmdb.txn as! LMDB.WriteTransaction
                // Gone, or a record whose id cannot be read.
                if garbled { try write.put([2, 10, 1], in: storage.tables.log, forKey: UInt64(10)) } else {
                    #expect(try write.delete(in: storage.tables.log, key: UInt64(10)))
                }
            }

            let error = await #expect(throws: StorageError.self) { try await ledger.append(Self.event(threshold)) }
            #expect(error?.code == .damaged)
            #expect(error?.position == 10)
            await ledger.close()
            #expect(try Self.tables(directory + "/ledger") == (0, threshold - 1, 0))
        }
    }

    /// A record of the tail whose checksum fails (its id intact or not) gives no entry: every
    /// lookup that reads it, and every history that reaches it, fails as damage (an id left out
    /// would be taken again, a history would lose the event), and `verify` names the record.
    @Test(arguments: [false, true])
    func aDamagedRecordOfTheTailFailsItsLookupsAndHistoriesAsDamage(inItsAccount: Bool) async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/ledger"
            let ledger = try Ledger.open(at: path, catalog: wordGameCatalog, configuration: .testing)
            _ = try await ledger.appendAll((1...40).map { Self.event($0) })
            await ledger.close()
            let storage = try LMDBLedgerStorage(directory: path, configuration: .init())
            try storage.environment.write { txn in
                var record = try #require(try txn.withValue(in: storage.tables.log, forKey: UInt64(27)) { Array($0) })
                if inItsAccount {
                    // Its account's handle (after the version, position, type, the id's length
                    // and the id): 6, read unchecked, would be 4, another account's.
                    record[4 + Self.id(27).utf8.count] ^= 0x02
                } else {
                    // A byte of its time: its id still reads, its checksum fails.
                    record[record.count - 12] ^= 0x04
                }
                try txn.put(record, in: storage.tables.log, forKey: UInt64(27))
            }
            storage.close()

            let reopened = try Ledger.open(at: path, configuration: .testing)
            let again = await #expect(throws: StorageError.self) { try await reopened.append(Self.event(0, id: Self.id(27))) }
            #expect(again?.code == .damaged && again?.position == 27)
            #expect(reopened.position == 40)
            let history = #expect(throws: StorageError.self) { try reopened.history(account: "a6") }
            #expect(history?.code == .damaged && history?.position == 27)
            #expect(try reopened.history(account: "a6", after: 27).map(\.position) == [34])
            await reopened.close()
            let log = try LedgerLog.open(at: path)
            let report = log.verify()
            #expect(report.damage?.kind == .checksum && report.damage?.position == 27)
            log.close()
        }
    }

    /// A tail in the log without its mark is damage, not a tail from the log's start.
    @Test func aTailWithoutItsMarkIsDamage() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/ledger"
            let ledger = try Ledger.open(at: path, catalog: wordGameCatalog, configuration: .testing)
            _ = try await ledger.appendAll((1...10).map { Self.event($0) })
            await ledger.close()
            let storage = try LMDBLedgerStorage(directory: path, configuration: .init())
            #expect(try storage.environment.write { txn in try txn.delete(in: storage.tables.meta, key: EventIDIndex.indexedThroughKey) })
            storage.close()
            let reopened = try Ledger.open(at: path, configuration: .testing)
            let error = #expect(throws: StorageError.self) { try reopened.position(ofEventID: Self.id(3)) }
            #expect(error?.code == .damaged)
            await reopened.close()
        }
    }

    /// A ledger written before `recentEvents` has every id in `events` and no mark: it is
    /// read so, and opening it to write puts the mark at its last record.
    @Test func aLedgerWhoseEventsTableHoldsEveryIDKeepsFindingThem() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/ledger"
            let ledger = try Ledger.open(at: path, catalog: wordGameCatalog, configuration: .testing)
            _ = try await ledger.appendAll((1...50).map { Self.event($0) })
            await ledger.close()
            let storage = try LMDBLedgerStorage(directory: path, configuration: .init())
            try OlderIndexLayouts.putEveryIDInEvents(storage)
            storage.close()
            #expect(try Self.tables(path) == (50, 0, nil))
            var readOnly = Ledger.Configuration.testing
            readOnly.readOnly = true
            let reader = try Ledger.open(at: path, configuration: readOnly)
            #expect(try reader.position(ofEventID: Self.id(20)) == 20)
            #expect(try reader.history(account: "a3").map(\.position) == [3, 10, 17, 24, 31, 38, 45])
            await reader.close()

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

    /// A ledger written before `IndexTail` kept the tail of both indexes in tables of their own:
    /// read as it is read-only, also by a process that had it open when another moved it; the
    /// first open to write moves it (the tables emptied, the mark at the last record), and every
    /// id and history is found as before.
    @Test func aTailInTablesOfItsOwnIsReadAndThenMovedWhenOpenedToWrite() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/ledger"
            let threshold = Int(EventIDIndex.moveThreshold)
            let ledger = try Ledger.open(at: path, catalog: wordGameCatalog, configuration: .testing)
            _ = try await ledger.appendAll((1...threshold + 30).map { Self.event($0) })
            let histories = try (0..<7).map { try ledger.history(account: "a\($0)").map(\.position) }
            await ledger.close()
            let storage = try LMDBLedgerStorage(directory: path, configuration: .init())
            try OlderIndexLayouts.putTailInTables(storage)
            storage.close()

            var readOnly = Ledger.Configuration.testing
            readOnly.readOnly = true
            let reader = try Ledger.open(at: path, configuration: readOnly)
            func readsAsBefore(_ ledger: Ledger) throws {
                for index in [1, threshold, threshold + 1, threshold + 30] {
                    #expect(try ledger.position(ofEventID: Self.id(index)) == UInt64(index), "\(index)")
                }
                #expect(try (0..<7).map { try ledger.history(account: "a\($0)").map(\.position) } == histories)
                #expect(try ledger.storage.read { try $0.hasHistoryEntry(account: "a0", position: UInt64(threshold + 26)) })
                #expect(try !ledger.storage.read { try $0.hasHistoryEntry(account: "a2", position: UInt64(threshold + 26)) })
            }
            try readsAsBefore(reader)
            #expect(try reader.storage.read { try $0.counts().eventIDs } == threshold + 30)

            // Another process opens it to write (and moves it) while this one has it open.
            let moving = try await awaitCommand(builtExecutable("ledger"), ["snapshot", path])
            #expect(moving.status == 0, "\(moving)")
            try readsAsBefore(reader)
            await reader.close()

            let writer = try Ledger.open(at: path, configuration: .testing)
            let moved = try (writer.storage as? LMDBLedgerStorage).map { storage in
                try storage.environment.read { txn in
                    (try txn.count(storage.tables.recentEvents!), try EventIDIndex.indexedThrough(storage.tables.meta, in: txn))
                }
            }
            #expect(moved?.0 == 0 && moved?.1 == UInt64(threshold + 30))
            try readsAsBefore(writer)
            let again = try await writer.append(contentsOf: [Self.event(threshold + 31), Self.event(0, id: Self.id(threshold + 20))])
            #expect(again.map(\.summary) == ["appended \(threshold + 31)", "duplicate \(threshold + 20)"])
            await writer.close()
            #expect(try Self.tables(path) == (threshold + 30, 1, UInt64(threshold + 30)))
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
