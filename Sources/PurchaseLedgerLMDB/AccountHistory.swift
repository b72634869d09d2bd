import LMDB
import PurchaseLedger

/// The LMDB backend's history index: which positions hold an account's events.
///
/// Laid out so that a commit writes few pages. Keyed by account, each event lands in a leaf of
/// its own of a large B-tree (accounts come in any order), and LMDB writes every leaf a commit
/// touches, with its branch pages: most of what a commit wrote. So `accountHistory` (bucket =
/// position >> 16, handle, position, u64 big-endian each → nothing) holds the history up to the
/// mark the event-id index keeps, and the records after it are read from the log, each naming
/// its account's handle (`IndexTail`). The append that brings the tail to its threshold moves
/// it here, in key order: the keys fall in the newest bucket or two, a small part of the tree,
/// so the move writes far fewer pages than the appends would have one by one. Ledgers written
/// before kept the tail in `recentHistory` (position → handle), moved by its own count.
///
/// A read of an account's positions seeks once per bucket from the wanted position on (a bucket
/// holds 65,536 positions) and scans the tail. Keys by handle also mean that a forget renames
/// nothing here.
///
/// Ledgers written before have `history` (account length, account, position → nothing). A format
/// 1 ledger, read-only, is read through it; a format 2 ledger opened to write is moved to the
/// tables first (`migrate`).
enum AccountHistory {
    static let bucketBits: UInt64 = 16
    static let moveThreshold = 8192
    /// The key of `meta` written when a history by name is moved (`migrate`).
    static let movedKey = "historyLayout"
    static let movedMarker = "byHandle"

    /// The tables a ledger has, which say how its history is laid out.
    enum Layout {
        /// `recent` is read only in a ledger whose tail is not the log (`IndexTail`).
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

    /// Moves every entry of `recent` into `indexed`, in key order, and empties `recent`.
    static func move(from recent: Table<UInt64, UInt64>, to indexed: Table<[UInt8], EmptyValue>, in write: WriteTransaction) throws {
        var entries: [(handle: UInt64, position: UInt64)] = []
        entries.reserveCapacity(try write.count(recent))
        try write.scan(recent) { key, value in
            entries.append((try UInt64(lmdbBytes: value), try UInt64(lmdbBytes: key)))
            return true
        }
        try put(entries, in: indexed, write)
        try write.removeAll(in: recent)
    }

    /// Puts the entries in key order: neighbouring keys share pages, so the write touches each
    /// once. A key's bytes are its three numbers big-endian, so the numbers' order is theirs.
    static func put(_ entries: [(handle: UInt64, position: UInt64)], in indexed: Table<[UInt8], EmptyValue>, _ write: WriteTransaction) throws {
        let ordered = entries.map { (bucket: $0.position >> bucketBits, handle: $0.handle, position: $0.position) }.sorted { $0 < $1 }
        for entry in ordered { try write.put(EmptyValue(), in: indexed, forKey: key(handle: entry.handle, position: entry.position)) }
    }

    /// Moves a history by name into the two tables; the account table must name every account
    /// it holds. Returns how many entries it moved.
    static func migrate(
        _ old: Table<[UInt8], EmptyValue>, handles: Table<String, UInt64>, to indexed: Table<[UInt8], EmptyValue>,
        in write: WriteTransaction
    ) throws -> Int {
        var entries: [(handle: UInt64, position: UInt64)] = []
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
            entries.append((handle, position))
            return true
        }
        try put(entries, in: indexed, write)
        return entries.count
    }

    // MARK: Reading

    /// Where a read finds the history's newest entries, those `indexed` does not hold yet.
    enum Tail {
        /// The log's records after the mark (`IndexTail`).
        case log(Table<UInt64, [UInt8]>, mark: UInt64)
        /// `recentHistory` (ledgers written before).
        case table(Table<UInt64, UInt64>)
    }

    /// Positions of the account `handle` names after `position`, at most `limit`, in order.
    static func positions(
        of handle: UInt64, after position: UInt64, limit: Int, indexed: Table<[UInt8], EmptyValue>, tail: Tail,
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
        // Every position `indexed` holds precedes those of the tail.
        try forEachTailEntry(tail, from: first, in: txn) { entryPosition, entryHandle in
            if entryHandle == handle { positions.append(entryPosition) }
            return positions.count < limit
        }
        return positions
    }

