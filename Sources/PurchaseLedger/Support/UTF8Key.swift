#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A string compared and hashed by its UTF-8 bytes.
///
/// Swift's `String` compares by Unicode canonical equivalence ("é" equals "e\u{301}", "K" equals
/// the Kelvin sign), but ids, accounts and store transactions are opaque bytes, and the LMDB
/// indexes compare bytes. Every identity the ledger keeps in memory is a `UTF8Key`, so memory and
/// disk never disagree about whether two ids are the same.
package struct UTF8Key: Hashable, Sendable, Comparable, CustomStringConvertible, ExpressibleByStringLiteral {
    package let string: String

    package init(_ string: String) {
        self.string = string
    }

    package init(stringLiteral value: String) {
        self.string = value
    }

    package var description: String { string }

    package static func == (lhs: UTF8Key, rhs: UTF8Key) -> Bool {
        sameBytes(lhs.string, rhs.string)
    }

    package func hash(into hasher: inout Hasher) {
        var copy = string
        copy.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    }

    /// Byte order, the order of every sorted list the ledger prints; compared whole, as `==`
    /// does (the event-id index sorts 8,192 ids at a time by it).
    package static func < (lhs: UTF8Key, rhs: UTF8Key) -> Bool {
        utf8Order(lhs.string, rhs.string)
    }
}

/// True when the two strings have the same UTF-8 bytes (not merely canonically equivalent).
func sameBytes(_ lhs: String, _ rhs: String) -> Bool {
    var lhs = lhs
    var rhs = rhs
    // Native strings hand out their contiguous UTF-8 without copying.
    return lhs.withUTF8 { left in
        rhs.withUTF8 { right in
            left.count == right.count && (left.isEmpty || memcmp(left.baseAddress!, right.baseAddress!, left.count) == 0)
        }
    }
}

func sameBytes(_ lhs: String?, _ rhs: String?) -> Bool {
    switch (lhs, rhs) {
    case (nil, nil): true
    case let (lhs?, rhs?): sameBytes(lhs, rhs)
    default: false
    }
}

/// Byte order of UTF-8, the order of every sorted list the ledger prints: the common length
/// compared whole with `memcmp`, as `sameBytes` compares, then the shorter first.
func utf8Order(_ lhs: String, _ rhs: String) -> Bool {
    var lhs = lhs
    var rhs = rhs
    return lhs.withUTF8 { left in
        rhs.withUTF8 { right in
            let length = min(left.count, right.count)
            let common = length == 0 ? 0 : memcmp(left.baseAddress!, right.baseAddress!, length)
            return common != 0 ? common < 0 : left.count < right.count
        }
    }
}
