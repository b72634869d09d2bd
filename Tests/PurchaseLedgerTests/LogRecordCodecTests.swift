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
        for (offset, event) in generator.events(2000).enumerated() {
            let position = UInt64(offset + 1) * 977
            let record = LogRecordCodec.record(event, position: position)
            let decoded = record.withUnsafeBytes { try? LogRecordCodec.decode($0, expectedPosition: position) }
            #expect(decoded == event)
            #expect((try? Event(jsonLine: event.jsonLine)) == event)
        }
    }

    @Test func compactComparedWithJSON() {
        var generator = EventStreamGenerator(seed: 12)
        let events = generator.events(1000)
        let binary = events.reduce(0) { $0 + LogRecordCodec.record($1, position: 1_000_000).count }
        let json = events.reduce(0) { $0 + $1.jsonLine.utf8.count }
        #expect(binary * 2 < json, "binary \(binary) bytes, JSON \(json) bytes")
    }

    @Test func everySingleFlippedBitIsDetected() {
        let event = Event.transactionUpdated(id: "e1", account: "u1", at: newYear, TransactionUpdated(
            payment: "p1", state: .purchased, transaction: "1000000001", product: "com.example.tenhints"))
        let record = LogRecordCodec.record(event, position: 42)
        for index in record.indices {
            for bit in 0..<8 {
                var damaged = record
                damaged[index] ^= 1 << bit
                let result = damaged.withUnsafeBytes { bytes in
                    Result { () throws(LogRecordCodec.Damage) in try LogRecordCodec.decode(bytes, expectedPosition: 42) }
                }
                #expect(throws: LogRecordCodec.Damage.checksum) { try result.get() }
            }
        }
    }

    @Test func wrongPositionAndVersionAreDetected() {
        let event = Event.consumed(id: "e1", account: "u1", at: newYear, item: "hints", amount: 3)
        let record = LogRecordCodec.record(event, position: 7)
        #expect(throws: LogRecordCodec.Damage.positionMismatch(7)) {
            try record.withUnsafeBytes { bytes throws(LogRecordCodec.Damage) in try LogRecordCodec.decode(bytes, expectedPosition: 8) }
        }
        var future = record
        future[0] = 2
        let body = Array(future.dropLast(4))
        future = body + withUnsafeBytes(of: CRC32C.checksum(body).littleEndian, Array.init)
        #expect(throws: LogRecordCodec.Damage.unknownVersion(2)) {
            try future.withUnsafeBytes { bytes throws(LogRecordCodec.Damage) in try LogRecordCodec.decode(bytes, expectedPosition: 7) }
        }
        #expect(throws: LogRecordCodec.Damage.self) {
            try [UInt8](repeating: 0, count: 3).withUnsafeBytes { bytes throws(LogRecordCodec.Damage) in try LogRecordCodec.decode(bytes, expectedPosition: 7) }
        }
    }
}
