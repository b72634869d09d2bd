#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import LMDB
import Logging
import PurchaseLedger

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
        let status = Directory.status(directory)
        switch status {
        case .missing, .empty:
            guard creating else {
                throw CatalogError(.missing, "\(directory) holds no ledger yet: a catalog is needed to create one")
            }
            if status == .missing { try Directory.create(directory) }
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

    /// Waits up to a second for the lock: a process this one forks holds a copy of the lock's
    /// descriptor (and so the lock) from its fork until its exec closes it, so a ledger just
    /// closed may seem in use for that long.
    static func lockForWriting(_ directory: String) throws -> ExclusiveFileLock {
        for attempt in 0..<20 {
            if let lock = try ExclusiveFileLock(path: directory + "/" + writerLockName) { return lock }
            if attempt < 19 { usleep(50_000) }
        }
        throw StorageError(.ledgerInUse, "another process is writing the ledger at \(directory)")
    }

    static func openStorage(_ directory: String, configuration: Ledger.Configuration, options: LMDBOptions) throws -> LMDBLedgerStorage {
        var environment = Environment.Configuration()
        environment.initialMapSize = min(options.initialMapSize, options.maximumSize ?? .max)
        environment.maximumMapSize = options.maximumSize
        environment.readOnly = configuration.readOnly
        // What reads keep of the file resident: a replay's or a feed's lookups between the
        // records it scans, a timeline's records, a verify's proofs. Not much less: each time
        // lets go of pages the next reads map again (the B-trees' inner pages, the accounts a
        // tail replay reads as it goes), which made opens from a snapshot slow when it came
        // every 64 KiB of records (docs/ARCHITECTURE.md, "Replay is CPU-bound").
        environment.releasesReadPagesEvery = 8 << 20
        environment.durability = switch configuration.durability {
        case .synchronous: .synchronous
        case .noSync: .noSync
        }
        do {
            return try LMDBLedgerStorage(directory: directory, configuration: environment)
        } catch {
            throw LMDBErrors.map(error, maximumSize: options.maximumSize)
        }
    }

    /// The storage of the ledger in `directory`, ready for `Ledger`: checked (or prepared, when
    /// writable: created given a catalog), opened, and, when writable, holding the writer lock.
    static func open(_ directory: String, creating: Bool, configuration: Ledger.Configuration, options: LMDBOptions) throws -> LMDBLedgerStorage {
        if configuration.readOnly {
            try checkExists(directory)
        } else {
            try prepareForWriting(directory, creating: creating)
        }
        var storage = try openStorage(directory, configuration: configuration, options: options)
        if !configuration.readOnly, try storage.isRewritePending() {
            storage = try rewriteLeftByAForget(storage, directory, configuration: configuration, options: options)
        }
        if !configuration.readOnly {
            do {
                storage.holdWriterLock(try lockForWriting(directory))
                // Only the writer moves what older versions wrote (`IndexTail`, `ClockTail`).
                try storage.moveIndexTail()
                try storage.moveClockTails()
                // A rewrite killed midway left its copy (a forget's names among its bytes).
                try DataFileRewrite.removeLeftovers(directory)
            } catch {
                storage.close()
                throw error
            }
        }
        return storage
    }

    /// A forget through a server left the data file to be rewritten (`DataFileRewrite`): done
    /// now, before this process writes, unless another process has the ledger open or the
    /// rewrite fails (it is then left for a later open, and logged).
    private static func rewriteLeftByAForget(
        _ storage: LMDBLedgerStorage, _ directory: String, configuration: Ledger.Configuration, options: LMDBOptions
    ) throws -> LMDBLedgerStorage {
        storage.close()
        do {
            let sizes = try DataFileRewrite.rewrite(directory: directory)
            configuration.logger.notice("rewrote the data file after a forget", metadata: [
                "location": "\(directory)", "before": "\(sizes.before)", "after": "\(sizes.after)",
            ])
        } catch let error as StorageError where error.code == .ledgerInUse {
            configuration.logger.warning("a forget left the data file to be rewritten, but another process has the ledger open", metadata: [
                "location": "\(directory)", "error": "\(error)",
            ])
        } catch {
            // The old file stays whole and marked (the new one replaces it only when complete): a
            // ledger that cannot be rewritten now (a disk without room for the copy) still opens.
            configuration.logger.error("a forget left the data file to be rewritten, and the rewrite failed", metadata: [
                "location": "\(directory)", "error": "\(StorageErrors.map(error))",
            ])
        }
        return try openStorage(directory, configuration: configuration, options: options)
    }
}
