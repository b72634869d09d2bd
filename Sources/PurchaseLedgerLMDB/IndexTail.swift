import LMDB
import PurchaseLedger

/// The tail of the LMDB backend's two indexes, the event ids (`EventIDIndex`) and the history
/// (`AccountHistory`): the records after the mark, which neither index's sorted table holds yet.
///
/// A ledger whose `meta` holds `key` reads that tail from the log itself: each record carries
/// its id and its account's handle (`LogRecordCodec.indexedFields`, read only once the
/// record's checksum holds: a record that cannot give them fails the read as damage), so a
/// commit writes the log's last page and nothing of either index. The append that brings the
/// tail to `EventIDIndex.moveThreshold` records moves it into `events` and `accountHistory`,
/// each in key order, and moves the mark (`EventIDIndex.indexedThroughKey`), in its own commit.
///
/// Ledgers written before kept each index's tail in a table of its own, appended with each
/// record (`recentEvents`: position → id; `recentHistory`: position → handle), two more pages
/// a commit; `recentHistory` moved by its own count, not at the mark. Such a ledger is read as
/// it is when opened read-only, and moved in one write the first time it is opened to write,
/// once the writer lock is held (`migrate`). Each read transaction reads which layout it sees
/// (`layout`): one begun before another process's move reads the tables, one begun after reads
/// the log.
enum IndexTail {
    static let key = "indexTail"
    static let inLog = "log"

    /// Where a read transaction finds the indexes' tail.
    enum Layout {
        /// The records after `mark` (0 in a new ledger).
        case log(mark: UInt64)
        /// `recentEvents` after the event-id mark, and `recentHistory` (ledgers written before).
        case tables
    }

    /// - Throws: `StorageError.damaged` for a tail in the log without a mark (one is written
    ///   with `key`).
    static func layout(_ meta: Table<String, String>, in txn: ReadTransaction) throws -> Layout {
        guard try txn.value(in: meta, forKey: key) == inLog else { return .tables }
        guard let mark = try EventIDIndex.indexedThrough(meta, in: txn) else {
            throw StorageError(.damaged, "the indexes' tail is the log, and their mark is missing")
        }
        return .log(mark: mark)
    }

    /// The records `range` names, every one of them, each with its id and its account's handle.
    /// A record that cannot give them fails the reading, a lookup's as a move's: an id left
    /// out would be taken again by the next event that names it.
    /// - Throws: `StorageError.damaged` for a position the log lacks, or a record whose id or
    ///   account cannot be read (its checksum fails, or it is of another format).
    static func entries(
        in range: ClosedRange<UInt64>, log: Table<UInt64, [UInt8]>, in txn: ReadTransaction
    ) throws -> [(position: UInt64, id: UTF8Key, account: UInt64)] {
        var entries: [(position: UInt64, id: UTF8Key, account: UInt64)] = []
        entries.reserveCapacity(Int(clamping: range.count))
        try forEachPosition(in: range, of: log, in: txn, missing: missing) { position, value in
            let (id, account) = try fields(of: value, at: position)
            entries.append((position, UTF8Key(id), account))
        }
        return entries
    }

    /// Calls `body` with each entry of `table` (keyed by position) in `range`, which must hold
    /// every one of them: `missing` gives the error for the first it lacks.
    static func forEachPosition<Value>(
        in range: ClosedRange<UInt64>, of table: Table<UInt64, Value>, in txn: ReadTransaction,
        missing: (UInt64) -> StorageError, _ body: (UInt64, UnsafeRawBufferPointer) throws -> Void
    ) throws {
        var expected = range.lowerBound
        try txn.scan(table, from: range.lowerBound) { key, value in
            let position = try UInt64(lmdbBytes: key)
            guard position <= range.upperBound else { return false }
            guard position == expected else { throw missing(expected) }
            expected = position + 1
            try body(position, value)
            return true
        }
        guard expected > range.upperBound else { throw missing(expected) }
    }

    /// The id and account's handle of `record`, the one at `position`, once its checksum holds.
    /// - Throws: `StorageError.damaged` when it cannot give them.
    static func fields(of record: UnsafeRawBufferPointer, at position: UInt64) throws -> (id: String, account: UInt64) {
        guard let fields = LogRecordCodec.indexedFields(in: record) else {
            throw StorageError(.damaged, "the record at \(position) gives no id and account to index (its checksum or its format)", position: position)
        }
        return fields
    }

    private static func missing(_ position: UInt64) -> StorageError {
        StorageError(.damaged, "the log has no record at position \(position)", position: position)
    }

    /// Moves the records after `mark` through `last` into `events` and `accountHistory`, in key
    /// order, and moves the mark to `last`.
    static func move(
        after mark: UInt64, through last: UInt64, log: Table<UInt64, [UInt8]>, events: Table<String, UInt64>,
        history: Table<[UInt8], EmptyValue>, meta: Table<String, String>, in write: WriteTransaction
    ) throws {
        let tail = try entries(in: mark + 1...last, log: log, in: write)
        try EventIDIndex.put(tail.map { ($0.position, $0.id) }, in: events, write)
        try AccountHistory.put(tail.map { ($0.account, $0.position) }, in: history, write)
        try write.put(String(last), in: meta, forKey: EventIDIndex.indexedThroughKey)
    }

    /// A ledger written before, opened to write: moves `recentEvents` into `events` and
    /// `recentHistory` into `accountHistory`, empties both, puts the mark at the log's last
    /// record and writes `key`, in `write`. Nothing when `key` is there already.
    static func migrate(
        log: Table<UInt64, [UInt8]>, events: Table<String, UInt64>, recentEvents: Table<UInt64, String>,
        history: Table<[UInt8], EmptyValue>, recentHistory: Table<UInt64, UInt64>, meta: Table<String, String>,
        in write: WriteTransaction
    ) throws {
        guard try write.value(in: meta, forKey: key) == nil else { return }
        let last = try write.lastKey(log) ?? 0
        // Without a mark, `events` holds every id (ledgers written before `recentEvents`).
        if let mark = try EventIDIndex.indexedThrough(meta, in: write) {
            guard mark <= last else { throw StorageError(.damaged, "the event-id index's mark, \(mark), is past the log's last record") }
            if mark < last {
                try EventIDIndex.put(try EventIDIndex.ids(in: mark + 1...last, recent: recentEvents, in: write), in: events, write)
            }
        }
        try write.removeAll(in: recentEvents)
        try AccountHistory.move(from: recentHistory, to: history, in: write)
        try write.put(String(last), in: meta, forKey: EventIDIndex.indexedThroughKey)
        try write.put(inLog, in: meta, forKey: key)
    }
}
