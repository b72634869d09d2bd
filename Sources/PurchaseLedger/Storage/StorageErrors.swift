/// Maps the failures the core itself meets in storage (file system, undecodable index values)
/// to `StorageError`; every other error passes through. Each backend maps its own engine's
/// errors where they enter (`LMDBErrors`, the PostgreSQL storage's), before they reach here.
package enum StorageErrors {
    package static func map(_ error: any Error) -> any Error {
        switch error {
        case let file as FileSystemError:
            return StorageError(.io, "the file system failed", cause: file)
        case let malformed as ByteReader.Malformed:
            return StorageError(.damaged, "an index value cannot be decoded: \(malformed.reason)")
        default:
            // StorageError, LedgerError, CatalogError and the caller's own errors pass through.
            return error
        }
    }
}
