/// A signed note, a note key or a checkpoint that does not verify or cannot be read: what an
/// auditor is told, by code.
public struct NoteError: Error, Sendable, Hashable, CustomStringConvertible {
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Base: String {
            case malformedKey, malformedNote, unknownKey, invalidSignature, malformedCheckpoint
        }

        private let base: Base
        private init(_ base: Base) { self.base = base }
        public var description: String { base.rawValue }

        /// A signer or verifier key not in the form `golang.org/x/mod/sumdb/note` writes, or
        /// whose hash does not match its name and key.
        public static let malformedKey = Code(.malformedKey)
        /// Not a C2SP signed note: bad text, no signature block, a bad signature line.
        public static let malformedNote = Code(.malformedNote)
        /// No signature by the verifier's key (its name and hash).
        public static let unknownKey = Code(.unknownKey)
        /// A signature by the verifier's key that does not verify.
        public static let invalidSignature = Code(.invalidSignature)
        /// The note's text is not a C2SP `tlog-checkpoint`.
        public static let malformedCheckpoint = Code(.malformedCheckpoint)
    }

    public var code: Code
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code): \(message)" }
}
