import Synchronization

/// The accounts' ids by handle, as far as this process has read them from the storage's
/// account table (records of format 2 name accounts by handle, `LogRecordCodec`).
///
/// It holds only what is committed: readers add the rows they read, the writer the handles it
/// assigned once their commit returned. A handle names one account until the account is
/// forgotten (`Forgetting`): its row then names the pseudonym, which the process that forgot it
/// learns with its commit (`rename`) and any other when it reads the `forgotten` event
/// (`reread`). A renamed handle is never named otherwise again, so a row read before the rename
/// and adopted after it cannot bring the old name back.
package final class AccountNames: Sendable {
    private struct Table {
        /// Ids by handle, in pages of 64 handles allocated as handles are seen: a lookup per
        /// record decoded is two array indexes, no hashing, and a tail that meets scattered
        /// handles costs a page each, not an array as long as the table.
        var pages: [[String?]?] = []
        var handles: [UTF8Key: UInt64] = [:]
        /// The greatest handle seen.
        var highest: UInt64 = 0
        /// Handles renamed by a forget, with their pseudonyms: they win over any row adopted later.
        var renamed: [UInt64: String] = [:]
        /// The names those handles had when this process renamed them: what it may still hold
        /// under them in memory (a change feed's state), renamed when it reads the forget.
        /// Never stored; gone with the process.
        var formerNames: [UInt64: String] = [:]

        static let pageShift: UInt64 = 6

        func name(_ handle: UInt64) -> String? {
            let page = Int(truncatingIfNeeded: handle >> Self.pageShift)
            guard page < pages.count, let names = pages[page] else { return nil }
            return names[Int(truncatingIfNeeded: handle & (1 << Self.pageShift - 1))]
        }

        /// Remembers a row; a handle past four billion (a damaged table) is left to be read again.
        mutating func set(_ handle: UInt64, _ name: String) {
            guard handle < 1 << 32 else { return }
            let page = Int(truncatingIfNeeded: handle >> Self.pageShift)
            if page >= pages.count { pages.append(contentsOf: repeatElement(nil, count: page - pages.count + 1)) }
            var names = pages[page] ?? Array(repeating: nil, count: 1 << Self.pageShift)
            pages[page] = nil
            names[Int(truncatingIfNeeded: handle & (1 << Self.pageShift - 1))] = name
            pages[page] = names
        }
    }

    private let table = Mutex(Table())

    /// Handles read together on a miss just past the greatest seen: handles are given in order
    /// of first mention, so a replay from the start needs the next ones next (and a remote
    /// storage reads them in one query). Any other miss (a tail, one account's history) reads
    /// the one row: the next handles there are anyone's.
    static let readAhead = 1024

    package init() {}

    /// The id of the account `handle` names, read from `reader` when this process has not seen
    /// it; nil when the account table has no such handle.
    func name(of handle: UInt64, reader: any LedgerStorageReader) throws -> String? {
        let (cached, highest) = table.withLock { ($0.name(handle), $0.highest) }
        if let cached { return cached }
        // `&+`: a damaged table's largest handle may be the largest number.
        let rows = try reader.accountNames(from: handle, limit: handle == highest &+ 1 ? Self.readAhead : 1)
        adopt(rows)
        return rows.first { $0.handle == handle }?.account
    }

    /// The id this process knows `handle` by, without reading; nil when it has not seen it.
    func cachedName(of handle: UInt64) -> String? {
        table.withLock { $0.name(handle) }
    }

    /// Reads, in one call, those of `handles` this process has not seen: what a chunk of
    /// records names (`LogRecordCodec.accountHandle(in:)`), before it is decoded.
    func prefetch(_ handles: [UInt64], reader: any LedgerStorageReader) throws {
        let missing = table.withLock { table in Array(Set(handles.filter { table.name($0) == nil })) }
        guard !missing.isEmpty else { return }
        adopt(try reader.accountNames(handles: missing.sorted()))
    }

    /// The name `handle` had before a forget this process learned of renamed it.
    func formerName(of handle: UInt64) -> String? {
        table.withLock { $0.formerNames[handle] }
    }

    /// The handle of `account` when this process has seen it.
    func cachedHandle(of account: String) -> UInt64? {
        table.withLock { $0.handles[UTF8Key(account)] }
    }

    /// Remembers committed rows of the account table.
    func adopt(_ rows: some Sequence<(handle: UInt64, account: String)>) {
        table.withLock { table in
            for row in rows {
                // Read before its forget committed: the old name is gone.
                if let pseudonym = table.renamed[row.handle], pseudonym != row.account { continue }
                table.set(row.handle, row.account)
                table.handles[UTF8Key(row.account)] = row.handle
                table.highest = max(table.highest, row.handle)
            }
        }
    }
}

