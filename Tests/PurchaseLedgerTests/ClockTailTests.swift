import Foundation
import LMDB
import LedgerTestSupport
import Testing
@testable import PurchaseLedger
@testable import PurchaseLedgerLMDB

/// The LMDB backend's newest clock readings (`ClockTail`): in LMDB's main table, not in
/// `clock`, until they are `ClockTail.capacity`; read as one sequence with those of `clock`, whatever the
/// split and the page size asked for.
struct ClockTailTests {
    private static func reading(_ index: Int) -> ClockReading {
        ClockReading(position: UInt64(index / 3), time: Timestamp(seconds: newYear.seconds + Int64(index), nanoseconds: UInt32(index)))
    }

    /// How many readings `clock` holds, and how many the tail.
    private static func split(_ storage: LMDBLedgerStorage) throws -> (clock: Int, tail: Int) {
        try storage.environment.read { txn in
            (try txn.count(storage.tables.clock!), try ClockTail.readings(storage.tables.main, after: nil, in: txn).count)
        }
    }

    private static func allReadings(_ storage: LMDBLedgerStorage, pageSize: Int) throws -> [ClockReading] {
        var readings: [ClockReading] = []
        while case let page = try storage.read({ try $0.clockReadings(after: readings.last, limit: pageSize) }), !page.isEmpty {
            #expect(page.count <= pageSize)
            readings += page
        }
        return readings
    }

