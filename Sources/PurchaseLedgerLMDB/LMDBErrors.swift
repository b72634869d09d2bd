import LMDB
import PurchaseLedger

/// Maps LMDB's failures to `StorageError` where they enter the backend; every other error goes
/// on to `StorageErrors.map`.
enum LMDBErrors {
    static func map(_ error: any Error, maximumSize: Int?) -> any Error {
        guard let lmdb = error as? LMDBError else { return StorageErrors.map(error) }
        switch lmdb.code {
        case .unusable:
            return StorageError(.closed, "the ledger is closed, or unusable after a storage failure", cause: lmdb)
        case .mapFull:
            let limit = maximumSize.map { " of \($0) bytes" } ?? ""
            return StorageError(.storageFull, "the ledger reached its maximum size\(limit); earlier events stay readable", cause: lmdb)
        case .noSpace:
            return StorageError(.storageFull, "the file system is full; earlier events stay readable", cause: lmdb)
        case .invalid, .versionMismatch:
            return StorageError(.notALedger, "the data file is not a usable LMDB environment", cause: lmdb)
        case .corrupted, .pageNotFound, .panic:
            return StorageError(.damaged, "the data file is damaged", cause: lmdb)
        default:
            return StorageError(.io, "the storage failed", cause: lmdb)
        }
    }
}
