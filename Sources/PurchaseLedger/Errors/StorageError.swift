/// A ledger could not be opened, read or written: not because of an event, but because of the
/// directory, the files in it or the disk.
public struct StorageError: Error, Sendable, CustomStringConvertible {
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Base: String {
            case notALedger, ledgerInUse, unsupportedFormat, damaged, storageFull, readOnly, closed, io, incompleteCopy
        }

        private let base: Base
        private init(_ base: Base) { self.base = base }
        public var description: String { base.rawValue }

        /// The directory does not hold a ledger (and was not to be created).
        public static let notALedger = Code(.notALedger)
        /// Another process has the ledger open for writing.
        public static let ledgerInUse = Code(.ledgerInUse)
        /// The ledger was written by a newer, or unknown, format version.
        public static let unsupportedFormat = Code(.unsupportedFormat)
        /// A record or an index is damaged; `position` names the first damaged log position.
        public static let damaged = Code(.damaged)
        /// The ledger reached its configured maximum size; earlier events stay readable.
        public static let storageFull = Code(.storageFull)
        /// The ledger was opened read-only.
        public static let readOnly = Code(.readOnly)
        /// The ledger was closed.
        public static let closed = Code(.closed)
        /// The storage engine or the file system failed; see `cause`.
        public static let io = Code(.io)
        /// The location holds a copy `ledger copy` has not finished and verified (it was
        /// stopped): only `ledger copy` opens it, to resume.
        public static let incompleteCopy = Code(.incompleteCopy)
    }

    public var code: Code
    public var message: String
    /// The first damaged log position, for `.damaged`.
    public var position: UInt64?
    /// The underlying error (an `LMDBError`, for instance).
    public var cause: (any Error & Sendable)?

    public init(_ code: Code, _ message: String, position: UInt64? = nil, cause: (any Error & Sendable)? = nil) {
        self.code = code
        self.message = message
        self.position = position
        self.cause = cause
    }

    public var description: String {
        guard let cause else { return "\(code): \(message)" }
        return "\(code): \(message) (\(cause))"
    }
}
