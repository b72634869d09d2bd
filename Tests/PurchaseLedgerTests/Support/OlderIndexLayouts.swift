import LMDB
import LedgerTestSupport
@testable import PurchaseLedger
@testable import PurchaseLedgerLMDB

/// Gives an LMDB ledger the indexes' layout of older versions (`IndexTail`), from what this
/// version wrote.
enum OlderIndexLayouts {
    /// Versions before `IndexTail`: the tail of both indexes (the records after the mark) in
    /// `recentEvents` and `recentHistory`, and no `indexTail` in `meta`.
    static func putTailInTables(_ storage: LMDBLedgerStorage) throws {
        guard case .byHandle(_, let recentHistory) = storage.tables.history, let recentEvents = storage.tables.recentEvents else {
            throw TestFailure("not a history by handle")
        }
        try storage.environment.write { txn in
            let last = try txn.lastKey(storage.tables.log) ?? 0
            let mark = try EventIDIndex.indexedThrough(storage.tables.meta, in: txn) ?? 0
            if last > mark {
                for entry in try IndexTail.entries(in: mark + 1...last, log: storage.tables.log, in: txn) {
                    try txn.append(entry.id.string, in: recentEvents, forKey: entry.position)
                    try txn.append(entry.account, in: recentHistory, forKey: entry.position)
                }
            }
            _ = try txn.delete(in: storage.tables.meta, key: IndexTail.key)
        }
    }

    /// Versions before `recentEvents`: every id in `events` (and the whole history in
    /// `accountHistory`), no mark and no `indexTail`.
    static func putEveryIDInEvents(_ storage: LMDBLedgerStorage) throws {
        guard case .byHandle(let indexed, _) = storage.tables.history else { throw TestFailure("not a history by handle") }
        try storage.environment.write { txn in
            let last = try txn.lastKey(storage.tables.log) ?? 0
            let mark = try EventIDIndex.indexedThrough(storage.tables.meta, in: txn) ?? 0
            if last > mark {
                try IndexTail.move(
                    after: mark, through: last, log: storage.tables.log, events: storage.tables.events, history: indexed,
                    meta: storage.tables.meta, in: txn)
            }
            _ = try txn.delete(in: storage.tables.meta, key: EventIDIndex.indexedThroughKey)
            _ = try txn.delete(in: storage.tables.meta, key: IndexTail.key)
        }
    }
}
