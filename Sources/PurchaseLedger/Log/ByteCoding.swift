/// Appends the log's compact binary encoding: LEB128 varints, zigzag for signed values,
/// length-prefixed UTF-8 strings, little-endian doubles.
package struct ByteWriter {
    package var bytes: [UInt8]

    package init(capacity: Int = 128) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    package mutating func byte(_ value: UInt8) { bytes.append(value) }

    package mutating func varint(_ value: UInt64) {
        var v = value
        while v >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        bytes.append(UInt8(v))
    }

    package mutating func signed(_ value: Int64) {
        varint(UInt64(bitPattern: (value << 1) ^ (value >> 63)))
    }

    package mutating func string(_ value: String) {
        var copy = value
        copy.withUTF8 { string(utf8: UnsafeRawBufferPointer($0)) }
    }

    /// A string given as its UTF-8 bytes, written as `string(_:)` writes it.
    package mutating func string(utf8: UnsafeRawBufferPointer) {
        varint(UInt64(utf8.count))
        bytes.append(contentsOf: utf8)
    }

    package mutating func double(_ value: Double) {
        withUnsafeBytes(of: value.bitPattern.littleEndian) { bytes.append(contentsOf: $0) }
    }

    package mutating func uint32(_ value: UInt32) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    package mutating func uint64(_ value: UInt64) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    package mutating func timestamp(_ value: Timestamp) {
        signed(value.seconds)
        varint(UInt64(value.nanoseconds))
    }
}

/// Reads what `ByteWriter` wrote; every read checks bounds and throws on truncated or
/// malformed input instead of trapping, since the bytes come from disk.
package struct ByteReader {
    package struct Malformed: Error {
        package var reason: String

        package init(reason: String) {
            self.reason = reason
        }
    }

    package let bytes: UnsafeRawBufferPointer
    package private(set) var offset = 0

    package init(_ bytes: UnsafeRawBufferPointer) {
        self.bytes = bytes
    }

    package var isAtEnd: Bool { offset == bytes.count }

    package mutating func byte() throws(Malformed) -> UInt8 {
        guard offset < bytes.count else { throw Malformed(reason: "truncated") }
        defer { offset += 1 }
        return bytes[offset]
    }

    package mutating func varint() throws(Malformed) -> UInt64 {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            let b = try byte()
            guard shift < 64, shift != 63 || b <= 1 else { throw Malformed(reason: "varint overflow") }
            result |= UInt64(b & 0x7F) << shift
            if b < 0x80 { return result }
            shift += 7
        }
    }

    package mutating func signed() throws(Malformed) -> Int64 {
        let raw = try varint()
        return Int64(bitPattern: (raw >> 1) ^ (0 &- (raw & 1)))
    }

    /// A varint that counts something in memory: one past `Int.max` is damage, not a trap.
    package mutating func count() throws(Malformed) -> Int {
        guard let count = Int(exactly: try varint()) else { throw Malformed(reason: "count out of range") }
        return count
    }

    /// Moves past `count` bytes.
    package mutating func skip(_ count: Int) throws(Malformed) {
        guard count >= 0, count <= bytes.count - offset else { throw Malformed(reason: "skip past the end") }
        offset += count
    }

    package mutating func string() throws(Malformed) -> String {
        let length = try varint()
        guard length <= UInt64(bytes.count - offset) else { throw Malformed(reason: "string past the end") }
        let utf8 = UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + Int(length)]).assumingMemoryBound(to: UInt8.self)
        guard let text = String(exactUTF8: utf8) else {
            throw Malformed(reason: "invalid UTF-8")
        }
        offset += Int(length)
        return text
    }

    package mutating func double() throws(Malformed) -> Double {
        guard bytes.count - offset >= 8 else { throw Malformed(reason: "truncated") }
        defer { offset += 8 }
        return Double(bitPattern: UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self)))
    }

    package mutating func uint64() throws(Malformed) -> UInt64 {
        guard bytes.count - offset >= 8 else { throw Malformed(reason: "truncated") }
        defer { offset += 8 }
        return UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
    }

    package mutating func timestamp() throws(Malformed) -> Timestamp {
        let seconds = try signed()
        let nanos = try varint()
        guard nanos < 1_000_000_000 else { throw Malformed(reason: "nanoseconds out of range") }
        // Only times of years 0000–9999 are ever written (events are checked, the rest is now):
        // one outside them is damage, not a time to format or compute with.
        let time = Timestamp(seconds: seconds, nanoseconds: UInt32(nanos))
        guard time.isRepresentable else { throw Malformed(reason: "time out of range") }
        return time
    }
}
