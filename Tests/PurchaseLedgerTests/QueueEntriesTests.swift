import Testing
@testable import PurchaseLedger

/// An account's entries, kept in an array with an index past a few: found by the bytes of their
/// payment, replaced in place, equal whatever order they came in.
struct QueueEntriesTests {
    private static func entry(_ payment: String, openedAt: UInt64 = 1) -> QueueEntry {
        QueueEntry(payment: payment, product: "com.example.tenhints", productType: .consumable, quantity: 1, openedAt: openedAt)
    }

    /// Payments of a smol string's size, held inline past it (Apple's 16-digit ids), and too
    /// long to be held inline.
    static let paymentPrefixes = ["p", "payment-2000000", "payment-for-the-order-of-a-customer-"]

    @Test(arguments: [3, QueueEntries.indexedFrom - 1, QueueEntries.indexedFrom, 100, 3000], paymentPrefixes)
    func entriesAreFoundReplacedAndKeptInOrder(count: Int, prefix: String) {
        var entries = QueueEntries()
        for number in 0..<count {
            #expect(entries.update(Self.entry("\(prefix)\(number)", openedAt: UInt64(number))) == nil)
        }
        var finished = Self.entry("\(prefix)1", openedAt: 1)
        finished.finishedAt = 99
        #expect(entries.update(finished)?.finishedAt == nil, "returns the entry it replaced")
        #expect(entries.count == count)
        #expect(entries[UTF8Key("\(prefix)1")]?.finishedAt == 99)
        #expect(entries[UTF8Key("\(prefix)\(count - 1)")]?.openedAt == UInt64(count - 1))
        #expect(entries[UTF8Key("\(prefix)\(count)")] == nil)
        #expect(entries[UTF8Key("\(prefix)1\u{0}")] == nil, "a longer payment with the same leading bytes is another")
        #expect(entries.values.map(\.payment) == (0..<count).map { "\(prefix)\($0)" }, "in the order they came")
    }

    /// "é" as one code point and as e + accent are two payments, before and after the index.
    @Test(arguments: [2, QueueEntries.indexedFrom + 2])
    func paymentsAreComparedByTheirBytes(count: Int) {
        var entries = QueueEntries()
        for number in 0..<(count - 2) { entries.update(Self.entry("p\(number)")) }
        entries.update(Self.entry("p\u{E9}", openedAt: 1))
        entries.update(Self.entry("pe\u{301}", openedAt: 2))
        #expect(entries.count == count)
        #expect(entries[UTF8Key("p\u{E9}")]?.openedAt == 1)
        #expect(entries[UTF8Key("pe\u{301}")]?.openedAt == 2)
    }

    @Test func equalityAndHashIgnoreOrder() {
        let payments = (0..<40).map { "p\($0)" }
        var forward = QueueEntries()
        var backward = QueueEntries()
        for payment in payments { forward.update(Self.entry(payment)) }
        for payment in payments.reversed() { backward.update(Self.entry(payment)) }
        #expect(forward == backward)
        #expect(forward.hashValue == backward.hashValue)
        backward.update(Self.entry("p7", openedAt: 2))
        #expect(forward != backward)
    }

    /// An account's entries grow by a quarter, not twice over: a replay holds one per purchase,
    /// and doubling left a third of their memory unused.
    @Test func entriesGrowByAQuarter() {
        var entries = QueueEntries()
        for number in 0..<500 {
            entries.update(Self.entry("p\(number)"))
            let count = number + 1
            if entries.values.capacity > count + count / 4 + 1 {
                Issue.record("\(count) entries hold room for \(entries.values.capacity)")
                return
            }
        }
    }

    /// An entry is 128 bytes (a replay holds one per purchase): "not finished" is a position of
    /// 0, not an optional's extra byte, and the quantity is one byte; both read back as given,
    /// through a snapshot too, and a snapshot that says an entry finished at 0 is damage.
    @Test func anEntryIs128BytesAndKeepsItsQuantityAndWhereItFinished() throws {
        #expect(MemoryLayout<QueueEntry>.stride == 128)
        var entry = QueueEntry(payment: "p", product: "com.example.tenhints", productType: .consumable, quantity: 10, openedAt: 3)
        #expect(entry.quantity == 10 && entry.finishedAt == nil && !entry.isFinished)
        entry.finishedAt = 1
        #expect(entry.finishedAt == 1 && entry.isFinished)
        entry.finishedAt = UInt64(Int64.max)
        #expect(entry.finishedAt == UInt64(Int64.max))

        var state = AccountState()
        entry.finishedAt = 1
        state.entries.update(entry)
        state.entries.update(QueueEntry(payment: "q", product: "com.example.tenhints", productType: .consumable, quantity: 7, openedAt: 4))
        var bytes = AccountStateCodec.encode(state)
        let decoded = try bytes.withUnsafeBytes { try AccountStateCodec.decode($0) }
        #expect(decoded.entries[CompactID("p")]?.finishedAt == 1 && decoded.entries[CompactID("p")]?.quantity == 10)
        #expect(decoded.entries[CompactID("q")]?.finishedAt == nil && decoded.entries[CompactID("q")]?.quantity == 7)

        // The entry "p" (sorted first) ends: state, stateSetAt 3, mask 8 (finished), position 1,
        // no downloads. Its position made 0, with the checksum made again:
        let finished: [UInt8] = [3, 8, 1, 0]
        let at = try #require((0...(bytes.count - 4)).first { Array(bytes[$0..<($0 + 4)]) == finished })
        bytes[at + 2] = 0
        let body = Array(bytes.dropLast(4))
        bytes.replaceSubrange((bytes.count - 4)..., with: withUnsafeBytes(of: CRC32C.checksum(body).littleEndian, Array.init))
        #expect(throws: AccountStateCodec.Damage.self) { try bytes.withUnsafeBytes { try AccountStateCodec.decode($0) } }
    }

    /// The ledger keeps every account's state inline in its table of accounts (a replay holds
    /// one per account, `CompactTable`): a field few accounts have lives behind a pointer
    /// (`OutOfLine`), so a state costs its table about 100 bytes, not 300.
    @Test func anAccountStateIsSmallInlineAndKeepsItsRareFieldsApart() {
        print("AccountState \(MemoryLayout<AccountState>.size) bytes, QueueEntry \(MemoryLayout<QueueEntry>.size)")
        #expect(MemoryLayout<AccountState>.size <= 96)
        var state = AccountState()
        let record = AppTransactionRecord(
            info: AppTransactionInfo(appTransaction: "app-1"), signedAt: Timestamp(seconds: 5, nanoseconds: 0), eventID: "e1")
        let before = state
        state.appTransaction = record
        state.consent = ConsentRecord(consented: true, signedAt: Timestamp(seconds: 6, nanoseconds: 0), eventID: "e2")
        #expect(state.appTransaction == record)
        #expect(state.consent?.consented == true)
        #expect(before.appTransaction == nil && before.consent == nil, "a copy taken before keeps its own")
        var copy = state
        copy.consent?.consented = false
        #expect(state.consent?.consented == true && copy.consent?.consented == false)
        #expect(copy != state)
        copy.consent?.consented = true
        #expect(copy == state && copy.hashValue == state.hashValue)
    }
}
