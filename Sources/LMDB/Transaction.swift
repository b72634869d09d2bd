/// A read-only view of the environment, valid only inside `Environment.read` (or as the base of
/// a `WriteTransaction` inside `Environment.write`).
///
/// Every buffer handed to a closure points into LMDB's map and is valid only during that call:
/// values are copied or decoded before the transaction ends. Using a transaction after its
/// closure returned is a programming error and traps.
public class ReadTransaction {
    private var handle: LMDBCall.Transaction?
    /// The addresses of the map that this read-only transaction's lookups and scans handed
    /// out, lowest and highest: all of it lies in the one mapping of the data file.
    private var handedOut: (low: UInt, high: UInt)?
    /// The same, for every read of the environment since its map was mapped.
    private let environmentSpan: MapReadSpan
    /// Whether the values handed out lie in the map: not a write's, which may be in pages of
    /// its own (LMDB copies a page it changes into memory of its own until the commit).
    private let readsFromTheMap: Bool

    init(handle: LMDBCall.Transaction, environmentSpan: MapReadSpan, readsFromTheMap: Bool = true) {
        self.handle = handle
        self.environmentSpan = environmentSpan
        self.readsFromTheMap = readsFromTheMap
    }

    var live: LMDBCall.Transaction {
        guard let handle else { preconditionFailure("LMDB transaction used after it ended") }
        return handle
    }

    /// Marks the transaction ended and returns its handle for commit or abort. What it read
    /// and did not let go joins the environment's span, for `releaseEveryReadPage`.
    func end() -> LMDBCall.Transaction {
        let current = live
        handle = nil
        if let handedOut {
            environmentSpan.widened(toCover: handedOut)
            self.handedOut = nil
        }
        return current
    }

    /// Calls `body` with the bytes stored under `key`; nil when the key is absent.
    public func withValue<K, V, R>(
        in table: Table<K, V>, forKey key: K, _ body: (UnsafeRawBufferPointer) throws -> R
    ) throws -> R? {
        let txn = live
        var handedOut = 0
        defer { if environmentSpan.noteHandedOut(handedOut) { releaseEveryReadPage() } }
        return try key.withLMDBBytes { keyBytes in
            try LMDBCall.get(txn, table.handle, key: keyBytes) { value in
                if readsFromTheMap {
                    noteHandedOut(value)
                    handedOut = max(value.count, MapReadSpan.pageSize)
                }
                return try body(value)
            }
        }
    }

    /// The decoded value stored under `key`; nil when the key is absent.
    public func value<K, V: LMDBDecodable>(in table: Table<K, V>, forKey key: K) throws -> V? {
        try withValue(in: table, forKey: key) { bytes throws(LMDBError) in try V(lmdbBytes: bytes) }
    }

    public func contains<K, V>(_ table: Table<K, V>, key: K) throws -> Bool {
        try withValue(in: table, forKey: key) { _ in true } ?? false
    }

    /// The number of entries in the table (from `mdb_stat`, without a scan).
    public func count<K, V>(_ table: Table<K, V>) throws -> Int {
        try LMDBCall.entryCount(live, table.handle)
    }

    /// The number of pages the table's B-tree occupies.
    public func pageCount<K, V>(_ table: Table<K, V>) throws -> Int {
        try LMDBCall.pageCount(live, table.handle)
    }

    /// Lets go of the pages of the data file that this transaction's lookups (`withValue`)
    /// and scans have handed out values from: a long scan would otherwise keep every page it
    /// visited in the process's resident memory (the whole file, for a scan of the whole log).
    /// They stay in the page cache, and values already handed out stay readable: their pages
    /// come back at the next access. A write transaction's values are not noted (they may be
    /// in pages of its own, not in the map), so it lets nothing of its own go.
    public func releaseReadPages() {
        _ = live
        guard let handedOut else { return }
        self.handedOut = nil
        environmentSpan.widened(toCover: handedOut)
        LMDBCall.releaseMappedPages(from: handedOut.low, to: handedOut.high)
    }

