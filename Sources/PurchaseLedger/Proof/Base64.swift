/// Standard base64 with padding (RFC 4648 §4), as C2SP notes, checkpoints and proofs write
/// hashes, keys and signatures: the cursors' encoding (`Base64URL`) with the standard alphabet
/// and `=` to a multiple of four. Reading, the unused low bits of the last character are
/// ignored unless `canonical` (as Go's `base64.StdEncoding` ignores them: a note Go opens opens here).
enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    static func encode(_ bytes: [UInt8]) -> String {
        base64Encode(bytes, alphabet: alphabet, padded: true)
    }

    static func decode(_ text: some StringProtocol, canonical: Bool = false) -> [UInt8]? {
        let utf8 = Array(text.utf8)
        guard utf8.count % 4 == 0, !utf8.contains(UInt8(ascii: "-")), !utf8.contains(UInt8(ascii: "_")) else { return nil }
        let unpadded = utf8.prefix { $0 != UInt8(ascii: "=") }
        let padding = utf8.count - unpadded.count
        guard padding <= 2, utf8[unpadded.count...].allSatisfy({ $0 == UInt8(ascii: "=") }) else { return nil }
        let url = unpadded.map { $0 == UInt8(ascii: "+") ? UInt8(ascii: "-") : $0 == UInt8(ascii: "/") ? UInt8(ascii: "_") : $0 }
        guard let bytes = Base64URL.decode(String(decoding: url, as: UTF8.self), canonical: canonical) else { return nil }
        // The padding is exactly what the length needs.
        guard encode(bytes).utf8.count == utf8.count else { return nil }
        return bytes
    }
}
