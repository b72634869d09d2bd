import Foundation
import Testing
@testable import PurchaseLedger
@testable import PurchaseLedgerLMDB
import PurchaseLedgerLocation

/// Values that no writer of a ledger stores, read back from storage (a hand-edited or damaged
/// database, another process's bug; a record's checksum is no secret): each is damage where it
/// is read, never a trap, and the values at the edges of what is stored still read.
struct DamagedStorageTests {
    /// A record of each event, with `field` set past what `Event.validate` allows.
    static func outOfRange() -> [(field: String, event: Event)] {
        let download = { (progress: Double?, remaining: Double?) in
            Event.downloadUpdated(id: "e1", account: "u1", at: newYear, DownloadUpdated(
                payment: "p1", download: "d1", state: .active, progress: progress, timeRemaining: remaining))
        }
        let consumed = { (amount: Int64) in Event.consumed(id: "e1", account: "u1", at: newYear, item: "hints", amount: amount) }
        let finishedAt = { (time: Timestamp) in
            Event.transactionFinished(id: "e1", account: "u1", at: time, payment: "p1")
        }
        return [
            ("amount 0", consumed(0)),
            ("at before year 0", finishedAt(Timestamp(seconds: Timestamp.earliest.seconds - 1))),
            ("at the smallest time", finishedAt(Timestamp(seconds: .min))),
            ("at past year 9999", finishedAt(Timestamp(seconds: Timestamp.latest.seconds + 1))),
            ("expiresAt the largest time", Event.transactionUpdated(id: "e1", account: "u1", at: newYear, TransactionUpdated(
                payment: "p1", state: .purchased, transaction: "t1", expiresAt: Timestamp(seconds: .max)))),
            ("progress NaN", download(.nan, nil)),
            ("progress 1.5", download(1.5, nil)),
            ("timeRemaining NaN", download(nil, .nan)),
            ("timeRemaining -infinity", download(nil, -.infinity)),
            ("timeRemaining -2", download(nil, -2)),
        ]
    }

    @Test(arguments: outOfRange())
    func aRecordOfAValueNoEventHasIsDamage(_ field: String, _ event: Event) {
        var handles = FirstMentionHandles()
        let record = handles.record(event, position: 9)
        #expect(throws: LogRecordCodec.Damage.self, "\(field)") { try handles.decode(record, position: 9) }
    }

    @Test func theValuesAtTheEdgesOfWhatIsStoredRead() throws {
        let edges = [
            Event.consumed(id: "e1", account: "u1", at: .earliest, item: "hints", amount: 1),
            Event.consumed(id: "e2", account: "u1", at: .latest, item: "hints", amount: .max),
            Event.downloadUpdated(id: "e3", account: "u1", at: newYear, DownloadUpdated(
                payment: "p1", download: "d1", state: .active, progress: 0, timeRemaining: -1)),
            Event.downloadUpdated(id: "e4", account: "u1", at: newYear, DownloadUpdated(
                payment: "p1", download: "d1", state: .active, progress: 1, timeRemaining: 0)),
        ]
        var handles = FirstMentionHandles()
        for (offset, event) in edges.enumerated() {
            let position = UInt64(offset + 1)
            let record = handles.record(event, position: position)
            #expect(try handles.decode(record, position: position) == event)
        }
    }

    /// The rules keep a consumption within the balance; replayed records are not judged again,
    /// so two of the largest amount would take the balance past the smallest number.
    @Test func aBalancePastTheBoundsIsAnInconsistencyNotATrap() throws {
        var state = LedgerState()
        let consumed = { (id: String) in Event.consumed(id: id, account: "u1", at: newYear, item: "hints", amount: .max) }
        try state.apply(consumed("e1"), at: 1, catalog: wordGameCatalog)
        #expect(state.projection(of: "u1")?.balances["hints"] == -.max)
        #expect(throws: ProjectionInconsistency.self) { try state.apply(consumed("e2"), at: 2, catalog: wordGameCatalog) }
    }

