import LMDB
import PurchaseLedger

/// The tail of the LMDB backend's two indexes, the event ids (`EventIDIndex`) and the history
/// (`AccountHistory`): the records after the mark, which neither index's sorted table holds yet.
///
/// A ledger whose `meta` holds `key` reads that tail from the log itself: each record carries
/// its id and its account's handle (`LogRecordCodec.indexedFields`), so a commit writes the
/// log's last page and nothing of either index. The append that brings the tail to
/// `EventIDIndex.moveThreshold` records moves it into `events` and `accountHistory`, each in
/// key order, and moves the mark (`EventIDIndex.indexedThroughKey`), in its own commit.
///
/// Ledgers written before kept each index's tail in a table of its own, appended with each
/// record (`recentEvents`: position → id; `recentHistory`: position → handle), two more pages
/// a commit; `recentHistory` moved by its own count, not at the mark. Such a ledger is read as
/// it is when opened read-only, and moved in one write the first time it is opened to write
/// (`migrate`). Each read transaction reads which layout it sees (`layout`): one begun before
/// another process's move reads the tables, one begun after reads the log.
enum IndexTail {
    static let key = "indexTail"
    static let inLog = "log"

    /// Where a read transaction finds the indexes' tail.
    enum Layout {
        /// The records after `mark` (0 before the first append).
        case log(mark: UInt64)
        /// `recentEvents` after the event-id mark, and `recentHistory` (ledgers written before).
        case tables
    }

    static func layout(_ meta: Table<String, String>, in txn: ReadTransaction) throws -> Layout {
        guard try txn.value(in: meta, forKey: key) == inLog else { return .tables }
        return .log(mark: try EventIDIndex.indexedThrough(meta, in: txn) ?? 0)
    }

    /// The records `range` names, every one of them, each with its id and its account's handle.
    /// - Parameter leavingOutDamage: a lookup's reading, which leaves out a record it cannot read
    ///   (the damage is the record's, which `verify` reports and decoding it throws), rather than
    ///   fail every lookup of the tail; the move reads strictly, not to leave an id out of
    ///   `events` for good.
    /// - Throws: `StorageError.damaged` for a position the log lacks, or a record whose id or
    ///   account cannot be read.
    static func entries(
        in range: ClosedRange<UInt64>, log: Table<UInt64, [UInt8]>, leavingOutDamage: Bool = false, in txn: ReadTransaction
    ) throws -> [(position: UInt64, id: UTF8Key, account: UInt64)] {
        var entries: [(position: UInt64, id: UTF8Key, account: UInt64)] = []
        entries.reserveCapacity(Int(clamping: range.count))
        var expected = range.lowerBound
        try txn.scan(log, from: range.lowerBound) { key, value in
            let position = try UInt64(lmdbBytes: key)
            guard position <= range.upperBound else { return false }
            guard position == expected || leavingOutDamage else { throw missing(expected) }
            expected = position + 1
            guard let (id, account) = LogRecordCodec.indexedFields(in: value) else {
                if leavingOutDamage { return true }
                throw StorageError(.damaged, "the record at \(position) gives no id and account to index", position: position)
            }
            entries.append((position, UTF8Key(id), account))
            return true
        }
        guard expected > range.upperBound || leavingOutDamage else { throw missing(expected) }
        return entries
    }

    /// The account's handle the record at `position` names; nil when the log has no such record.
    static func account(at position: UInt64, log: Table<UInt64, [UInt8]>, in txn: ReadTransaction) throws -> UInt64? {
        try txn.withValue(in: log, forKey: position) { value in
            guard let (_, account) = LogRecordCodec.indexedFields(in: value) else {
                throw StorageError(.damaged, "the record at \(position) gives no id and account to index", position: position)
            }
            return account
        }
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
        if let mark = try EventIDIndex.indexedThrough(meta, in: write), mark < last {
            try EventIDIndex.put(try EventIDIndex.ids(in: mark + 1...last, recent: recentEvents, in: write), in: events, write)
        }
        try write.removeAll(in: recentEvents)
        try AccountHistory.move(from: recentHistory, to: history, in: write)
        try write.put(String(last), in: meta, forKey: EventIDIndex.indexedThroughKey)
        try write.put(inLog, in: meta, forKey: key)
    }
}