    /// For each handle, the position of its account's newest event at or before `last`: the
    /// tail read once, in order up to `last`, then for each handle it did not name, one seek a
    /// bucket from that of the newest position the index holds down until one holds an entry
    /// of it.
    static func newestPositions(
        of handles: [UInt64], through last: UInt64, indexed: Table<[UInt8], EmptyValue>, tail: Tail, in txn: ReadTransaction
    ) throws -> [UInt64: UInt64] {
        var newest: [UInt64: UInt64] = [:]
        var wanted = Set(handles)
        guard last > 0, !wanted.isEmpty else { return newest }
        // The tail in order up to `last`: each handle's newest entry there is its last one seen.
        // The index holds the positions before the tail's first (from 1 on: never 0).
        var tailNewest: [UInt64: UInt64] = [:]
        var indexedThrough = last
        if case .log(_, let mark) = tail { indexedThrough = min(last, mark) }
        try forEachTailEntry(tail, from: 1, through: last, in: txn) { position, handle in
            indexedThrough = min(indexedThrough, position - 1)
            if wanted.contains(handle) { tailNewest[handle] = position }
            return true
        }
        for (handle, position) in tailNewest {
            newest[handle] = position
            wanted.remove(handle)
        }
        guard indexedThrough > 0, !wanted.isEmpty else { return newest }
        try txn.withCursor(indexed) { cursor in
            for handle in wanted {
                var bucket = indexedThrough >> bucketBits
                while true {
                    // Just past the handle's entries in this bucket that are not after `indexedThrough`;
                    // the entry before it is the newest of them, if it is the handle's in this bucket.
                    let bound = bucket == indexedThrough >> bucketBits && indexedThrough < .max ? indexedThrough + 1 : .max
                    let seek = withUnsafeBytes(of: (bucket.bigEndian, handle.bigEndian, bound.bigEndian)) { Array($0) }
                    let before = try cursor.seek(atOrAfter: seek) == nil
                        ? try cursor.last() : try cursor.previous()
                    if let (found, _) = before {
                        let entry = try decode(found)
                        if entry.bucket == bucket, entry.handle == handle {
                            newest[handle] = entry.position
                            break
                        }
                    }
                    guard bucket > 0 else { break }
                    bucket -= 1
                }
            }
        }
        return newest
    }

    /// Calls `body` with each entry of the tail from `first` through `last` (none after it is
    /// decoded), in order, until it returns false.
    private static func forEachTailEntry(
        _ tail: Tail, from first: UInt64, through last: UInt64 = .max, in txn: ReadTransaction, _ body: (UInt64, UInt64) throws -> Bool
    ) throws {
        switch tail {
        case .table(let recent):
            try txn.scan(recent, from: first) { key, value in
                let position = try UInt64(lmdbBytes: key)
                guard position <= last else { return false }
                return try body(position, try UInt64(lmdbBytes: value))
            }
        case .log(let log, let mark):
            // Checked: a damaged record must fail the read, not move to another account's history.
            try txn.scan(log, from: max(first, mark + 1)) { key, value in
                let position = try UInt64(lmdbBytes: key)
                guard position <= last else { return false }
                return try body(position, try IndexTail.fields(of: value, at: position).account)
            }
        }
    }

    /// Whether the event at `position` is indexed as the account `handle` names.
    static func contains(
        handle: UInt64, position: UInt64, indexed: Table<[UInt8], EmptyValue>, tail: Tail, in txn: ReadTransaction
    ) throws -> Bool {
        switch tail {
        case .table(let recent):
            if let recorded = try txn.value(in: recent, forKey: position) { return recorded == handle }
        case .log(let log, let mark):
            if position > mark {
                return try txn.withValue(in: log, forKey: position) { try IndexTail.fields(of: $0, at: position).account } == handle
            }
        }
        return try txn.contains(indexed, key: key(handle: handle, position: position))
    }

    /// The accounts with at least one entry: the handles the index names, in one scan (for
    /// statistics).
    static func accountCount(indexed: Table<[UInt8], EmptyValue>, tail: Tail, in txn: ReadTransaction) throws -> Int {
        var handles = Set<UInt64>()
        try txn.scan(indexed) { key, _ in
            handles.insert(try decode(key).handle)
            return true
        }
        try forEachTailEntry(tail, from: 1, in: txn) { _, handle in
            handles.insert(handle)
            return true
        }
        return handles.count
    }
}
