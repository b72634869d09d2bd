import Testing
@testable import PurchaseLedger

struct LogRecordCodecTests {
    @Test func crc32cCheckValue() {
        #expect(CRC32C.checksum(Array("123456789".utf8)) == 0xE306_9283)
        #expect(CRC32C.checksum([UInt8](repeating: 0, count: 32)) == 0x8A91_36AA)
        #expect(CRC32C.checksum([]) == 0)
    }

    @Test func everyEventRoundTrips() {
        var generator = EventStreamGenerator(seed: 11)
        var handles = FirstMentionHandles()
        for (offset, event) in generator.events(2000).enumerated() {
            let position = UInt64(offset + 1) * 977
            let record = handles.record(event, position: position)
            #expect((try? handles.decode(record, position: position)) == event)
            #expect((try? Event(jsonLine: event.jsonLine)) == event)
            // Format 1, as ledgers from before account handles hold it, still decodes.
            let formatOne = LogRecordCodec.formatOneRecord(event, position: position)
            #expect(formatOne.withUnsafeBytes { try? LogRecordCodec.decode($0, expectedPosition: position) { _ in nil } } == event)
        }
    }

    @Test func aRecordNamesItsAccountsByHandleOnly() throws {
        var handles = FirstMentionHandles()
        let account = "customer-7c1f4a"
        let purchase = Event.transactionUpdated(id: "e1", account: account, at: newYear, TransactionUpdated(
            payment: "p1", state: .purchased, transaction: "1000000001", product: "com.example.tenhints"))
        let transfer = Event.transfer(originalTransaction: "1000000001", from: account, to: "customer-9d2e", at: newYear)
        for event in [purchase] + transfer {
            let record = handles.record(event, position: 3)
            #expect(record[0] == 2)
            #expect(occurrences(of: Array(account.utf8), in: record).isEmpty)
            #expect(try handles.decode(record, position: 3) == event)
            #expect(!occurrences(of: Array(account.utf8), in: LogRecordCodec.formatOneRecord(event, position: 3)).isEmpty)
        }
        #expect(handles.handle(of: account) == 1)
        #expect(handles.handle(of: "customer-9d2e") == 2)
        // A handle the account table lacks is damage, named as such.
        let record = handles.record(purchase, position: 3)
        #expect(throws: LogRecordCodec.Damage.unknownAccountHandle(1)) {
            try record.withUnsafeBytes { bytes throws(LogRecordCodec.Damage) in
                try LogRecordCodec.decode(bytes, expectedPosition: 3) { _ in nil }
            }
        }
    }

    /// The account's handle, read ahead of the decode (to fetch a chunk's accounts together),
    /// is the one the record names; a record of format 1 has none.
    @Test func theAccountHandleIsReadWithoutDecoding() {
        var generator = EventStreamGenerator(seed: 13)
        var handles = FirstMentionHandles()
        for (offset, event) in generator.events(500).enumerated() {
            let record = handles.record(event, position: UInt64(offset + 1))
            #expect(record.withUnsafeBytes(LogRecordCodec.accountHandle(in:)) == handles.handle(of: event.account))
            let formatOne = LogRecordCodec.formatOneRecord(event, position: UInt64(offset + 1))
            #expect(formatOne.withUnsafeBytes(LogRecordCodec.accountHandle(in:)) == nil)
        }
        #expect([UInt8]([2, 1]).withUnsafeBytes(LogRecordCodec.accountHandle(in:)) == nil)
    }

    @Test func compactComparedWithJSON() {
        var generator = EventStreamGenerator(seed: 12)
        var handles = FirstMentionHandles()
        let events = generator.events(1000)
        let binary = events.reduce(0) { $0 + handles.record($1, position: 1_000_000).count }
        let json = events.reduce(0) { $0 + $1.jsonLine.utf8.count }
        #expect(binary * 2 < json, "binary \(binary) bytes, JSON \(json) bytes")
    }

    @Test func everySingleFlippedBitIsDetected() {
        let event = Event.transactionUpdated(id: "e1", account: "u1", at: newYear, TransactionUpdated(
            payment: "p1", state: .purchased, transaction: "1000000001", product: "com.example.tenhints"))
        var handles = FirstMentionHandles()
        let record = handles.record(event, position: 42)
        for index in record.indices {
            for bit in 0..<8 {
                var damaged = record
                damaged[index] ^= 1 << bit
                #expect(throws: LogRecordCodec.Damage.checksum) { try handles.decode(damaged, position: 42) }
            }
        }
    }

    @Test func wrongPositionAndVersionAreDetected() {
        let event = Event.consumed(id: "e1", account: "u1", at: newYear, item: "hints", amount: 3)
        var handles = FirstMentionHandles()
        let record = handles.record(event, position: 7)
        #expect(throws: LogRecordCodec.Damage.positionMismatch(7)) { try handles.decode(record, position: 8) }
        var future = record
        future[0] = 3
        let body = Array(future.dropLast(4))
        future = body + withUnsafeBytes(of: CRC32C.checksum(body).littleEndian, Array.init)
        #expect(throws: LogRecordCodec.Damage.unknownVersion(3)) { try handles.decode(future, position: 7) }
        #expect(throws: LogRecordCodec.Damage.self) { try handles.decode([UInt8](repeating: 0, count: 3), position: 7) }
    }
}