    /// `releaseReadPages`, over everything between the lowest and highest addresses the
    /// environment's read-only transactions have handed out since its map was mapped, and so
    /// the B-tree's inner pages that lie there, which each chunk of a long scan visits again
    /// and which would otherwise stay mapped (those outside, and the meta pages, stay). A walk
    /// of the span's page tables, which makes every other thread's reads map their pages
    /// again: once many reads have mapped their pages (`releasesReadPagesEvery`), not after
    /// each.
    public func releaseEveryReadPage() {
        _ = live
        let span = handedOut.map { environmentSpan.widened(toCover: $0) } ?? environmentSpan.current
        handedOut = nil
        guard let span else { return }
        LMDBCall.releaseMappedPages(from: span.low, to: span.high)
    }

    /// Opens a cursor on `table` for the duration of `body`.
    public func withCursor<K, V, R>(_ table: Table<K, V>, _ body: (Cursor<K, V>) throws -> R) throws -> R {
        let cursor = try Cursor<K, V>(handle: LMDBCall.openCursor(live, table.handle))
        defer { cursor.close() }
        return try body(cursor)
    }

    /// Visits the entries of `table` in key order, from the first key at or after `start`
    /// (from the first key when nil), while `body` returns true.
    public func scan<K, V>(
        _ table: Table<K, V>, from start: K? = nil,
        _ body: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws -> Bool
    ) throws {
        // Counted as it goes, so that a long scan of a whole table lets go of it on the way.
        var handedOut = 0
        func count() {
            if environmentSpan.noteHandedOut(handedOut) { releaseEveryReadPage() }
            handedOut = 0
        }
        defer { count() }
        try withCursor(table) { cursor in
            var entry = try start.map { try cursor.seek(atOrAfter: $0) } ?? cursor.first()
            while let (key, value) = entry {
                if readsFromTheMap {
                    noteHandedOut(value)
                    handedOut += value.count
                }
                guard try body(key, value) else { return }
                if handedOut >= 64 << 10 { count() }
                entry = try cursor.next()
            }
        }
    }

    /// `scan`, letting go of the pages its values lie in each time it has handed out
    /// `interval` bytes of them, and at its end: a long scan's pages do not stay resident. Only
    /// the span from its lowest value to its highest since it last let go, not the span of the
    /// transaction's other lookups meanwhile (a replay's reads of states and names between
    /// records), which lie anywhere in the file: letting go of the span from them to the
    /// scan's made each of them map again, by a call whose cost grew with the file. Those go
    /// with every other read page when the reads cross `releasesReadPagesEvery`.
    public func scan<K, V>(
        _ table: Table<K, V>, from start: K? = nil, releasingPagesEvery interval: Int,
        _ body: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws -> Bool
    ) throws {
        guard readsFromTheMap else { return try scan(table, from: start, body) }
        var own: (low: UInt, high: UInt)?
        var sinceReleased = 0
        func release() {
            defer { sinceReleased = 0 }
            guard let span = own else { return }
            own = nil
            environmentSpan.widened(toCover: span)
            if environmentSpan.noteHandedOut(sinceReleased) {
                releaseEveryReadPage()
            } else {
                LMDBCall.releaseMappedPages(from: span.low, to: span.high)
            }
        }
        defer { release() }
        try withCursor(table) { cursor in
            var entry = try start.map { try cursor.seek(atOrAfter: $0) } ?? cursor.first()
            while let (key, value) = entry {
                if let base = value.baseAddress {
                    let low = UInt(bitPattern: base)
                    own = Self.widened(own, toCover: (low, low + UInt(value.count)))
                }
                sinceReleased += value.count
                guard try body(key, value) else { return }
                if sinceReleased >= interval { release() }
                entry = try cursor.next()
            }
        }
    }