    /// Records the rules would refuse, appended past them: a purchase of ten hints, two
    /// consumptions that take the balance to the smallest number plus nine, then the purchase's
    /// refund, whose taking back of ten crosses it. The feed's derivation stops there as damage;
    /// it once tried the event again on the state the first try had half changed (the refund
    /// recorded, its credit not taken back), and went on as if it had applied.
    @Test(arguments: Backend.available)
    func theFeedStopsAtARecordThatWouldMoveABalancePastItsBounds(_ backend: Backend) async throws {
        try await withLocation(on: backend) { location in
            let ledger = try Ledger.open(location: location, catalog: wordGameCatalog, configuration: .testing)
            _ = try await ledger.append(contentsOf: [
                .paymentAdded(id: "e1", account: "ana", at: newYear, payment: "A1", product: "com.example.tenhints"),
                .transactionUpdated(id: "e2", account: "ana", at: newYear, TransactionUpdated(payment: "A1", state: .purchased, transaction: "t1")),
            ])
            await ledger.close()
            let storage = try backend.openStorage(location)
            try storage.write { (writer: any LedgerStorageWriter) throws in
                let handle = try #require(try writer.accountHandle(of: "ana"))
                let damaged: [Event] = [
                    .consumed(id: "e3", account: "ana", at: newYear, item: "hints", amount: .max),
                    .consumed(id: "e4", account: "ana", at: newYear, item: "hints", amount: 2),
                    .revoked(id: "e5", account: "ana", at: newYear, transaction: "t1"),
                ]
                for (offset, event) in damaged.enumerated() {
                    let position = UInt64(offset + 3)
                    let record = LogRecordCodec.record(event, position: position) { _ in handle }
                    try writer.append(record: record.bytes, at: position, eventID: event.id, account: event.account)
                }
                try writer.recordClock(ClockReading(position: 5, time: .now()))
            }
            storage.close()
            let log = try LedgerLog.open(location: location)
            defer { log.close() }
            var derived: [UInt64] = []
            let error = await #expect(throws: StorageError.self) {
                for try await change in log.changes() { derived.append(change.position) }
            }
            #expect(error?.code == .damaged)
            #expect(!derived.contains(5))
        }
    }

    /// A header whose counts do not fit an `Int`, with a good checksum.
    @Test func aSnapshotHeaderWithACountPastIntIsDamage() throws {
        func header(accountsWritten: UInt64) -> [UInt8] {
            var writer = ByteWriter(capacity: 64)
            writer.byte(SnapshotFormat.headerVersion)
            writer.varint(7)
            writer.uint64(SnapshotFormat.fingerprint)
            writer.varint(0)
            writer.varint(accountsWritten)
            for count: UInt64 in [1, 2, 0] { writer.varint(count) }
            writer.timestamp(newYear)
            writer.uint32(CRC32C.checksum(writer.bytes))
            return writer.bytes
        }
        #expect(try SnapshotHeader.decode(header(accountsWritten: 1), key: 7).accountsWritten == 1)
        for count in [UInt64(Int.max) + 1, .max] {
            let problem = #expect(throws: SnapshotHeader.Problem.self) { try SnapshotHeader.decode(header(accountsWritten: count), key: 7) }
            guard case .damaged = problem else {
                Issue.record("a header counting \(count) accounts is damage, not \(String(describing: problem))")
                continue
            }
        }
    }

    /// Positions start at 1; `ledger copy` reads the position before each catalog's first.
    @Test(arguments: Backend.available)
    func aCatalogRecordedForPositionZeroIsDamage(_ backend: Backend) async throws {
        try await withLocation(on: backend) { location in
            try await Ledger.open(location: location, catalog: wordGameCatalog, configuration: .testing).close()
            let storage = try backend.openStorage(location)
            try storage.write { (writer: any LedgerStorageWriter) throws in
                try writer.recordCatalog(Array(wordGameCatalog.json.utf8), effectiveFrom: 0)
            }
            storage.close()
            let error = #expect(throws: StorageError.self) {
                let log = try LedgerLog.open(location: location)
                defer { log.close() }
                _ = try log.catalogHistory()
            }
            #expect(error?.code == .damaged)
        }
    }

    /// A reading outside years 0000–9999 would be formatted and computed with by the feed.
    @Test(arguments: Backend.available)
    func aClockReadingOutsideTheYearsOfATimestampIsDamage(_ backend: Backend) async throws {
        try await withLocation(on: backend) { location in
            let storage = try backend.openStorage(location)
            defer { storage.close() }
            try storage.write { (writer: any LedgerStorageWriter) throws in
                try writer.recordClock(ClockReading(position: 0, time: .latest))
            }
            #expect(try storage.read { try $0.lastClockReading() }?.time == .latest)
            try storage.write { (writer: any LedgerStorageWriter) throws in
                try writer.recordClock(ClockReading(position: 1, time: Timestamp(seconds: .min)))
            }
            for read in [{ (reader: any LedgerStorageReader) throws in _ = try reader.lastClockReading() },
                         { (reader: any LedgerStorageReader) throws in _ = try reader.clockReadings(after: nil, limit: 10) }] {
                let error = #expect(throws: StorageError.self) { try storage.read(read) }
                #expect(error?.code == .damaged)
            }
        }
    }

    /// An account table whose largest handle is the largest number: the next lookup that
    /// misses reads the one row, instead of computing the handle after it.
    @Test func anAccountHandleOfTheLargestNumberIsNoTrap() async throws {
        try await withLocation(on: .lmdb) { location in
            let storage = try Backend.lmdb.openStorage(location)
            defer { storage.close() }
            let names = AccountNames()
            names.adopt([(handle: .max, account: "damaged")])
            #expect(try storage.read { try names.name(of: 5, reader: $0) } == nil)
        }
    }
}
