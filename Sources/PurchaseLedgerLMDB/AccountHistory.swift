import LMDB
import PurchaseLedger

/// The LMDB backend's history index: which positions hold an account's events.
///
/// Laid out so that a commit writes few pages. Keyed by account, each event lands in a leaf of
/// its own of a large B-tree (accounts come in any order), and LMDB writes every leaf a commit
/// touches, with its branch pages: most of what a commit wrote. So the index has two tables:
/// - `recentHistory`: position (u64 big-endian, appended) → the account's handle (u64
///   big-endian). An append adds one entry at the end: a commit writes its last page.
/// - `accountHistory`: bucket (position >> 16), handle, position (u64 big-endian each) →
///   nothing. The append that brings `recentHistory` to `moveThreshold` entries moves them here,
///   in key order, and empties it. Their keys fall in the newest bucket or two, a small part of
///   the tree, so the move writes far fewer pages than the appends would have one by one.
///
/// A read of an account's positions seeks once per bucket from the wanted position on (a bucket
/// holds 65,536 positions) and scans `recentHistory`. Keys by handle also mean that a forget
/// renames nothing here.
///
/// Ledgers written before have `history` (account length, account, position → nothing). A format
/// 1 ledger, read-only, is read through it; a format 2 ledger opened to write is moved to the two
/// tables first (`migrate`).
enum AccountHistory {
    static let bucketBits: UInt64 = 16
    static let moveThreshold = 8192
    /// The key of `meta` written when a history by name is moved (`migrate`).
    static let movedKey = "historyLayout"
    static let movedMarker = "byHandle"

    /// The tables a ledger has, which say how its history is laid out.
    enum Layout {
        case byHandle(indexed: Table<[UInt8], EmptyValue>, recent: Table<UInt64, UInt64>)
        /// Before handles (format 1, and format 2 until it is opened to write).
        case byName(Table<[UInt8], EmptyValue>)
    }

    static func key(handle: UInt64, position: UInt64) -> [UInt8] {
        withUnsafeBytes(of: ((position >> bucketBits).bigEndian, handle.bigEndian, position.bigEndian)) { Array($0) }
    }

    private static func decode(_ key: UnsafeRawBufferPointer) throws -> (bucket: UInt64, handle: UInt64, position: UInt64) {
        guard key.count == 24 else { throw StorageError(.damaged, "the history index holds a key of \(key.count) bytes") }
        let bucket = UInt64(bigEndian: key.loadUnaligned(fromByteOffset: 0, as: UInt64.self))
        let position = UInt64(bigEndian: key.loadUnaligned(fromByteOffset: 16, as: UInt64.self))
        guard bucket == position >> bucketBits else { throw StorageError(.damaged, "the history index files position \(position) in bucket \(bucket)") }
        return (bucket, UInt64(bigEndian: key.loadUnaligned(fromByteOffset: 8, as: UInt64.self)), position)
    }

    // MARK: Writing

    /// Indexes the event at `position` (the next one) of the account `handle` names.
    static func add(handle: UInt64, position: UInt64, indexed: Table<[UInt8], EmptyValue>, recent: Table<UInt64, UInt64>,
                    in write: WriteTransaction) throws {
        try write.append(handle, in: recent, forKey: position)
        if try write.count(recent) >= moveThreshold { try move(from: recent, to: indexed, in: write) }
    }

    /// Moves every entry of `recent` into `indexed`, in key order, and empties `recent`.
    static func move(from recent: Table<UInt64, UInt64>, to indexed: Table<[UInt8], EmptyValue>, in write: WriteTransaction) throws {
        var keys: [[UInt8]] = []
        keys.reserveCapacity(try write.count(recent))
        try write.scan(recent) { key, value in
            keys.append(Self.key(handle: try UInt64(lmdbBytes: value), position: try UInt64(lmdbBytes: key)))
            return true
        }
        try putSorted(keys, in: indexed, write)
        try write.removeAll(in: recent)
    }

    /// Puts `keys` in key order: neighbouring keys share pages, so the write touches each once.
    private static func putSorted(_ keys: [[UInt8]], in indexed: Table<[UInt8], EmptyValue>, _ write: WriteTransaction) throws {
        for key in keys.sorted(by: { $0.lexicographicallyPrecedes($1) }) { try write.put(EmptyValue(), in: indexed, forKey: key) }
    }

