import Crypto

/// An Ed25519 key that signs C2SP notes, in the text form of Go's
/// `golang.org/x/mod/sumdb/note`: `PRIVATE+KEY+<name>+<hash>+<base64(0x01 ‖ seed)>`.
public struct NoteSigner: Sendable {
    public let name: String
    /// The first four bytes of SHA-256(name ‖ "\n" ‖ 0x01 ‖ public key), big-endian.
    public let keyHash: UInt32
    private let key: Curve25519.Signing.PrivateKey

    /// A new key named `name`.
    public static func generate(name: String) throws -> NoteSigner {
        try NoteSigner(name: name, key: Curve25519.Signing.PrivateKey())
    }

    private init(name: String, key: Curve25519.Signing.PrivateKey) throws {
        guard NoteKeyName.isValid(name) else { throw NoteError(.malformedKey, "a key's name is non-empty UTF-8 without spaces or \"+\"") }
        self.name = name
        self.key = key
        keyHash = NoteKeyName.hash(name: name, publicKey: Array(key.publicKey.rawRepresentation))
    }

    /// Reads a signer key's text (surrounding whitespace allowed, as in a file).
    public init(text: String) throws {
        // The key's base64 may hold "+" itself: the fields before it are split off.
        let fields = text.trimmingWhitespace.split(separator: "+", maxSplits: 4, omittingEmptySubsequences: false)
        guard fields.count == 5, fields[0] == "PRIVATE", fields[1] == "KEY",
              let hash = NoteKeyName.parseHash(fields[3]), let encoded = Base64.decode(fields[4]),
              encoded.count == 33, encoded[0] == NoteKeyName.ed25519,
              let key = try? Curve25519.Signing.PrivateKey(rawRepresentation: encoded[1...])
        else { throw NoteError(.malformedKey, "not a signer key (PRIVATE+KEY+<name>+<hash>+<key>)") }
        try self.init(name: String(fields[2]), key: key)
        guard keyHash == hash else { throw NoteError(.malformedKey, "the signer key's hash does not match its name and key") }
    }

    /// The key's text, for its file.
    public var text: String {
        "PRIVATE+KEY+\(name)+\(NoteKeyName.hex(keyHash))+\(Base64.encode([NoteKeyName.ed25519] + Array(key.rawRepresentation)))"
    }

    /// The verifier key's text, for anyone who checks what this key signs.
    public var verifierKey: String {
        "\(name)+\(NoteKeyName.hex(keyHash))+\(Base64.encode([NoteKeyName.ed25519] + Array(key.publicKey.rawRepresentation)))"
    }

    func signature(for message: [UInt8]) throws -> [UInt8] {
        Array(try key.signature(for: message))
    }
}

/// The public half of a `NoteSigner`, in its text form `<name>+<hash>+<base64(0x01 ‖ key)>`.
public struct NoteVerifier: Sendable {
    public let name: String
    public let keyHash: UInt32
    private let key: Curve25519.Signing.PublicKey

    public init(text: String) throws {
        let fields = text.trimmingWhitespace.split(separator: "+", maxSplits: 2, omittingEmptySubsequences: false)
        guard fields.count == 3, NoteKeyName.isValid(fields[0]), let hash = NoteKeyName.parseHash(fields[1]),
              let encoded = Base64.decode(fields[2]), encoded.count == 33, encoded[0] == NoteKeyName.ed25519,
              let key = try? Curve25519.Signing.PublicKey(rawRepresentation: encoded[1...])
        else { throw NoteError(.malformedKey, "not a verifier key (<name>+<hash>+<key>)") }
        guard NoteKeyName.hash(name: String(fields[0]), publicKey: Array(encoded[1...])) == hash else {
            throw NoteError(.malformedKey, "the verifier key's hash does not match its name and key")
        }
        (name, keyHash, self.key) = (String(fields[0]), hash, key)
    }

    func isValidSignature(_ signature: [UInt8], for message: [UInt8]) -> Bool {
        key.isValidSignature(signature, for: message)
    }
}

/// What C2SP's signed-note says of key names and hashes.
enum NoteKeyName {
    /// The algorithm byte of an Ed25519 key.
    static let ed25519: UInt8 = 0x01

    /// Non-empty, without Unicode whitespace and without "+" (C2SP; Go's `isValidName`).
    static func isValid(_ name: some StringProtocol) -> Bool {
        !name.isEmpty && !name.unicodeScalars.contains { $0.properties.isWhitespace || $0 == "+" }
    }

    static func hash(name: String, publicKey: [UInt8]) -> UInt32 {
        var hasher = SHA256()
        hasher.update(data: Array(name.utf8) + [UInt8(ascii: "\n"), ed25519] + publicKey)
        return Array(hasher.finalize()).prefix(4).reduce(0) { $0 << 8 | UInt32($1) }
    }

    /// Eight hexadecimal digits (written lowercase; read in either case, as Go reads them).
    static func parseHash(_ text: some StringProtocol) -> UInt32? {
        guard text.utf8.count == 8, text.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) || (0x41...0x46).contains($0) })
        else { return nil }
        return UInt32(text, radix: 16)
    }

    static func hex(_ hash: UInt32) -> String {
        let digits = String(hash, radix: 16)
        return String(repeating: "0", count: 8 - digits.count) + digits
    }
}

extension StringProtocol {
    var trimmingWhitespace: Substring {
        let scalars = Substring(self)
        guard let first = scalars.firstIndex(where: { !$0.isWhitespace }), let last = scalars.lastIndex(where: { !$0.isWhitespace }) else { return "" }
        return scalars[first...last]
    }
}
