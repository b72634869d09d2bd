import CLMDB
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// The system's `open` and `close`, which `LMDBCall`'s own `open` and `close` hide inside it.
private func openFile(_ path: String, _ flags: Int32, _ mode: mode_t) -> Int32 { open(path, flags, mode) }
private func closeFile(_ fd: Int32) { _ = close(fd) }

/// Every call into liblmdb lives in this file, and each return code is checked here, so the
/// rest of the module never sees a C type or an unchecked `Int32`.
enum LMDBCall {
    typealias Environment = OpaquePointer
    typealias Transaction = OpaquePointer
    typealias Cursor = OpaquePointer

    static func errorText(_ code: Int32) -> String {
        String(cString: mdb_strerror(code))
    }

    @inline(__always)
    static func check(_ rc: Int32, _ operation: StaticString) throws(LMDBError) {
        if rc != 0 {
            throw LMDBError(code: .init(rawValue: rc), operation: "\(operation)")
        }
    }

    // MARK: Environment

    static func createEnvironment() throws(LMDBError) -> Environment {
        var env: OpaquePointer?
        try check(mdb_env_create(&env), "mdb_env_create")
        return env!
    }

    static func setMapSize(_ env: Environment, _ size: Int) throws(LMDBError) {
        try check(mdb_env_set_mapsize(env, size), "mdb_env_set_mapsize")
    }

    static func setMaxReaders(_ env: Environment, _ readers: Int) throws(LMDBError) {
        try check(mdb_env_set_maxreaders(env, UInt32(readers)), "mdb_env_set_maxreaders")
    }

    static func setMaxTables(_ env: Environment, _ tables: Int) throws(LMDBError) {
        try check(mdb_env_set_maxdbs(env, MDB_dbi(tables)), "mdb_env_set_maxdbs")
    }

    static func open(_ env: Environment, path: String, flags: EnvironmentFlags, mode: UInt32) throws(LMDBError) {
        try check(mdb_env_open(env, path, flags.cValue, mdb_mode_t(mode)), "mdb_env_open")
    }

    /// Takes, without waiting, an exclusive record lock on the first byte of the environment's
    /// lock file, the lock by which LMDB tells that a process is alone with the environment
    /// (every process that has it open holds it shared). Returns the descriptor holding it;
    /// nil when another process holds it.
    static func lockEnvironmentExclusively(directory: String) throws(LMDBError) -> Int32? {
        let fd = openFile(directory + "/lock.mdb", O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw LMDBError(code: .init(rawValue: errno), operation: "open lock.mdb") }
        var lock = flock()
        lock.l_type = Int16(F_WRLCK)
        lock.l_whence = Int16(SEEK_SET)
        lock.l_start = 0
        lock.l_len = 1
        while fcntl(fd, F_SETLK, &lock) != 0 {
            let error = errno
            if error == EINTR { continue }
            closeFile(fd)
            if error == EAGAIN || error == EACCES { return nil }
            throw LMDBError(code: .init(rawValue: error), operation: "fcntl lock.mdb")
        }
        return fd
    }

    /// Lets go of the lock `lockEnvironmentExclusively` took.
    static func unlockEnvironment(_ fd: Int32) {
        closeFile(fd)
    }

    /// Closes the environment; LMDB gives no return code here.
    static func close(_ env: Environment) {
        mdb_env_close(env)
    }

    static func sync(_ env: Environment, force: Bool) throws(LMDBError) {
        try check(mdb_env_sync(env, force ? 1 : 0), "mdb_env_sync")
    }

    static func info(_ env: Environment) throws(LMDBError) -> (mapSize: Int, lastPage: Int, maxReaders: Int, readers: Int) {
        var info = MDB_envinfo()
        try check(mdb_env_info(env, &info), "mdb_env_info")
        return (info.me_mapsize, info.me_last_pgno, Int(info.me_maxreaders), Int(info.me_numreaders))
    }

    static func pageSize(_ env: Environment) throws(LMDBError) -> Int {
        var stat = MDB_stat()
        try check(mdb_env_stat(env, &stat), "mdb_env_stat")
        return Int(stat.ms_psize)
    }

    static func clearStaleReaders(_ env: Environment) throws(LMDBError) -> Int {
        var dead: Int32 = 0
        try check(mdb_reader_check(env, &dead), "mdb_reader_check")
        return Int(dead)
    }

