#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import LMDB
import PurchaseLedger

/// Rewrites a ledger's data file entry by entry into a fresh environment, then puts it in
/// place of the old one (docs/FORMAT.md, "Forgetting a customer").
///
/// LMDB never overwrites a page in place: it writes a changed page elsewhere and frees the old
/// one, whose bytes stay in the file until a later write reuses it, and a page written again
/// keeps, in its unused middle, whatever its buffer held before. So after a forget, bytes of the
/// id can remain in the file though no table holds them. A copy of every entry, in key order,
/// into a new file holds only what the tables hold now: no freed page, no stale bytes.
///
/// No other process may have the ledger open: one reading it would go on reading the old file
/// with a lock file describing the new one. So this takes the writer lock and, as LMDB tells
/// whether a process is alone with an environment, an exclusive lock on its lock file
/// (`ExclusiveEnvironmentUse`); a process opening the ledger meanwhile waits for the rewrite.
///
/// A forget leaves the file to be rewritten (`pendingKey` in `meta`): `ledger forget` rewrites
/// it at once; after a forget through a server, the next open for writing does, when no other
/// process has the ledger open (`LedgerDirectory.open`). The rewritten file has no such key.
enum DataFileRewrite {
    /// The key of `meta` that says a forget left stale bytes in the file.
    static let pendingKey = "rewritePending"

    /// Returns the data file's size before and after. Throws `ledgerInUse` when another process
    /// has the ledger open.
    static func rewrite(directory: String) throws -> (before: Int, after: Int) {
        try LedgerDirectory.checkExists(directory)
        // Not open in this process (LMDB must not open one environment twice in a process),
        // nor written by another.
        let claim = try OpenEnvironments.claim(directory)
        defer { claim.release() }
        let lock = try LedgerDirectory.lockForWriting(directory)
        defer { lock.release() }
        let alone: ExclusiveEnvironmentUse
        do {
            guard let held = try ExclusiveEnvironmentUse(directory: directory) else {
                throw StorageError(
                    .ledgerInUse, "another process has the ledger at \(directory) open: its data file is rewritten when none has")
            }
            alone = held
        } catch let error as LMDBError {
            throw LMDBErrors.map(error, maximumSize: nil)
        }
        defer { alone.release() }
        let data = directory + "/" + LMDBLedgerStorage.dataFileName
        let before = Directory.fileSize(data) ?? 0
        let scratch = scratchPath(directory)
        try removeScratch(scratch)
        try Directory.create(scratch)
        defer { try? removeScratch(scratch) }
        do {
            try copyEntries(from: directory, to: scratch)
        } catch {
            throw LMDBErrors.map(error, maximumSize: nil)
        }
        guard rename(scratch + "/" + LMDBLedgerStorage.dataFileName, data) == 0 else {
            throw StorageError(.io, "could not put the rewritten data file in place (errno \(errno))")
        }
        let fd = open(directory, O_RDONLY | O_DIRECTORY)
        if fd >= 0 {
            fsync(fd)
            close(fd)
        }
        // The lock file still describes the old file. Opened here, where this process is alone
        // with it, LMDB initializes it from the new one before a waiting process can read it
        // (closing it then lets go of `alone`'s lock too: locks belong to the process).
        do {
            try Environment(directory: directory).close()
        } catch {
            throw LMDBErrors.map(error, maximumSize: nil)
        }
        return (before, Directory.fileSize(data) ?? 0)
    }

    private static func copyEntries(from directory: String, to scratch: String) throws {
        var readOnly = Environment.Configuration()
        readOnly.readOnly = true
        // Alone with the file (`ExclusiveEnvironmentUse`): LMDB's lock file, left alone, keeps
        // this process's exclusive lock on it until the rewrite is in place.
        readOnly.withoutLockFile = true
        readOnly.maxTables = LMDBLedgerStorage.tableNames.count + 8
        let source = try Environment(directory: directory, configuration: readOnly)
        defer { source.close() }
        var writable = Environment.Configuration()
        writable.maxTables = readOnly.maxTables
        writable.initialMapSize = max(1 << 20, try source.info().usedSize + (1 << 20))
        let target = try Environment(directory: scratch, configuration: writable)
        defer { target.close() }
        let names = try source.openTables { opener in
            try LMDBLedgerStorage.tableNames.compactMap { name in
                try opener.tableIfPresent(name, key: [UInt8].self, value: [UInt8].self).map { (name, $0) }
            }
        }
        let tables = try target.openTables { opener in
            try names.map { name, _ in try opener.table(name, key: [UInt8].self, value: [UInt8].self) }
        }
        for ((name, from), to) in zip(names, tables) {
            // In runs of entries a transaction, in key order (appended: pages fill whole).
            // The new file has no forget to rewrite for: `meta`'s pending key stays behind.
            let left: [UInt8]? = name == "meta" ? Array(pendingKey.utf8) : nil
            var after: [UInt8]?
            while true {
                var entries: [(key: [UInt8], value: [UInt8])] = []
                try source.read { txn in
                    try txn.scan(from, from: after) { key, value in
                        if let after, key.elementsEqual(after) { return true }
                        if let left, key.elementsEqual(left) { return true }
                        entries.append((Array(key), Array(value)))
                        return entries.count < 65_536
                    }
                }
                guard let last = entries.last else { break }
                try target.write { txn in
                    for entry in entries {
                        try entry.value.withUnsafeBytes { try txn.append(bytes: $0, in: to, forKey: entry.key) }
                    }
                }
                after = last.key
            }
        }
        // The main table's own entry beside the tables' names.
        let (sourceMain, targetMain) = (try source.openTables { try $0.mainTable(key: String.self, value: [UInt8].self) },
                                        try target.openTables { try $0.mainTable(key: String.self, value: [UInt8].self) })
        if let tail = try source.read({ txn in try txn.withValue(in: sourceMain, forKey: ClockTail.key) { [UInt8]($0) } }) {
            try target.write { txn in try txn.put(tail, in: targetMain, forKey: ClockTail.key) }
        }
    }

    /// Where a rewrite builds the new file: `rewrite.tmp/` in the ledger's directory.
    static func scratchPath(_ directory: String) -> String {
        directory + "/rewrite.tmp"
    }

    /// Removes what a rewrite cut short left (a kill while it copied: a partial copy of the
    /// file, names of a forgotten customer among its bytes). Only with the writer lock held,
    /// which every rewrite holds while it runs.
    static func removeLeftovers(_ directory: String) throws {
        try removeScratch(scratchPath(directory))
    }

    private static func removeScratch(_ path: String) throws {
        for file in ["data.mdb", "lock.mdb"] { unlink(path + "/" + file) }
        if rmdir(path) != 0 && errno != ENOENT {
            throw StorageError(.io, "could not remove \(path) (errno \(errno))")
        }
    }
}
