/// A C2SP `signed-note`: a text, a blank line, and lines of signatures
/// (`— <name> <base64(key hash ‖ signature)>`), each over the text's bytes. What Go's
/// `note.Sign` writes and `note.Open` reads.
public enum SignedNote {
    /// At most this many signature lines are read, as Go's reader does.
    static let maximumSignatures = 100
    private static let dash = "\u{2014} "

    /// `text` (lines ending in "\n") signed by `signer`.
    public static func sign(_ text: String, with signer: NoteSigner) throws -> String {
        guard isValidText(text) else { throw NoteError(.malformedNote, "a note's text is lines of UTF-8 ending in a newline, without control characters") }
        let signature = try signer.signature(for: Array(text.utf8))
        let hash = (0..<4).map { UInt8(truncatingIfNeeded: signer.keyHash >> (24 - 8 * $0)) }
        return text + "\n" + dash + signer.name + " " + Base64.encode(hash + signature) + "\n"
    }

    /// The text of `note` once a signature by `verifier`'s key (its name and hash, byte for
    /// byte) verifies. Other signers' lines are read and left; a repeat of a signer's line is
    /// skipped, as Go's `note.Open` skips it.
    public static func open(_ note: String, verifier: NoteVerifier) throws -> String {
        try open(bytes: Array(note.utf8), verifier: verifier)
    }

    /// The same, from bytes as they came: not UTF-8 is no note.
    public static func open(bytes: [UInt8], verifier: NoteVerifier) throws -> String {
        guard String(validating: bytes, as: UTF8.self) != nil else { throw NoteError(.malformedNote, "a note is UTF-8") }
        // The signatures follow the last blank line.
        guard bytes.count >= 2, let split = (0..<(bytes.count - 1)).last(where: { bytes[$0] == 0x0A && bytes[$0 + 1] == 0x0A }) else {
            throw NoteError(.malformedNote, "no blank line before the signatures")
        }
        let text = String(decoding: bytes[...split], as: UTF8.self)
        let block = bytes[(split + 2)...]
        guard isValidText(text), !block.isEmpty, block.last == 0x0A else { throw NoteError(.malformedNote, "not a signed note") }
        let lines = block.dropLast().split(separator: 0x0A, omittingEmptySubsequences: false)
        guard lines.count <= maximumSignatures else { throw NoteError(.malformedNote, "more than \(maximumSignatures) signatures") }
        let dash = Array(Self.dash.utf8)
        var seen = Set<[UInt8]>()
        var found = false
        for line in lines {
            // Bytes, not characters: a name may begin with a combining mark.
            guard line.starts(with: dash) else { throw NoteError(.malformedNote, "a signature line starts with \"\(Self.dash)\"") }
            let fields = line.dropFirst(dash.count).split(separator: 0x20, omittingEmptySubsequences: false)
            let name = String(decoding: fields[0], as: UTF8.self)
            guard fields.count == 2, NoteKeyName.isValid(name), let signed = Base64.decode(String(decoding: fields[1], as: UTF8.self)), signed.count > 4 else {
                throw NoteError(.malformedNote, "a signature line is \"\(Self.dash)<name> <base64>\"")
            }
            guard seen.insert(Array(fields[0]) + signed.prefix(4)).inserted else { continue }
            let hash = signed.prefix(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            guard fields[0].elementsEqual(verifier.name.utf8), hash == verifier.keyHash else { continue }
            guard verifier.isValidSignature(Array(signed.dropFirst(4)), for: Array(text.utf8)) else {
                throw NoteError(.invalidSignature, "the signature by \(verifier.name)+\(NoteKeyName.hex(hash)) does not verify")
            }
            found = true
        }
        guard found else { throw NoteError(.unknownKey, "no signature by \(verifier.name)+\(NoteKeyName.hex(verifier.keyHash))") }
        return text
    }

    /// Non-empty UTF-8 ending in a newline, with no character below U+0020 but the newline.
    static func isValidText(_ text: String) -> Bool {
        text.utf8.last == 0x0A && !text.utf8.contains { $0 < 0x20 && $0 != 0x0A }
    }
}

/// A C2SP `tlog-checkpoint`: the log's origin, its size and the root of its tree, the text a
/// signed note carries.
public struct Checkpoint: Sendable, Hashable {
    public let origin: String
    public let size: UInt64
    public let root: MerkleHash

    public init(origin: String, size: UInt64, root: MerkleHash) throws {
        guard !origin.isEmpty, SignedNote.isValidText(origin + "\n"), !origin.contains("\n") else {
            throw NoteError(.malformedCheckpoint, "an origin is one non-empty line")
        }
        (self.origin, self.size, self.root) = (origin, size, root)
    }

    /// Reads a checkpoint's text; lines after the root (extensions) are allowed and left.
    public init(text: String) throws {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        // Extension lines, if any, are non-empty (C2SP tlog-checkpoint).
        guard text.hasSuffix("\n"), lines.count >= 4, lines.dropFirst(3).dropLast().allSatisfy({ !$0.isEmpty }),
              let size = UInt64(lines[1]), String(size) == lines[1], let root = MerkleHash(base64: String(lines[2]))
        else { throw NoteError(.malformedCheckpoint, "a checkpoint is an origin, a size in decimal and a root in base64, a line each") }
        try self.init(origin: String(lines[0]), size: size, root: root)
    }

    public var text: String { "\(origin)\n\(size)\n\(root.base64)\n" }
}
