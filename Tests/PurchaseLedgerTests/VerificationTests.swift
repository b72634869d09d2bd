import Testing
@testable import PurchaseLedger
import LMDB
@testable import PurchaseLedgerLMDB
import LedgerTestSupport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `verify` finds damage and names its position; an intact ledger verifies.
struct VerificationTests {
    /// Appends `count` generated events in one commit, so that each record is written to the
    /// data file exactly once (no stale copy in a freed page), then closes the ledger.
    private func makeLedger(_ path: String, count: Int) async throws -> [LogRecord] {
        let ledger = try Ledger.open(at: path, catalog: wordGameCatalog, configuration: .testing)
        var generator = EventStreamGenerator(seed: 5)
        _ = try await ledger.append(contentsOf: generator.events(count))
        var records: [LogRecord] = []
        for try await record in ledger.records() { records.append(record) }
        await ledger.close()
        return records
    }

    private func verify(_ path: String) throws -> VerificationReport {
        let log = try LedgerLog.open(at: path)
        defer { log.close() }
        return log.verify()
    }

    @Test func anIntactLedgerVerifies() async throws {
        try await withTemporaryDirectory { directory in
            let records = try await makeLedger(directory + "/ledger", count: 400)
            let report = try verify(directory + "/ledger")
            #expect(report.isIntact)
            #expect(report.intactRecords == UInt64(records.count))
        }
    }

    /// `at`: where in the log the damaged record lies, as a fraction of its length.
    @Test(arguments: [0.0, 0.3, 0.5, 1.0])
    func aFlippedByteInARecordIsFoundAtItsPosition(at fraction: Double) async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/ledger"
            let records = try await makeLedger(path, count: 300)
            var file = try fileBytes(path + "/data.mdb")
            // The record nearest the fraction that the file holds once (a page LMDB freed may
            // still hold an older copy of a record).
            let start = Int(fraction * Double(records.count - 1))
            var handles = FirstMentionHandles()
            let encoded = records.map { record in (record, handles.record(record.event, position: record.position)) }
            let candidates = encoded[..<(start + 1)].reversed() + encoded[(start + 1)...]
            let found = candidates.first { occurrences(of: $0.1, in: file).count == 1 }
            let (target, bytes) = try #require(found, "some record must be in the file exactly once")
            let offsets = occurrences(of: bytes, in: file)
            file[offsets[0] + bytes.count / 2] ^= 0x20
            try writeFile(path + "/data.mdb", file)

            let report = try verify(path)
            #expect(report.damage?.kind == .checksum)
            #expect(report.damage?.position == target.position)
            #expect(report.intactRecords == target.position - 1)
            // Replaying through the damaged record fails: no wrong answers served. (Opening from
            // the snapshot written at close reads only the log after it, which is intact.)
            var fullReplay = Ledger.Configuration.testing
            fullReplay.useSnapshots = false
            #expect(throws: StorageError.self) { try Ledger.open(at: path, configuration: fullReplay) }
        }
    }

    @Test func anIndexThatDisagreesWithTheLogIsFound() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/ledger"
            let records = try await makeLedger(path, count: 200)
            // Point one event id at another position, through the storage itself.
            let storage = try LMDBLedgerStorage(directory: path, configuration: .init())
            let victim = records[10]
            try storage.write { writer in
                let lmdb = writer as! LMDBLedgerStorage.Writer
                try (lmdb.txn as! LMDB.WriteTransaction).put(UInt64(3), in: lmdb.tables.events, forKey: victim.event.id)
            }
            storage.close()
            let report = try verify(path)
            #expect(report.damage?.kind == .indexMismatch)
            #expect(report.damage?.position == victim.position)
        }
    }

    /// The clock's readings are checked: a reading past the log's end, and a tail in `meta` that
    /// is not readings, are found (the feed and `knownAt` would read them).
    @Test func aClockReadingPastTheEndOrADamagedTailIsFound() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/ledger"
            let records = try await makeLedger(path, count: 50)
            #expect(try verify(path).isIntact)
            let storage = try LMDBLedgerStorage(directory: path, configuration: .init())
            let newest = try #require(try storage.read { try $0.lastClockReading() })
            try storage.write { (writer: any LedgerStorageWriter) throws in
                try writer.recordClock(ClockReading(position: UInt64(records.count) + 1, time: newest.time))
            }
            storage.close()
            let past = try verify(path)
            #expect(past.damage?.kind == .clock)
            #expect(past.damage?.message.contains("past the log's end") == true)

            let damaged = try LMDBLedgerStorage(directory: path, configuration: .init())
            try damaged.environment.write { txn in try txn.put("not readings", in: damaged.tables.main, forKey: ClockTail.key) }
            damaged.close()
            #expect(try verify(path).damage?.kind == .clock)
        }
    }

    /// The customers' index (`appTransactionId` → the account of the first report naming it) is
    /// checked against the log: a customer given to another account, and one the log never
    /// named, are both found.
    @Test func aCustomerGivenToAnotherAccountIsFound() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/ledger"
            let records = try await makeLedger(path, count: 400)
            let named = records.filter { $0.event.appTransaction != nil }
            let first = try #require(named.first)
            let customer = try #require(first.event.appTransaction)
            #expect(try verify(path).damage == nil)
            let storage = try LMDBLedgerStorage(directory: path, configuration: .init())
            try storage.write { writer in
                let lmdb = writer as! LMDBLedgerStorage.Writer
                let table = try #require(lmdb.tables.appTransactions)
                try (lmdb.txn as! LMDB.WriteTransaction).put(first.event.account + "-not", in: table, forKey: customer)
            }
            storage.close()
            let moved = try verify(path)
            #expect(moved.damage?.kind == .indexMismatch)
            #expect(moved.damage?.position == first.position)

            let restored = try LMDBLedgerStorage(directory: path, configuration: .init())
            try restored.write { writer in
                let lmdb = writer as! LMDBLedgerStorage.Writer
                let table = try #require(lmdb.tables.appTransactions)
                try (lmdb.txn as! LMDB.WriteTransaction).put(first.event.account, in: table, forKey: customer)
                try (lmdb.txn as! LMDB.WriteTransaction).put("someone", in: table, forKey: "a customer the log never named")
            }
            restored.close()
            let extra = try verify(path)
            #expect(extra.damage?.kind == .indexMismatch)
            #expect(extra.damage?.position == nil)
        }
    }

    @Test func aMissingRecordIsAGap() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/ledger"
            _ = try await makeLedger(path, count: 200)
            let storage = try LMDBLedgerStorage(directory: path, configuration: .init())
            try storage.write { writer in
                let lmdb = writer as! LMDBLedgerStorage.Writer
                try (lmdb.txn as! LMDB.WriteTransaction).delete(in: lmdb.tables.log, key: UInt64(20))
            }
            storage.close()
            let report = try verify(path)
            #expect(report.damage?.kind == .sequenceGap)
            #expect(report.damage?.position == 20)
        }
    }
}
