import LedgerTestSupport
import Testing
@testable import PurchaseLedger

/// The JSON Lines form of events: what is `invalidEvent`, what is accepted, and that the
/// canonical encoding reads back to the same event.
struct EventJSONTests {
    static let base = #""id":"e1","account":"u1","at":"2026-01-01T00:00:00Z""#

    static let invalidLines: [String] = [
        "",
        "   ",
        "not json",
        "[]",
        "42",
        #""a string""#,
        "{",
        #"{"id":"e1"}"#,
        #"{\#(base)}"#,                                                            // no type
        #"{\#(base),"type":"paymentMade","payment":"p1","product":"x"}"#,          // unknown type
        #"{"id":"","type":"transactionFinished","account":"u1","at":"2026-01-01T00:00:00Z","payment":"p1"}"#,
        #"{"id":7,"type":"transactionFinished","account":"u1","at":"2026-01-01T00:00:00Z","payment":"p1"}"#,
        #"{"id":"e1","type":"transactionFinished","account":"u1","at":"yesterday","payment":"p1"}"#,
        #"{"id":"e1","type":"transactionFinished","account":"u1","at":"2026-02-30T00:00:00Z","payment":"p1"}"#,
        #"{"id":"e1","type":"transactionFinished","account":"u1","at":"2026-01-01 00:00:00Z","payment":"p1"}"#,
        #"{"id":"e1","type":"transactionFinished","account":"u1","at":"2026-01-01T00:00:00","payment":"p1"}"#,
        #"{"id":"e1","type":"transactionFinished","account":"u1","at":"2026-01-01T12:00:60Z","payment":"p1"}"#,
        #"{\#(base),"type":"transactionFinished"}"#,                                // no payment
        #"{\#(base),"type":"transactionFinished","payment":null}"#,
        #"{\#(base),"type":"paymentAdded","payment":"p1","product":"x","quantity":null}"#,
        #"{\#(base),"type":"paymentAdded","payment":"p1","product":"x","quantity":"2"}"#,
        #"{\#(base),"type":"paymentAdded","payment":"p1","product":"x","quantity":1.5}"#,
        #"{\#(base),"type":"paymentAdded","payment":"p1","product":"x","quantity":true}"#,
        #"{\#(base),"type":"paymentAdded","payment":"p1","product":"x","quantity":1e30}"#,
        #"{\#(base),"type":"paymentAdded","payment":"p1","product":"x","quantity":-1}"#,
        #"{\#(base),"type":"transactionUpdated","payment":"p1","state":"Purchased","transaction":"t"}"#,
        #"{\#(base),"type":"transactionUpdated","payment":"p1","state":"purchased"}"#,
        #"{\#(base),"type":"transactionUpdated","payment":"p1","state":"purchasing","expiresAt":"soon"}"#,
        #"{\#(base),"type":"downloadUpdated","payment":"p1","download":"d","state":"active","progress":"0.5"}"#,
        #"{\#(base),"type":"downloadUpdated","payment":"p1","download":"d","state":"active","progress":1.00000000000000000001}"#,
        #"{\#(base),"type":"downloadUpdated","payment":"p1","download":"d","state":"active","timeRemaining":-1.00000000000000000001}"#,
        #"{\#(base),"type":"downloadUpdated","payment":"p1","download":"d","state":"done"}"#,
        #"{\#(base),"type":"consumed","item":"hints"}"#,
        #"{\#(base),"type":"consumed","item":"hints","amount":0}"#,
        #"{\#(base),"type":"revoked"}"#,
        #"{\#(base),"type":"transactionFinished","payment":"p1","payment":"p2"}"#,  // duplicate key
        #"{\#(base),"type":"transactionFinished","payment":"p1","x":{"a":1,"a":2}}"#,
        #"{\#(base),"type":"transactionFinished","payment":"\ud800"}"#,           // lone surrogate
        #"{\#(base),"type":"transactionFinished","payment":"p1"} trailing"#,
        #"{\#(base),"type":"transactionFinished","payment":"p1",}"#,
        "\u{FEFF}{\(base),\"type\":\"transactionFinished\",\"payment\":\"p1\"}",    // byte order mark
        #"{\#(base),"type":"transactionFinished","payment":"p1","deep":"# + String(repeating: "[", count: 300) + String(repeating: "]", count: 300) + "}",
    ]

    @Test(arguments: invalidLines)
    func invalidLine(_ line: String) {
        let error = #expect(throws: LedgerError.self) { try Event(jsonLine: line) }
        #expect(error?.code == .invalidEvent)
        #expect(error?.message.isEmpty == false)
    }