    /// A ledger of `appends` events appended one a commit (a reading each) in a new directory,
    /// closed; `body` gets its path.
    private static func withLedger(appends: Int, _ body: (String) async throws -> Void) async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/ledger"
            let ledger = try Ledger.open(at: path, catalog: wordGameCatalog, configuration: .testing)
            for index in 0..<appends {
                _ = try await ledger.append(.paymentAdded(
                    id: "e\(index)", account: "a", at: newYear, payment: "p\(index)", product: "com.example.tenhints"))
            }
            await ledger.close()
            try await body(path)
        }
    }

    /// The ledger at `path`'s storage opened to write without this version's open (which would
    /// move what older versions left): for `body` to write as one would, then closed.
    private static func asAnOlderVersion(_ path: String, _ body: (LMDBLedgerStorage) throws -> Void) throws {
        let storage = try LMDBLedgerStorage(directory: path, configuration: .init())
        defer { storage.close() }
        try body(storage)
    }

    /// Opens the ledger at `path` to write and closes it (what the open moves, it moves), then
    /// hands `body` its storage, read-only.
    private static func afterAnOpenToWrite(_ path: String, _ body: (LMDBLedgerStorage) throws -> Void) async throws {
        try await Ledger.open(at: path, configuration: .testing).close()
        try readingOnly(path, body)
    }

    /// Whether `meta` holds the tail the version before kept there.
    private static func hasTailInMeta(_ storage: LMDBLedgerStorage) throws -> Bool {
        try storage.environment.read { txn in try txn.contains(storage.tables.meta, key: ClockTail.key) }
    }

    /// The ledger at `path`'s storage opened read-only for `body`, then closed.
    private static func readingOnly<R>(_ path: String, _ body: (LMDBLedgerStorage) throws -> R) throws -> R {
        var configuration = Environment.Configuration()
        configuration.readOnly = true
        let storage = try LMDBLedgerStorage(directory: path, configuration: configuration)
        defer { storage.close() }
        return try body(storage)
    }

    /// Two readings at `newest`'s position, a second and two after it.
    private static func later(than newest: ClockReading) -> [ClockReading] {
        (1...2).map { ClockReading(position: newest.position, time: Timestamp(seconds: newest.time.seconds + Int64($0), nanoseconds: 0)) }
    }

    private static func withStorage(_ body: (LMDBLedgerStorage) throws -> Void) async throws {
        try await withTemporaryDirectory { directory in
            let storage = try LMDBLedgerStorage(directory: directory, configuration: Environment.Configuration())
            defer { storage.close() }
            try body(storage)
        }
    }

    @Test func theNewestReadingsAreInTheMainTableAndReadAfterTheClocksInOrder() async throws {
        try await Self.withStorage { storage in
            let capacity = ClockTail.capacity
            var recorded: [ClockReading] = []
            // One a commit, as the writer records them, up to one short of the move.
            for index in 0..<capacity - 1 {
                recorded.append(Self.reading(index))
                try storage.write { (writer: any LedgerStorageWriter) throws in try writer.recordClock(recorded.last!) }
            }
            #expect(try Self.split(storage) == (0, capacity - 1))
            #expect(try storage.read { try $0.lastClockReading() } == recorded.last)
            // The commit that fills the tail moves it; then many in one commit, across a move.
            recorded.append(Self.reading(capacity - 1))
            try storage.write { (writer: any LedgerStorageWriter) throws in try writer.recordClock(recorded.last!) }
            #expect(try Self.split(storage) == (capacity, 0))
            #expect(try storage.read { try $0.lastClockReading() } == recorded.last)
            let many = (capacity..<3 * capacity + 5).map(Self.reading)
            try storage.write { (writer: any LedgerStorageWriter) throws in
                for reading in many { try writer.recordClock(reading) }
            }
            recorded += many
            #expect(try Self.split(storage) == (3 * capacity, 5))
            #expect(try storage.read { try $0.lastClockReading() } == recorded.last)
            for pageSize in [1, 7, capacity, 4096] {
                #expect(try Self.allReadings(storage, pageSize: pageSize) == recorded)
            }
            // After a reading in the tail, only the tail's later ones.
            let after = recorded[recorded.count - 3]
            #expect(try storage.read { try $0.clockReadings(after: after, limit: 10) } == Array(recorded.suffix(2)))
        }
    }

    /// The writer's clock never goes back, but `ledger copy` and older ledgers' first readings
    /// record what they are given: a reading already held is held once, and one before the
    /// newest is read in its place.
    @Test func aReadingHeldAlreadyOrEarlierThanTheNewestKeepsTheOrder() async throws {
        try await Self.withStorage { storage in
            let readings = (0..<10).map(Self.reading)
            for index in [0, 1, 2, 5, 5, 6, 3, 9, 9, 4, 0, 8, 7] {
                try storage.write { (writer: any LedgerStorageWriter) throws in try writer.recordClock(readings[index]) }
            }
            #expect(try Self.allReadings(storage, pageSize: 4) == readings)
            #expect(try storage.read { try $0.lastClockReading() } == readings[9])
        }
    }

    /// Appends through the ledger write their readings to the tail: a commit writes no page for
    /// them (the main table's it writes anyway), not `clock`'s three.
    @Test func anAppendWritesItsReadingToTheTail() async throws {
        try await Self.withLedger(appends: 5) { path in
            try Self.readingOnly(path) { storage in
                #expect(try Self.split(storage).clock == 0)
                let positions = try Self.allReadings(storage, pageSize: 100).map(\.position)
                #expect(positions.last == 5)
                #expect(Set(1...5).isSubset(of: Set(positions.map(Int.init))))
            }
        }
    }

    /// A tail after `clock` stays where it is when the ledger is opened to write (the open
    /// moves only what older versions left out of order), and the main table stays one page
    /// with a full tail beside every table's name: a commit writes no page for the tail.
    @Test func anOpenToWriteLeavesATailInOrderAndTheMainTableOnePage() async throws {
        // A reading a commit: more than a tail holds, then a tail one short of it.
        try await Self.withLedger(appends: 2 * ClockTail.capacity - 1) { path in
            let before = try Self.readingOnly(path) { storage in try Self.split(storage) }
            #expect(before.tail == ClockTail.capacity - 1)
            #expect(before.clock > 0)
            try await Self.afterAnOpenToWrite(path) { (after: LMDBLedgerStorage) throws in
                #expect(try Self.split(after) == before)
                #expect(try after.environment.read { try $0.pageCount(after.tables.main) } == 1)
            }
        }
    }

    /// A ledger written before the tail holds every reading in `clock`, and no tail.
    @Test func aLedgerWithoutATailReadsItsClockAndGetsOne() async throws {
        try await Self.withStorage { storage in
            let readings = (0..<6).map(Self.reading)
            try storage.environment.write { txn in
                for reading in readings.prefix(5) {
                    try txn.put(EmptyValue(), in: storage.tables.clock!, forKey: LMDBLedgerStorage.clockKey(reading))
                }
            }
            #expect(try storage.read { try $0.lastClockReading() } == readings[4])
            try storage.write { (writer: any LedgerStorageWriter) throws in try writer.recordClock(readings[5]) }
            #expect(try Self.split(storage) == (5, 1))
            #expect(try Self.allReadings(storage, pageSize: 2) == readings)
        }
    }

    /// A version before the tail puts its readings in `clock`, after positions the tail holds:
    /// readers find the tail not after `clock` (damage, not readings out of order), and the next
    /// open to write of this version moves the tail into `clock`, where every reading is in its
    /// order.
    @Test func readingsAnOlderVersionPutInTheClockAfterTheTailAreMovedByTheNextOpenToWrite() async throws {
        try await Self.withLedger(appends: 3) { path in
            var (written, older): ([ClockReading], [ClockReading]) = ([], [])
            try Self.asAnOlderVersion(path) { storage in
                written = try Self.allReadings(storage, pageSize: 100)
                #expect(try Self.split(storage).tail > 0)
                older = Self.later(than: try #require(written.last))
                try storage.environment.write { txn in
                    for reading in older {
                        try txn.put(EmptyValue(), in: storage.tables.clock!, forKey: LMDBLedgerStorage.clockKey(reading))
                    }
                }
                let error = #expect(throws: StorageError.self) { try storage.read { try $0.clockReadings(after: nil, limit: 100) } }
                #expect(error?.code == .damaged)
            }
            try await Self.afterAnOpenToWrite(path) { (moved: LMDBLedgerStorage) throws in
                #expect(try Self.split(moved) == (written.count + 2, 0))
                #expect(try Self.allReadings(moved, pageSize: 3) == written + older)
            }
        }
    }

    /// A tail's text, as a writer stores it.
    private static func hex(_ readings: ClockReading...) -> String {
        readings.map { reading in
            LMDBLedgerStorage.clockKey(reading).map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
        }.joined()
    }

    /// The version before this one kept the tail in `meta`: readers read it between `clock` and
    /// the main table's tail. When it wrote after this one (its tail after the main table's),
    /// readers find damage, until this version opens the ledger to write: it moves both into
    /// `clock`, in their order.
    @Test func theTailTheVersionBeforeKeptInMetaIsReadAndMovedByTheNextWriter() async throws {
        try await Self.withLedger(appends: 3) { path in
            var (written, later): ([ClockReading], [ClockReading]) = ([], [])
            try Self.asAnOlderVersion(path) { storage in
                written = try Self.allReadings(storage, pageSize: 100)
                later = Self.later(than: try #require(written.last))
                // The version before wrote its tail after this one's.
                try storage.environment.write { txn in try txn.put(Self.hex(later[0], later[1]), in: storage.tables.meta, forKey: ClockTail.key) }
                let error = #expect(throws: StorageError.self) { try storage.read { try $0.clockReadings(after: nil, limit: 100) } }
                #expect(error?.code == .damaged)
            }
            try await Self.afterAnOpenToWrite(path) { (moved: LMDBLedgerStorage) throws in
                #expect(try Self.split(moved) == (written.count + 2, 0))
                #expect(try Self.hasTailInMeta(moved) == false)
                #expect(try Self.allReadings(moved, pageSize: 2) == written + later)
            }
        }
    }

    /// The version before's tail in `meta`, before this one's in the main table (it wrote
    /// first): the open to write moves it into `clock` and leaves the main table's.
    @Test func anOpenToWriteMovesTheVersionBeforesTailAndKeepsThisOnesAfterIt() async throws {
        try await Self.withLedger(appends: 0) { path in
            let readings = (0..<6).map(Self.reading)
            try Self.asAnOlderVersion(path) { storage in
                try storage.environment.write { txn in
                    try txn.removeAll(in: storage.tables.clock!)
                    _ = try txn.delete(in: storage.tables.main, key: ClockTail.key)
                    try txn.put(EmptyValue(), in: storage.tables.clock!, forKey: LMDBLedgerStorage.clockKey(readings[0]))
                    try txn.put(Self.hex(readings[1], readings[2]), in: storage.tables.meta, forKey: ClockTail.key)
                    try txn.put(Self.hex(readings[3], readings[4], readings[5]), in: storage.tables.main, forKey: ClockTail.key)
                }
                #expect(try Self.allReadings(storage, pageSize: 2) == readings)
            }
            try await Self.afterAnOpenToWrite(path) { (moved: LMDBLedgerStorage) throws in
                #expect(try Self.split(moved) == (3, 3))
                #expect(try Self.hasTailInMeta(moved) == false)
                #expect(try Self.allReadings(moved, pageSize: 4) == readings)
            }
        }
    }

    /// A malformed tail makes the open to write fail as damage, before anything is written.
    @Test func aMalformedTailFailsTheOpenToWrite() async throws {
        try await Self.withLedger(appends: 0) { path in
            try Self.asAnOlderVersion(path) { storage in
                try storage.environment.write { txn in try txn.put("not readings", in: storage.tables.main, forKey: ClockTail.key) }
            }
            let error = #expect(throws: StorageError.self) { try Ledger.open(at: path, configuration: .testing) }
            #expect(error?.code == .damaged)
        }
    }

    /// A tail in `meta` alone (the version before wrote last, over a ledger without a main
    /// table's tail) is read after `clock`, and this version's readings after it.
    @Test func theVersionBeforesTailIsReadBeforeThisOnes() async throws {
        try await Self.withStorage { storage in
            let readings = (0..<6).map(Self.reading)
            try storage.environment.write { txn in
                try txn.put(EmptyValue(), in: storage.tables.clock!, forKey: LMDBLedgerStorage.clockKey(readings[0]))
                try txn.put(Self.hex(readings[1], readings[2], readings[3]), in: storage.tables.meta, forKey: ClockTail.key)
            }
            #expect(try storage.read { try $0.lastClockReading() } == readings[3])
            for reading in readings[4...5] {
                try storage.write { (writer: any LedgerStorageWriter) throws in try writer.recordClock(reading) }
            }
            #expect(try Self.split(storage) == (1, 2))
            for pageSize in [1, 2, 4, 100] {
                #expect(try Self.allReadings(storage, pageSize: pageSize) == readings)
            }
            #expect(try storage.read { try $0.clockReadings(after: readings[2], limit: 2) } == Array(readings[3...4]))
            #expect(try storage.read { try $0.lastClockReading() } == readings[5])
        }
    }

    /// Tails no writer stores, and whether the newest reading alone shows it (a reading's order
    /// shows only when all are read).
    static func damagedTails() -> [(text: String, newestIsDamaged: Bool)] {
        let hex = { (reading: ClockReading) in Self.hex(reading) }
        return [
            ("", true),
            (String(hex(reading(0)).dropLast()), true),
            (String(repeating: "g", count: 40), true),
            (hex(reading(1)).uppercased(), true),
            (String(repeating: "0", count: 40), true),
            (hex(reading(1)) + hex(reading(0)), false),
            (hex(reading(1)) + hex(reading(1)), false),
        ]
    }

    @Test(arguments: damagedTails())
    func aTailThatIsNotWholeReadingsInOrderIsDamage(_ tail: (text: String, newestIsDamaged: Bool)) async throws {
        // In the main table, and in `meta`, where the version before kept it.
        for table in [\LMDBLedgerStorage.Tables.main, \.meta] {
            try await Self.withStorage { storage in
                try storage.environment.write { txn in try txn.put(tail.text, in: storage.tables[keyPath: table], forKey: ClockTail.key) }
                var reads = [{ (reader: any LedgerStorageReader) throws in _ = try reader.clockReadings(after: nil, limit: 10) }]
                if tail.newestIsDamaged {
                    reads.append { (reader: any LedgerStorageReader) throws in _ = try reader.lastClockReading() }
                }
                for read in reads {
                    let error = #expect(throws: StorageError.self) { try storage.read(read) }
                    #expect(error?.code == .damaged)
                }
            }
        }
    }
}
