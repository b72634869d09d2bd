/// Base64's encoding (RFC 4648), byte by byte into one buffer, in the alphabet given: the feed's
/// cursors (`Base64URL`, no padding) and the proofs' hashes (`Base64`, padded) share it.
func base64Encode(_ bytes: [UInt8], alphabet: [UInt8], padded: Bool) -> String {
    var out: [UInt8] = []
    bytes.withUnsafeBufferPointer { base64Append($0, alphabet: alphabet, padded: padded, to: &out) }
    return String(decoding: out, as: UTF8.self)
}

/// The same, appended to `out`: for a text that holds more than the encoding (a feed cursor).
func base64Append(_ bytes: UnsafeBufferPointer<UInt8>, alphabet: [UInt8], padded: Bool, to out: inout [UInt8]) {
    out.reserveCapacity(out.count + (bytes.count + 2) / 3 * 4)
    var index = 0
    while index < bytes.count {
        let count = min(3, bytes.count - index)
        var group: UInt32 = 0
        for offset in 0..<count { group |= UInt32(bytes[index + offset]) << (16 - 8 * UInt32(offset)) }
        for sextet in 0...count { out.append(alphabet[Int(group >> (18 - 6 * UInt32(sextet)) & 63)]) }
        if padded { for _ in count..<3 { out.append(UInt8(ascii: "=")) } }
        index += 3
    }
}
