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

    /// The text of `note` once a signature by `verifier`'s key (its name and hash) verifies.
    public static func open(_ note: String, verifier: NoteVerifier) throws -> String {
        let bytes = Array(note.utf8)
        // The signatures follow the last blank line.
        guard bytes.count >= 2, let split = (0..<(bytes.count - 1)).last(where: { bytes[$0] == 0x0A && bytes[$0 + 1] == 0x0A }) else {
            throw NoteError(.malformedNote, "no blank line before the signatures")
        }
        let text = String(decoding: bytes[...split], as: UTF8.self)
        let block = bytes[(split + 2)...]
        guard isValidText(text), !block.isEmpty, block.last == 0x0A else { throw NoteError(.malformedNote, "not a signed note") }
        let lines = String(decoding: block.dropLast(), as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
        guard lines.count <= maximumSignatures else { throw NoteError(.malformedNote, "more than \(maximumSignatures) signatures") }
        var found = false
        for line in lines {
            guard line.hasPrefix(dash) else { throw NoteError(.malformedNote, "a signature line starts with \"\(dash)\"") }
            let fields = line.dropFirst(dash.count).split(separator: " ", omittingEmptySubsequences: false)
            guard fields.count == 2, NoteKeyName.isValid(fields[0]), let signed = Base64.decode(fields[1]), signed.count > 4 else {
                throw NoteError(.malformedNote, "a signature line is \"\(dash)<name> <base64>\"")
            }
            let hash = signed.prefix(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            guard fields[0] == verifier.name, hash == verifier.keyHash else { continue }
            guard verifier.isValidSignature(Array(signed.dropFirst(4)), for: Array(text.utf8)) else {
                throw NoteError(.invalidSignature, "the signature by \(verifier.name)+\(NoteKeyName.hex(hash)) does not verify")
            }
            found = true
        }
        guard found else { throw NoteError(.unknownKey, "no signature by \(verifier.name)+\(NoteKeyName.hex(verifier.keyHash))") }
        return text
    }

    /// Non-empty UTF-8 ending in a newline, with no control character but the newline.
    static func isValidText(_ text: String) -> Bool {
        text.utf8.last == 0x0A && !text.unicodeScalars.contains { $0 != "\n" && $0.properties.generalCategory == .control }
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
        guard text.hasSuffix("\n"), lines.count >= 4,
              let size = UInt64(lines[1]), String(size) == lines[1], let root = MerkleHash(base64: String(lines[2]))
        else { throw NoteError(.malformedCheckpoint, "a checkpoint is an origin, a size in decimal and a root in base64, a line each") }
        try self.init(origin: String(lines[0]), size: size, root: root)
    }

    public var text: String { "\(origin)\n\(size)\n\(root.base64)\n" }
}