    /// Unmaps from this process the pages of the data file between two addresses of its map
    /// (`madvise`, `MADV_DONTNEED`). The map is a read-only shared mapping of the file (no
    /// `MDB_WRITEMAP`; the writer writes with `pwrite`), so its pages hold nothing the page
    /// cache does not: they are mapped again at their next access, and nothing is lost. Only
    /// for addresses LMDB handed out in a read-only transaction; advice, so a failure changes
    /// nothing and is not reported.
    static func releaseMappedPages(from low: UInt, to high: UInt) {
        let size = sysconf(Int32(_SC_PAGESIZE))
        guard size > 0, high > low else { return }
        let page = UInt(size)
        let start = low & ~(page - 1)
        let end = (high + page - 1) & ~(page - 1)
        _ = madvise(UnsafeMutableRawPointer(bitPattern: start), Int(end - start), MADV_DONTNEED)
    }

    // MARK: Transactions

    static func beginTransaction(_ env: Environment, readOnly: Bool) throws(LMDBError) -> Transaction {
        var txn: OpaquePointer?
        try check(mdb_txn_begin(env, nil, readOnly ? UInt32(MDB_RDONLY) : 0, &txn), "mdb_txn_begin")
        return txn!
    }

    static func commit(_ txn: Transaction) throws(LMDBError) {
        try check(mdb_txn_commit(txn), "mdb_txn_commit")
    }

    /// Aborts the transaction; LMDB gives no return code here.
    static func abort(_ txn: Transaction) {
        mdb_txn_abort(txn)
    }

    // MARK: Tables

    static func openTable(_ txn: Transaction, name: String, flags: TableFlags) throws(LMDBError) -> UInt32 {
        var dbi: MDB_dbi = 0
        try check(mdb_dbi_open(txn, name, flags.cValue, &dbi), "mdb_dbi_open")
        return dbi
    }

    static func openMainTable(_ txn: Transaction) throws(LMDBError) -> UInt32 {
        var dbi: MDB_dbi = 0
        try check(mdb_dbi_open(txn, nil, 0, &dbi), "mdb_dbi_open")
        return dbi
    }

    static func entryCount(_ txn: Transaction, _ dbi: UInt32) throws(LMDBError) -> Int {
        var stat = MDB_stat()
        try check(mdb_stat(txn, dbi, &stat), "mdb_stat")
        return Int(stat.ms_entries)
    }

    static func pageCount(_ txn: Transaction, _ dbi: UInt32) throws(LMDBError) -> Int {
        var stat = MDB_stat()
        try check(mdb_stat(txn, dbi, &stat), "mdb_stat")
        return Int(stat.ms_branch_pages + stat.ms_leaf_pages + stat.ms_overflow_pages)
    }

    /// Calls `body` with the value stored under `key`, or returns nil when there is none.
    /// The buffer points into the map: valid only until the transaction ends or writes.
    static func get<R>(
        _ txn: Transaction, _ dbi: UInt32, key: UnsafeRawBufferPointer,
        _ body: (UnsafeRawBufferPointer) throws -> R
    ) throws -> R? {
        var k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
        var v = MDB_val()
        let rc = mdb_get(txn, dbi, &k, &v)
        if rc == MDB_NOTFOUND { return nil }
        try check(rc, "mdb_get")
        return try body(UnsafeRawBufferPointer(start: v.mv_data, count: v.mv_size))
    }

    /// Stores `value` under `key`. Returns false when `noOverwrite` finds the key already there.
    static func put(
        _ txn: Transaction, _ dbi: UInt32, key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer,
        flags: PutFlags
    ) throws(LMDBError) -> Bool {
        var k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
        var v = MDB_val(mv_size: value.count, mv_data: UnsafeMutableRawPointer(mutating: value.baseAddress))
        let rc = mdb_put(txn, dbi, &k, &v, flags.cValue)
        if rc == MDB_KEYEXIST && flags.contains(.noOverwrite) { return false }
        try check(rc, "mdb_put")
        return true
    }

    /// Deletes `key`. Returns false when there was nothing to delete.
    static func delete(_ txn: Transaction, _ dbi: UInt32, key: UnsafeRawBufferPointer) throws(LMDBError) -> Bool {
        var k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
        let rc = mdb_del(txn, dbi, &k, nil)
        if rc == MDB_NOTFOUND { return false }
        try check(rc, "mdb_del")
        return true
    }