    /// Moves a history by name into the two tables; the account table must name every account
    /// it holds. Returns how many entries it moved.
    static func migrate(
        _ old: Table<[UInt8], EmptyValue>, handles: Table<String, UInt64>, to indexed: Table<[UInt8], EmptyValue>,
        in write: WriteTransaction
    ) throws -> Int {
        var keys: [[UInt8]] = []
        var account: (name: [UInt8], handle: UInt64)?
        try write.scan(old) { key, _ in
            guard let length = key.first, key.count == Int(length) + 9 else {
                throw StorageError(.damaged, "the history index holds a malformed key")
            }
            let name = UnsafeRawBufferPointer(rebasing: key[1..<1 + Int(length)])
            let handle: UInt64
            if let account, account.name.elementsEqual(name) {
                handle = account.handle
            } else {
                let id = try String(lmdbBytes: name)
                guard let found = try write.value(in: handles, forKey: id) else {
                    throw StorageError(.damaged, "the history index names \"\(id)\", which the account table does not")
                }
                handle = found
                account = (Array(name), handle)
            }
            let position = UInt64(bigEndian: key.loadUnaligned(fromByteOffset: 1 + Int(length), as: UInt64.self))
            keys.append(Self.key(handle: handle, position: position))
            return true
        }
        try putSorted(keys, in: indexed, write)
        return keys.count
    }

    // MARK: Reading

    /// Positions of the account `handle` names after `position`, at most `limit`, in order.
    static func positions(
        of handle: UInt64, after position: UInt64, limit: Int, indexed: Table<[UInt8], EmptyValue>, recent: Table<UInt64, UInt64>,
        in txn: ReadTransaction
    ) throws -> [UInt64] {
        var positions: [UInt64] = []
        guard limit > 0, position < UInt64.max else { return positions }
        let first = position + 1
        try txn.withCursor(indexed) { cursor in
            var bucket = first >> bucketBits
            var entry = try cursor.seek(atOrAfter: key(handle: handle, position: first))
            while let (found, _) = entry {
                // The account's entries in this bucket, in order.
                var (foundBucket, foundHandle, foundPosition) = try decode(found)
                while foundBucket == bucket, foundHandle == handle {
                    positions.append(foundPosition)
                    guard positions.count < limit else { return }
                    guard let (next, _) = try cursor.next() else { return }
                    (foundBucket, foundHandle, foundPosition) = try decode(next)
                }
                // Then its first in the next bucket that has entries (one seek skips the empty ones).
                bucket = max(foundBucket, bucket + 1)
                entry = try cursor.seek(atOrAfter: key(handle: handle, position: bucket << bucketBits))
            }
        }
        guard positions.count < limit else { return positions }
        // Every position moved to `indexed` precedes those still in `recent`.
        try txn.scan(recent, from: first) { key, value in
            if try UInt64(lmdbBytes: value) == handle {
                positions.append(try UInt64(lmdbBytes: key))
            }
            return positions.count < limit
        }
        return positions
    }

    /// Whether the event at `position` is indexed as the account `handle` names.
    static func contains(
        handle: UInt64, position: UInt64, indexed: Table<[UInt8], EmptyValue>, recent: Table<UInt64, UInt64>, in txn: ReadTransaction
    ) throws -> Bool {
        if let recorded = try txn.value(in: recent, forKey: position) { return recorded == handle }
        return try txn.contains(indexed, key: key(handle: handle, position: position))
    }

    /// The accounts with at least one entry: the handles the index names, in one scan (for
    /// statistics).
    static func accountCount(indexed: Table<[UInt8], EmptyValue>, recent: Table<UInt64, UInt64>, in txn: ReadTransaction) throws -> Int {
        var handles = Set<UInt64>()
        try txn.scan(indexed) { key, _ in
            handles.insert(try decode(key).handle)
            return true
        }
        try txn.scan(recent) { _, value in
            handles.insert(try UInt64(lmdbBytes: value))
            return true
        }
        return handles.count
    }
}
