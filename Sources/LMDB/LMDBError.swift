/// An error returned by LMDB: the return code, the `mdb_strerror` text and the call that failed.
///
/// Codes are a `RawRepresentable` struct with named values, as in swift-system's `Errno`, so
/// new codes never break a `switch` and callers compare with `error.code == .mapFull`.
public struct LMDBError: Error, Sendable, Hashable, CustomStringConvertible {
    public struct Code: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        public var rawValue: Int32
        public init(rawValue: Int32) { self.rawValue = rawValue }

        /// `MDB_KEYEXIST`: the key/data pair already exists (also: an `MDB_APPEND` out of order).
        public static let keyExists = Code(rawValue: -30799)
        /// `MDB_NOTFOUND`.
        public static let notFound = Code(rawValue: -30798)
        /// `MDB_PAGE_NOTFOUND`: a requested page was not found; usually corruption.
        public static let pageNotFound = Code(rawValue: -30797)
        /// `MDB_CORRUPTED`: located page was the wrong type.
        public static let corrupted = Code(rawValue: -30796)
        /// `MDB_PANIC`: update of meta page failed or the environment had a fatal error.
        public static let panic = Code(rawValue: -30795)
        /// `MDB_VERSION_MISMATCH`: the environment was written by another LMDB version.
        public static let versionMismatch = Code(rawValue: -30794)
        /// `MDB_INVALID`: the file is not an LMDB data file.
        public static let invalid = Code(rawValue: -30793)
        /// `MDB_MAP_FULL`: the environment's map size was reached.
        public static let mapFull = Code(rawValue: -30792)
        /// `MDB_DBS_FULL`: too many named databases.
        public static let tablesFull = Code(rawValue: -30791)
        /// `MDB_READERS_FULL`: every reader slot is taken.
        public static let readersFull = Code(rawValue: -30790)
        /// `MDB_TXN_FULL`: the transaction has too many dirty pages.
        public static let transactionFull = Code(rawValue: -30788)
        /// `MDB_MAP_RESIZED`: another process grew the map beyond this one's size.
        public static let mapResized = Code(rawValue: -30785)
        /// `MDB_INCOMPATIBLE`: a database was opened with flags it was not created with.
        public static let incompatible = Code(rawValue: -30784)
        /// `MDB_BAD_TXN`: the transaction must abort (an earlier operation failed).
        public static let badTransaction = Code(rawValue: -30782)
        /// `MDB_BAD_VALSIZE`: key or value of an unsupported size.
        public static let badValueSize = Code(rawValue: -30781)
        /// `EIO`: an input/output error (also what LMDB reports when a write is cut short, as on a
        /// full file system).
        public static let ioError = Code(rawValue: 5)
        /// `ENOENT`: no such file or directory.
        public static let noSuchFile = Code(rawValue: 2)
        /// `EACCES`: permission denied.
        public static let permissionDenied = Code(rawValue: 13)
        /// `EINVAL`: an invalid parameter.
        public static let invalidArgument = Code(rawValue: 22)
        /// `ENOSPC`: no space left on the device.
        public static let noSpace = Code(rawValue: 28)
        /// `EAGAIN`: the environment is locked by another process (`MDB_RDONLY` without a lock file).
        public static let wouldBlock = Code(rawValue: 11)
        /// Not an LMDB code: the environment was closed (or failed beyond repair), or a thread
        /// that already has a transaction open began another.
        public static let unusable = Code(rawValue: -1)

        public var description: String {
            self == .unusable ? "the environment cannot be used here" : LMDBCall.errorText(rawValue)
        }
    }

    /// The code LMDB (or the system call beneath it) returned.
    public var code: Code
    /// The LMDB call that failed, for the message.
    public var operation: String
    /// A value read from a table that could not be decoded as the table's type.
    public var detail: String?

    public init(code: Code, operation: String, detail: String? = nil) {
        self.code = code
        self.operation = operation
        self.detail = detail
    }

    /// `mdb_strerror` text of the code.
    public var message: String { code.description }

    public var description: String {
        let text = "\(operation): \(message) (\(code.rawValue))"
        return detail.map { "\(text): \($0)" } ?? text
    }
}