    @Test func invalidUTF8IsInvalidEvent() throws {
        var bytes = Array(#"{"id":"e1","type":"transactionFinished","account":"u"#.utf8)
        bytes += [0xC3, 0x28]
        bytes += Array(#"","at":"2026-01-01T00:00:00Z","payment":"p1"}"#.utf8)
        let error = #expect(throws: LedgerError.self) {
            try bytes.withUnsafeBufferPointer { buffer throws(LedgerError) in try Event(jsonLine: buffer) }
        }
        #expect(error?.code == .invalidEvent)
    }

    /// Every kind of malformed UTF-8 is refused, including sequences that decoding repairs with
    /// a replacement character of the same length; a real U+FFFD is kept.
    @Test(arguments: [
        [0xFF], [0xC3, 0x28], [0xC0, 0x80], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80],
        [0xF1, 0x80, 0x80, 0x41], [0xE1, 0x80], [0x61, 0x80, 0x62],
    ] as [[UInt8]])
    func malformedUTF8IsRefused(_ bytes: [UInt8]) {
        #expect(bytes.withUnsafeBufferPointer { String(exactUTF8: $0) } == nil)
    }

    @Test(arguments: ["", "a", "é", "\u{FFFD}", "日本語", "🎮 p1", "x\u{0}y"])
    func wellFormedUTF8IsKept(_ text: String) {
        #expect(Array(text.utf8).withUnsafeBufferPointer { String(exactUTF8: $0) } == text)
    }

    @Test func overlongLineIsInvalidEvent() {
        let line = #"{"id":"e1","type":"transactionFinished","account":"u1","at":"2026-01-01T00:00:00Z","payment":"p1","pad":""#
            + String(repeating: "x", count: Event.maximumJSONLineLength) + "\"}"
        #expect(throws: LedgerError.self) { try Event(jsonLine: line) }
    }

    static let validLines: [(String, Event)] = [
        (#"{"id":"e1","type":"paymentAdded","account":"u1","at":"2026-01-01T00:00:00Z","payment":"p1","product":"x"}"#,
         .paymentAdded(id: "e1", account: "u1", at: newYear, payment: "p1", product: "x")),
        // Integers are judged by value; unknown fields are ignored; whitespace and \r are fine.
        (" {\"id\":\"e1\", \"type\":\"paymentAdded\",\"account\":\"u1\",\"at\":\"2026-01-01T00:00:00Z\",\"payment\":\"p1\",\"product\":\"x\",\"quantity\":2.0,\"price\":{\"a\":[1,2]}}\r",
         .paymentAdded(id: "e1", account: "u1", at: newYear, payment: "p1", product: "x", quantity: 2)),
        (#"{"id":"e1","type":"paymentAdded","account":"u1","at":"2026-01-01T00:00:00Z","payment":"p1","product":"x","quantity":1e1}"#,
         .paymentAdded(id: "e1", account: "u1", at: newYear, payment: "p1", product: "x", quantity: 10)),
        // Offsets, lower-case t and z, fractions.
        (#"{"id":"e1","type":"transactionFinished","account":"u1","at":"2026-01-01t02:30:00+02:30","payment":"p1"}"#,
         .transactionFinished(id: "e1", account: "u1", at: newYear, payment: "p1")),
        (#"{"id":"e1","type":"transactionFinished","account":"u1","at":"2026-01-01T00:00:00.250z","payment":"p1"}"#,
         .transactionFinished(id: "e1", account: "u1", at: Timestamp(seconds: newYear.seconds, nanoseconds: 250_000_000), payment: "p1")),
        (#"{"id":"e1","type":"transactionUpdated","account":"u1","at":"2026-01-01T00:00:00Z","payment":"p1","state":"restored","transaction":"t2","originalTransaction":"t1","expiresAt":"2026-02-01T00:00:00Z","product":"x"}"#,
         .transactionUpdated(id: "e1", account: "u1", at: newYear, TransactionUpdated(
            payment: "p1", state: .restored, transaction: "t2", originalTransaction: "t1",
            expiresAt: Timestamp(rfc3339: "2026-02-01T00:00:00Z"), product: "x"))),
        (#"{"id":"e1","type":"downloadUpdated","account":"u1","at":"2026-01-01T00:00:00Z","payment":"p1","download":"d","state":"active","progress":0.5,"timeRemaining":-1}"#,
         .downloadUpdated(id: "e1", account: "u1", at: newYear, DownloadUpdated(payment: "p1", download: "d", state: .active, progress: 0.5, timeRemaining: -1))),
        // Amounts beyond 64 bits are read as the largest: no balance covers them.
        (#"{"id":"e1","type":"consumed","account":"u1","at":"2026-01-01T00:00:00Z","item":"hints","amount":100000000000000000000000}"#,
         .consumed(id: "e1", account: "u1", at: newYear, item: "hints", amount: .max)),
        (#"{"id":"e\u00e9\n","type":"revoked","account":"u1","at":"2026-01-01T00:00:00Z","transaction":"","reason":"refund"}"#,
         .revoked(id: "eé\n", account: "u1", at: newYear, transaction: "", reason: "refund")),
    ]

