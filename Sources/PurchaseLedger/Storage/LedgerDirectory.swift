import LMDB

/// The files of a ledger directory: `data.mdb` and `lock.mdb` (LMDB's), and `writer.lock`, the
/// advisory lock held by the one process that may append.
enum LedgerDirectory {
    static let writerLockName = "writer.lock"

    static func holdsLedger(_ directory: String) -> Bool {
        Directory.fileExists(directory + "/" + LMDBLedgerStorage.dataFileName)
    }

    /// Makes sure `directory` can hold a ledger for writing: an existing ledger, an empty
    /// directory, or no directory at all (created when a catalog is at hand to create a ledger).
    static func prepareForWriting(_ directory: String, creating: Bool) throws {
        switch Directory.status(directory) {
        case .missing:
            guard creating else {
                throw CatalogError(.missing, "\(directory) holds no ledger yet: a catalog is needed to create one")
            }
            try Directory.create(directory)
        case .empty:
            guard creating else {
                throw CatalogError(.missing, "\(directory) holds no ledger yet: a catalog is needed to create one")
            }
        case .nonEmpty:
            guard holdsLedger(directory) else {
                throw StorageError(.notALedger, "\(directory) is not empty and holds no ledger; use an empty or new directory")
            }
        case .notADirectory:
            throw StorageError(.notALedger, "\(directory) is not a directory")
        }
    }

    static func checkExists(_ directory: String) throws {
        guard holdsLedger(directory) else {
            throw StorageError(.notALedger, "\(directory) holds no ledger")
        }
    }

    static func lockForWriting(_ directory: String) throws -> ExclusiveFileLock {
        guard let lock = try ExclusiveFileLock(path: directory + "/" + writerLockName) else {
            throw StorageError(.ledgerInUse, "another process is writing the ledger at \(directory)")
        }
        return lock
    }

    static func openStorage(_ directory: String, configuration: Ledger.Configuration) throws -> LMDBLedgerStorage {
        var environment = Environment.Configuration()
        environment.initialMapSize = configuration.initialMapSize
        environment.maximumMapSize = configuration.maximumSize
        environment.readOnly = configuration.readOnly
        environment.durability = switch configuration.durability {
        case .synchronous: .synchronous
        case .noSync: .noSync
        }
        do {
            return try LMDBLedgerStorage(directory: directory, configuration: environment)
        } catch {
            throw StorageErrors.map(error, maximumSize: configuration.maximumSize)
        }
    }
}

/// Maps storage-engine failures to `StorageError`; every other error passes through.
enum StorageErrors {
    static func map(_ error: any Error, maximumSize: Int?) -> any Error {
        switch error {
        case is StorageError, is LedgerError, is CatalogError:
            return error
        case let lmdb as LMDBError where lmdb.code == .unusable:
            return StorageError(.closed, "the ledger is closed, or unusable after a storage failure", cause: lmdb)
        case let lmdb as LMDBError where lmdb.code == .mapFull:
            let limit = maximumSize.map { " of \($0) bytes" } ?? ""
            return StorageError(.storageFull, "the ledger reached its maximum size\(limit); earlier events stay readable", cause: lmdb)
        case let lmdb as LMDBError where lmdb.code == .noSpace:
            return StorageError(.storageFull, "the file system is full; earlier events stay readable", cause: lmdb)
        case let lmdb as LMDBError where lmdb.code == .invalid || lmdb.code == .versionMismatch:
            return StorageError(.notALedger, "the data file is not a usable LMDB environment", cause: lmdb)
        case let lmdb as LMDBError where lmdb.code == .corrupted || lmdb.code == .pageNotFound || lmdb.code == .panic:
            return StorageError(.damaged, "the data file is damaged", cause: lmdb)
        case let lmdb as LMDBError:
            return StorageError(.io, "the storage failed", cause: lmdb)
        case let file as FileSystemError:
            return StorageError(.io, "the file system failed", cause: file)
        case let malformed as ByteReader.Malformed:
            return StorageError(.damaged, "an index value cannot be decoded: \(malformed.reason)")
        default:
            // Errors of the caller's own closure pass through.
            return error
        }
    }
}
