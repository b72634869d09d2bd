import Testing
@testable import PurchaseLedger

/// An id held inline up to 22 bytes, in a `String` past them: the same bytes back, and compared,
/// hashed and ordered as the `UTF8Key` of those bytes is, on both sides of the limit.
struct CompactIDTests {
    /// Ids of every length from empty to past the inline limit, in ASCII and in multi-byte
    /// characters (whose bytes end at the limit or straddle it), and "é" in both its forms.
    static let ids: [String] = (0...40).flatMap { length in
        [String(repeating: "7", count: length), String(repeating: "é", count: length / 2) + String(repeating: "x", count: length % 2)]
    } + ["e\u{301}", "\u{E9}", "2000000123456789", "\u{0}", "a\u{0}b", "🙂🙂🙂🙂🙂"]

    @Test func holdsTwentyTwoBytesInlineInTwentyFour() {
        #expect(CompactID.inlineCapacity == 22)
        #expect(MemoryLayout<CompactID>.size == 24)
    }

    @Test func givesBackTheSameBytes() {
        for id in Self.ids {
            let compact = CompactID(id)
            #expect(Array(compact.string.utf8) == Array(id.utf8), "\(id)")
            #expect(compact.matches(id))
            #expect(!compact.matches(id + "x"))
            #expect(compact.withBytes { Array($0) } == Array(id.utf8))
        }
    }

    @Test func comparesHashesAndOrdersAsItsUTF8Key() {
        for left in Self.ids {
            for right in Self.ids {
                let (compactLeft, compactRight) = (CompactID(left), CompactID(right))
                #expect((compactLeft == compactRight) == (UTF8Key(left) == UTF8Key(right)), "\(left) \(right)")
                #expect((compactLeft < compactRight) == (UTF8Key(left) < UTF8Key(right)), "\(left) \(right)")
                #expect(compactLeft.matches(right) == (UTF8Key(left) == UTF8Key(right)))
            }
            #expect(CompactID(left).hashValue == UTF8Key(left).hashValue, "an index probed by either finds it")
        }
    }
}
