/// Writes canonical JSON into a byte buffer: keys in the order the caller writes them, strings
/// escaped minimally (quote, backslash and control characters; everything else as UTF-8),
/// numbers in their shortest exact form. The same values always give the same bytes.
package struct JSONWriter {
    package private(set) var bytes: [UInt8] = []
    /// Separators between members: `,` and `:` when compact, `, ` and `: ` for the report and
    /// replay shapes of the spec.
    private let spaced: Bool
    /// One flag per open object or array: true until its first member is written.
    private var isFirst: [Bool] = []
    /// True between a key and its value, which then needs no separator.
    private var afterKey = false

    package init(spaced: Bool = false, capacity: Int = 256) {
        self.spaced = spaced
        bytes.reserveCapacity(capacity)
    }

    /// A writer that appends to `bytes` (a line after the lines before it), without copying
    /// them: `takeBytes()` hands them back. It starts at the top level, so `bytes` must end
    /// after a whole value.
    package init(spaced: Bool = false, appendingTo bytes: consuming [UInt8]) {
        self.spaced = spaced
        self.bytes = bytes
    }

    /// The bytes written, leaving the writer empty.
    package mutating func takeBytes() -> [UInt8] {
        defer { bytes = [] }
        return bytes
    }

    package var string: String { String(decoding: bytes, as: UTF8.self) }

    /// Ends a line (between top-level values, as in JSON Lines).
    package mutating func newline() {
        bytes.append(0x0A)
    }

    /// Starts over, keeping the buffer's capacity.
    package mutating func removeAll() {
        bytes.removeAll(keepingCapacity: true)
    }

    package mutating func beginObject() {
        separate()
        bytes.append(UInt8(ascii: "{"))
        isFirst.append(true)
    }

    package mutating func endObject() {
        isFirst.removeLast()
        bytes.append(UInt8(ascii: "}"))
    }

    package mutating func beginArray() {
        separate()
        bytes.append(UInt8(ascii: "["))
        isFirst.append(true)
    }

    package mutating func endArray() {
        isFirst.removeLast()
        bytes.append(UInt8(ascii: "]"))
    }

    /// Writes `"key":` inside an object; the value follows.
    package mutating func key(_ key: String) {
        separate()
        appendString(key)
        bytes.append(UInt8(ascii: ":"))
        if spaced { bytes.append(UInt8(ascii: " ")) }
        afterKey = true
    }

    package mutating func string(_ value: String) {
        separate()
        appendString(value)
    }

    package mutating func int(_ value: Int64) {
        separate()
        bytes.append(contentsOf: String(value).utf8)
    }

    package mutating func double(_ value: Double) {
        separate()
        Self.appendNumber(value, to: &bytes)
    }

    /// A value already written as JSON by this writer's kind (a change's `json`), as it is.
    package mutating func raw(_ json: String) {
        separate()
        bytes.append(contentsOf: json.utf8)
    }

    package mutating func bool(_ value: Bool) {
        separate()
        bytes.append(contentsOf: (value ? "true" : "false").utf8)
    }

    package mutating func timestamp(_ value: Timestamp) {
        separate()
        bytes.append(UInt8(ascii: "\""))
        value.appendRFC3339(to: &bytes)
        bytes.append(UInt8(ascii: "\""))
    }

    /// A string member whose text `write` appends: only bytes a JSON string holds unescaped
    /// (printable ASCII but the quote and the backslash), such as a cursor's text; any other
    /// byte stops the process rather than write JSON that does not parse.
    package mutating func member(_ name: String, unescaped write: (inout [UInt8]) -> Void) {
        key(name)
        separate()
        bytes.append(UInt8(ascii: "\""))
        let start = bytes.count
        write(&bytes)
        precondition(bytes[start...].allSatisfy { $0 >= 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") })
        bytes.append(UInt8(ascii: "\""))
    }

    // Convenience for object members.
    package mutating func member(_ name: String, _ value: String) { key(name); string(value) }
    package mutating func member(_ name: String, _ value: Int64) { key(name); int(value) }
    package mutating func member(_ name: String, _ value: Double) { key(name); double(value) }
    package mutating func member(_ name: String, _ value: Timestamp) { key(name); timestamp(value) }
    package mutating func member(_ name: String, ifPresent value: String?) { if let value { member(name, value) } }
    package mutating func member(_ name: String, ifPresent value: Double?) { if let value { member(name, value) } }
    package mutating func member(_ name: String, ifPresent value: Timestamp?) { if let value { member(name, value) } }
    package mutating func member(_ name: String, ifPresent value: Int?) { if let value { member(name, Int64(value)) } }
    package mutating func member(_ name: String, ifPresent value: Int64?) { if let value { member(name, value) } }
    package mutating func member(_ name: String, _ value: Bool) { key(name); bool(value) }
    package mutating func member(_ name: String, ifPresent value: Bool?) { if let value { member(name, value) } }

    private mutating func separate() {
        if afterKey {
            afterKey = false
            return
        }
        guard let first = isFirst.last else { return }
        if first {
            isFirst[isFirst.count - 1] = false
        } else {
            bytes.append(UInt8(ascii: ","))
            if spaced { bytes.append(UInt8(ascii: " ")) }
        }
    }

    private mutating func appendString(_ value: String) {
        Self.appendQuoted(value, to: &bytes)
    }

    /// `value` as a JSON string literal, escaped as everywhere in the ledger's output.
    static func appendQuoted(_ value: String, to bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\""))
        // Most strings need no escape: copied whole, not byte by byte.
        let copiedWhole: Bool? = value.utf8.withContiguousStorageIfAvailable { utf8 in
            guard !utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) else { return false }
            bytes.append(contentsOf: utf8)
            return true
        }
        if copiedWhole == true {
            bytes.append(UInt8(ascii: "\""))
            return
        }
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\""): bytes.append(contentsOf: [0x5C, 0x22])
            case UInt8(ascii: "\\"): bytes.append(contentsOf: [0x5C, 0x5C])
            case 0x0A: bytes.append(contentsOf: [0x5C, UInt8(ascii: "n")])
            case 0x0D: bytes.append(contentsOf: [0x5C, UInt8(ascii: "r")])
            case 0x09: bytes.append(contentsOf: [0x5C, UInt8(ascii: "t")])
            case 0x08: bytes.append(contentsOf: [0x5C, UInt8(ascii: "b")])
            case 0x0C: bytes.append(contentsOf: [0x5C, UInt8(ascii: "f")])
            case 0x00..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                bytes.append(contentsOf: [0x5C, UInt8(ascii: "u"), 0x30, 0x30, hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    /// Integral values below 2^53 as integers (`1`, not `1.0`); others in Swift's shortest
    /// round-trip form, which reads back to the same `Double`.
    static func appendNumber(_ value: Double, to out: inout [UInt8]) {
        precondition(value.isFinite, "JSON cannot represent \(value)")
        if value == value.rounded(), abs(value) < 9_007_199_254_740_992 {
            out.append(contentsOf: String(Int64(value)).utf8)
        } else {
            out.append(contentsOf: value.description.utf8)
        }
    }
}