    /// Widens the span of the map handed out to cover `value` (`releaseReadPages`).
    @inline(__always)
    private func noteHandedOut(_ value: UnsafeRawBufferPointer) {
        guard let start = value.baseAddress else { return }
        let low = UInt(bitPattern: start)
        handedOut = Self.widened(handedOut, toCover: (low, low + UInt(value.count)))
    }

    @inline(__always)
    private static func widened(_ span: (low: UInt, high: UInt)?, toCover read: (low: UInt, high: UInt)) -> (low: UInt, high: UInt) {
        span.map { (min($0.low, read.low), max($0.high, read.high)) } ?? read
    }

    /// How many pages LMDB's free list holds: pages no longer in use, whose old contents stay
    /// in the file until a later write reuses them. A read transaction only (LMDB refuses a
    /// write's cursor on the free list).
    public func freePageCount() throws -> Int {
        try LMDBCall.freePageCount(live)
    }

    /// The bytes of the last key of `table`, decoded; nil when the table is empty.
    public func lastKey<K: LMDBDecodable, V>(_ table: Table<K, V>) throws -> K? {
        try withCursor(table) { cursor in
            try cursor.last().map { entry throws(LMDBError) in try K(lmdbBytes: entry.key) }
        }
    }
}

/// A write transaction: reads see its own uncommitted writes. Only `Environment.write` creates
/// one, on the thread that will commit it.
public final class WriteTransaction: ReadTransaction {
    private(set) var isDiscarded = false

    /// Makes the transaction abort instead of commit when its closure returns: for a write that
    /// turned out to have nothing to store, so that not even the meta page changes.
    public func discard() {
        isDiscarded = true
    }

    /// Stores `value` under `key`, replacing what was there.
    public func put<K, V: LMDBEncodable>(_ value: V, in table: Table<K, V>, forKey key: K) throws {
        _ = try putBytes(in: table, key: key, value: value, flags: [])
    }

    /// Stores `value` under `key` only when the key is new; returns false when it existed.
    @discardableResult
    public func insert<K, V: LMDBEncodable>(_ value: V, in table: Table<K, V>, forKey key: K) throws -> Bool {
        try putBytes(in: table, key: key, value: value, flags: .noOverwrite)
    }

    /// Appends `value` under `key`, which must sort after every key of the table (`MDB_APPEND`:
    /// no search, and pages fill completely). A key out of order throws `.keyExists`.
    public func append<K, V: LMDBEncodable>(_ value: V, in table: Table<K, V>, forKey key: K) throws {
        _ = try putBytes(in: table, key: key, value: value, flags: .append)
    }

    /// Appends raw bytes under `key` (see `append(_:in:forKey:)`).
    public func append<K, V>(bytes: UnsafeRawBufferPointer, in table: Table<K, V>, forKey key: K) throws {
        let txn = live
        _ = try key.withLMDBBytes { keyBytes in
            try LMDBCall.put(txn, table.handle, key: keyBytes, value: bytes, flags: .append)
        }
    }

    /// Deletes `key`; returns false when it was absent.
    @discardableResult
    public func delete<K, V>(in table: Table<K, V>, key: K) throws -> Bool {
        let txn = live
        return try key.withLMDBBytes { keyBytes in try LMDBCall.delete(txn, table.handle, key: keyBytes) }
    }

    /// Removes every entry of the table, keeping the table.
    public func removeAll<K, V>(in table: Table<K, V>) throws {
        try LMDBCall.drop(live, table.handle, delete: false)
    }

    /// Removes the table from the file. Its handle is closed: `table` must not be used again.
    public func deleteTable<K, V>(_ table: Table<K, V>) throws {
        try LMDBCall.drop(live, table.handle, delete: true)
    }

    private func putBytes<K, V: LMDBEncodable>(
        in table: Table<K, V>, key: K, value: V, flags: PutFlags
    ) throws -> Bool {
        let txn = live
        return try key.withLMDBBytes { keyBytes in
            try value.withLMDBBytes { valueBytes in
                try LMDBCall.put(txn, table.handle, key: keyBytes, value: valueBytes, flags: flags)
            }
        }
    }
}