    static func drop(_ txn: Transaction, _ dbi: UInt32, delete: Bool) throws(LMDBError) {
        try check(mdb_drop(txn, dbi, delete ? 1 : 0), "mdb_drop")
    }

    /// Pages on LMDB's free list (database 0, `FREE_DBI`): each of its values is an ID list
    /// of page numbers (`MDB_IDL`), its first element their count.
    static func freePageCount(_ txn: Transaction) throws(LMDBError) -> Int {
        var cursor: OpaquePointer?
        try check(mdb_cursor_open(txn, 0, &cursor), "mdb_cursor_open")
        defer { mdb_cursor_close(cursor) }
        var total = 0
        var operation = MDB_FIRST
        while true {
            var k = MDB_val()
            var v = MDB_val()
            let rc = mdb_cursor_get(cursor, &k, &v, operation)
            if rc == MDB_NOTFOUND { return total }
            try check(rc, "mdb_cursor_get")
            operation = MDB_NEXT
            guard v.mv_size >= MemoryLayout<Int>.size, let data = v.mv_data else { continue }
            total += Int(clamping: data.loadUnaligned(as: Int.self))
        }
    }

    // MARK: Cursors

    static func openCursor(_ txn: Transaction, _ dbi: UInt32) throws(LMDBError) -> Cursor {
        var cursor: OpaquePointer?
        try check(mdb_cursor_open(txn, dbi, &cursor), "mdb_cursor_open")
        return cursor!
    }

    /// Closes the cursor; LMDB gives no return code here.
    static func closeCursor(_ cursor: Cursor) {
        mdb_cursor_close(cursor)
    }

    /// Moves the cursor and returns the entry it lands on, or nil at either end.
    /// The buffers point into the map: valid until the next cursor operation or the end of the transaction.
    static func move(
        _ cursor: Cursor, _ operation: CursorOperation, key: UnsafeRawBufferPointer? = nil
    ) throws(LMDBError) -> (key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer)? {
        var k = MDB_val()
        if let key {
            k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
        }
        var v = MDB_val()
        let rc = mdb_cursor_get(cursor, &k, &v, operation.cValue)
        if rc == MDB_NOTFOUND { return nil }
        try check(rc, "mdb_cursor_get")
        return (UnsafeRawBufferPointer(start: k.mv_data, count: k.mv_size),
                UnsafeRawBufferPointer(start: v.mv_data, count: v.mv_size))
    }
}

// MARK: Flags, mapped here so that no other file sees the C constants.

struct EnvironmentFlags: OptionSet {
    var rawValue: UInt32
    static let noSubdirectory = EnvironmentFlags(rawValue: UInt32(MDB_NOSUBDIR))
    static let readOnly = EnvironmentFlags(rawValue: UInt32(MDB_RDONLY))
    static let noSync = EnvironmentFlags(rawValue: UInt32(MDB_NOSYNC))
    static let noMetaSync = EnvironmentFlags(rawValue: UInt32(MDB_NOMETASYNC))
    static let noThreadLocalStorage = EnvironmentFlags(rawValue: UInt32(MDB_NOTLS))
    static let noReadAhead = EnvironmentFlags(rawValue: UInt32(MDB_NORDAHEAD))
    static let noLock = EnvironmentFlags(rawValue: UInt32(MDB_NOLOCK))
    var cValue: UInt32 { rawValue }
}

struct TableFlags: OptionSet {
    var rawValue: UInt32
    static let create = TableFlags(rawValue: UInt32(MDB_CREATE))
    var cValue: UInt32 { rawValue }
}

struct PutFlags: OptionSet {
    var rawValue: UInt32
    static let noOverwrite = PutFlags(rawValue: UInt32(MDB_NOOVERWRITE))
    static let append = PutFlags(rawValue: UInt32(MDB_APPEND))
    var cValue: UInt32 { rawValue }
}

enum CursorOperation {
    case first, last, next, previous, setKey, setRange

    var cValue: MDB_cursor_op {
        switch self {
        case .first: MDB_FIRST
        case .last: MDB_LAST
        case .next: MDB_NEXT
        case .previous: MDB_PREV
        case .setKey: MDB_SET_KEY
        case .setRange: MDB_SET_RANGE
        }
    }
}
