import CLMDB

/// The floor: the same records written and scanned with raw LMDB calls, no ledger around them.
/// One unnamed database, positions as big-endian u64 keys appended with `MDB_APPEND`, durable
/// commits (no `MDB_NOSYNC`), `MDB_NOTLS`, like the ledger.
public final class RawLMDB: @unchecked Sendable {
    private var env: OpaquePointer?
    private var dbi: MDB_dbi = 0
    private var next: UInt64 = 1
    public let directory: String

    public init(directory: String, mapSize: Int = 8 << 30) {
        self.directory = directory
        precondition(mdb_env_create(&env) == 0)
        precondition(mdb_env_set_mapsize(env, mapSize) == 0)
        precondition(mdb_env_open(env, directory, UInt32(MDB_NOTLS), 0o644) == 0)
        var txn: OpaquePointer?
        precondition(mdb_txn_begin(env, nil, 0, &txn) == 0)
        precondition(mdb_dbi_open(txn, nil, 0, &dbi) == 0)
        precondition(mdb_txn_commit(txn) == 0)
    }

    deinit {
        mdb_env_close(env)
    }

    /// Puts `records` in one write transaction and commits it.
    public func append(_ records: [[UInt8]]) {
        var txn: OpaquePointer?
        precondition(mdb_txn_begin(env, nil, 0, &txn) == 0)
        for record in records {
            var key = next.bigEndian
            next += 1
            withUnsafeMutableBytes(of: &key) { keyBytes in
                var k = MDB_val(mv_size: 8, mv_data: keyBytes.baseAddress)
                record.withUnsafeBytes { value in
                    var v = MDB_val(mv_size: value.count, mv_data: UnsafeMutableRawPointer(mutating: value.baseAddress))
                    precondition(mdb_put(txn, dbi, &k, &v, UInt32(MDB_APPEND)) == 0)
                }
            }
        }
        precondition(mdb_txn_commit(txn) == 0)
    }

    /// Reads every record in key order with a cursor; returns the bytes seen.
    public func scan() -> Int {
        var txn: OpaquePointer?
        precondition(mdb_txn_begin(env, nil, UInt32(MDB_RDONLY), &txn) == 0)
        defer { mdb_txn_abort(txn) }
        var cursor: OpaquePointer?
        precondition(mdb_cursor_open(txn, dbi, &cursor) == 0)
        defer { mdb_cursor_close(cursor) }
        var key = MDB_val()
        var value = MDB_val()
        var total = 0
        var op = MDB_FIRST
        while mdb_cursor_get(cursor, &key, &value, op) == 0 {
            // Touch the bytes, as a decoder would.
            let bytes = UnsafeRawBufferPointer(start: value.mv_data, count: value.mv_size)
            total &+= Int(bytes.first ?? 0) &+ bytes.count
            op = MDB_NEXT
        }
        return total
    }
}