extension AccountNames {
    /// Takes the renames of a forget this process committed.
    func rename(_ renames: [Forgetting.Rename]) {
        table.withLock { table in
            for rename in renames { Self.apply(rename, to: &table) }
        }
    }

    /// Reads again the rows of `handles`, which a forget renamed, as `reader` sees them (it
    /// read the `forgotten` record); returns the renames of those this process had read under
    /// their former names, now or when it renamed them before (each reader of the record gets
    /// them: the projections, a change feed). A handle it never read is no rename of its own.
    func reread(_ handles: [UInt64], reader: any LedgerStorageReader) throws -> [Forgetting.Rename] {
        guard !handles.isEmpty else { return [] }
        let unique = Array(Set(handles)).sorted()
        let known = table.withLock { table in unique.allSatisfy { table.renamed[$0] != nil } }
        let rows = known ? [] : try reader.accountNames(handles: unique)
        return table.withLock { table in
            for row in rows where table.renamed[row.handle] == nil {
                Self.apply(Forgetting.Rename(handle: row.handle, old: table.name(row.handle) ?? row.account, new: row.account), to: &table)
            }
            return unique.compactMap { handle in
                guard let old = table.formerNames[handle], let new = table.renamed[handle] else { return nil }
                return Forgetting.Rename(handle: handle, old: old, new: new)
            }
        }
    }

    private static func apply(_ rename: Forgetting.Rename, to table: inout Table) {
        if rename.old != rename.new { table.formerNames[rename.handle] = rename.old }
        if table.handles[UTF8Key(rename.old)] == rename.handle { table.handles[UTF8Key(rename.old)] = nil }
        table.set(rename.handle, rename.new)
        table.handles[UTF8Key(rename.new)] = rename.handle
        table.highest = max(table.highest, rename.handle)
        table.renamed[rename.handle] = rename.new
    }
}

/// Gives each account of a write its handle: the one the account table holds, or the next one
/// for an account never seen (stored in the same write as the record that first names it).
struct AccountHandleAssigner {
    let names: AccountNames
    /// The handles this write assigned, known to the cache only once the write commits.
    private(set) var assigned: [(handle: UInt64, account: String)] = []
    private var assignedByAccount: [UTF8Key: UInt64] = [:]
    private var next: UInt64?

    init(names: AccountNames) {
        self.names = names
    }

    /// The handle this write assigned `account`, if it did.
    func assignedHandle(of account: String) -> UInt64? {
        assignedByAccount[UTF8Key(account)]
    }

    /// The handle the next account never seen would get.
    func nextHandle(writer: any LedgerStorageWriter) throws -> UInt64 {
        try next ?? (writer.lastAccountHandle() + 1)
    }

    mutating func handle(of account: String, writer: any LedgerStorageWriter) throws -> UInt64 {
        if let handle = names.cachedHandle(of: account) ?? assignedByAccount[UTF8Key(account)] { return handle }
        if let handle = try writer.accountHandle(of: account) {
            names.adopt(CollectionOfOne((handle, account)))
            return handle
        }
        let handle = try next ?? (writer.lastAccountHandle() + 1)
        try writer.putAccountName(account, handle: handle)
        assigned.append((handle, account))
        assignedByAccount[UTF8Key(account)] = handle
        next = handle + 1
        return handle
    }
}