    @Test(arguments: validLines.indices)
    func validLine(_ index: Int) throws {
        let (line, expected) = Self.validLines[index]
        let event = try Event(jsonLine: line)
        #expect(event == expected)
        // The canonical form reads back to the same event, and is a fixed point.
        let canonical = event.jsonLine
        #expect(try Event(jsonLine: canonical) == event)
        #expect(try Event(jsonLine: canonical).jsonLine == canonical)
    }

    @Test func canonicalForm() throws {
        let event = try Event(jsonLine: #"{"payment":"p1","at":"2026-01-01T01:00:00.5+01:00","state":"active","account":"u1","type":"downloadUpdated","download":"d\"1","id":"e1","progress":1.0}"#)
        #expect(event.jsonLine == #"{"id":"e1","type":"downloadUpdated","account":"u1","at":"2026-01-01T00:00:00.5Z","payment":"p1","download":"d\"1","state":"active","progress":1}"#)
    }
}

struct TimestampTests {
    @Test(arguments: [
        ("1970-01-01T00:00:00Z", 0, 0),
        ("2026-01-01T00:00:00Z", 1_767_225_600, 0),
        ("2024-02-29T12:00:00.123456789Z", 1_709_208_000, 123_456_789),
        ("2024-02-29T12:00:00.1234567891234Z", 1_709_208_000, 123_456_789),
        ("1969-12-31T23:59:59.5Z", -1, 500_000_000),
        ("0000-01-01T00:00:00Z", -62_167_219_200, 0),
        ("9999-12-31T23:59:59Z", 253_402_300_799, 0),
        ("2026-01-01T05:00:00+05:00", 1_767_225_600, 0),
        ("2025-12-31T19:00:00-05:00", 1_767_225_600, 0),
        ("2016-12-31T23:59:60Z", 1_483_228_799, 999_999_999),
        ("2016-12-31T15:59:60-08:00", 1_483_228_799, 999_999_999),
    ] as [(String, Int64, UInt32)])
    func parses(_ text: String, seconds: Int64, nanoseconds: UInt32) {
        #expect(Timestamp(rfc3339: text) == Timestamp(seconds: seconds, nanoseconds: nanoseconds))
    }

    @Test(arguments: [
        "", "2026-01-01", "2026-01-01T00:00Z", "2026-13-01T00:00:00Z", "2025-02-29T00:00:00Z", "2026-01-01T24:00:00Z",
        "2026-01-01T00:60:00Z", "2026-06-30T12:59:60Z", "2026-01-01T00:00:00.Z", "2026-01-01T00:00:00+0100",
        "2026-01-01T00:00:00+24:00", "２０２６-01-01T00:00:00Z", "2026-01-01T00:00:00Z ",
    ])
    func rejects(_ text: String) {
        #expect(Timestamp(rfc3339: text) == nil)
    }

    @Test func writesCanonicalUTC() {
        #expect(Timestamp(seconds: 1_767_225_600).rfc3339 == "2026-01-01T00:00:00Z")
        #expect(Timestamp(seconds: -1, nanoseconds: 500_000_000).rfc3339 == "1969-12-31T23:59:59.5Z")
        #expect(Timestamp(seconds: 0, nanoseconds: 1).rfc3339 == "1970-01-01T00:00:00.000000001Z")
        #expect(Timestamp.earliest.rfc3339 == "0000-01-01T00:00:00Z")
        #expect(Timestamp.latest.rfc3339 == "9999-12-31T23:59:59.999999999Z")
        var random = SeededGenerator(seed: 3)
        for _ in 0..<2000 {
            let time = Timestamp(
                seconds: Int64.random(in: Timestamp.earliest.seconds...Timestamp.latest.seconds, using: &random),
                nanoseconds: UInt32.random(in: 0..<1_000_000_000, using: &random))
            #expect(Timestamp(rfc3339: time.rfc3339) == time)
        }
    }
}
