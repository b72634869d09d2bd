#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An id's UTF-8 bytes, kept inside the value when they fit in 22 bytes, else in a `String`.
///
/// A Swift `String` keeps at most 15 bytes inline; anything longer is a heap object (64 bytes
/// of the heap for an id of 19), with a reference count. Ids of 16 to 22 bytes are common
/// (Apple's transaction ids are 16 digits, the benchmark's payment ids 19 bytes), and a replay
/// held one such object per purchase for its payment: a sixth of its heap. This value costs
/// 24 bytes instead of a `String`'s 16 and allocates nothing up to 22 bytes. Compared, hashed
/// and ordered by its bytes, as `UTF8Key` is; its hash equals the hash of the `UTF8Key` of the
/// same bytes, so one index can be probed by either.
struct CompactID: Sendable {
    /// 22 bytes of id, zero past `count`, then the count: two ids held inline are equal exactly
    /// when these fields are (no padding among them: `CompactIDTests` holds the layout to 22
    /// bytes before the count, in 24).
    private struct Inline: Sendable, Equatable {
        var head: UInt64 = 0
        var middle: UInt64 = 0
        var tail: UInt32 = 0
        var last: UInt16 = 0
        var count: UInt8 = 0
    }

    private enum Storage: Sendable {
        case inline(Inline)
        case string(String)
    }

    /// The bytes an inline id may hold: those laid out before its count.
    static let inlineCapacity = MemoryLayout<Inline>.offset(of: \Inline.count) ?? 0

    private let storage: Storage

    init(_ id: String) {
        guard id.utf8.count <= Self.inlineCapacity else {
            storage = .string(id)
            return
        }
        var id = id
        var inline = Inline()
        id.withUTF8 { bytes in
            withUnsafeMutableBytes(of: &inline) { $0.copyMemory(from: UnsafeRawBufferPointer(bytes)) }
            inline.count = UInt8(truncatingIfNeeded: bytes.count)
        }
        storage = .inline(inline)
    }

    /// The id as a string (a new one, for an inline id past 15 bytes).
    var string: String {
        switch storage {
        case .string(let string):
            return string
        case .inline(var inline):
            let count = Int(inline.count)
            return withUnsafeBytes(of: &inline) { raw in
                String(unsafeUninitializedCapacity: count) { buffer in
                    _ = buffer.initialize(from: raw.prefix(count))
                    return count
                }
            }
        }
    }

    /// Calls `body` with the id's bytes.
    func withBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        switch storage {
        case .string(var string):
            return try string.withUTF8 { try body(UnsafeRawBufferPointer($0)) }
        case .inline(var inline):
            let count = Int(inline.count)
            return try withUnsafeBytes(of: &inline) { try body(UnsafeRawBufferPointer(rebasing: $0.prefix(count))) }
        }
    }

    /// Whether `id` has the same bytes.
    func matches(_ id: String) -> Bool {
        var id = id
        return id.withUTF8 { other in withBytes { Self.equal($0, UnsafeRawBufferPointer(other)) } }
    }

    private static func equal(_ lhs: UnsafeRawBufferPointer, _ rhs: UnsafeRawBufferPointer) -> Bool {
        lhs.count == rhs.count && (lhs.isEmpty || memcmp(lhs.baseAddress!, rhs.baseAddress!, lhs.count) == 0)
    }
}

extension CompactID: Hashable, Comparable {
    static func == (lhs: CompactID, rhs: CompactID) -> Bool {
        if case .inline(let left) = lhs.storage, case .inline(let right) = rhs.storage { return left == right }
        return rhs.withBytes { right in lhs.withBytes { left in equal(left, right) } }
    }

    /// The hash of the `UTF8Key` of the same bytes.
    func hash(into hasher: inout Hasher) {
        withBytes { hasher.combine(bytes: $0) }
    }

    /// Byte order, as `UTF8Key`'s.
    static func < (lhs: CompactID, rhs: CompactID) -> Bool {
        rhs.withBytes { right in lhs.withBytes { left in left.lexicographicallyPrecedes(right) } }
    }
}
