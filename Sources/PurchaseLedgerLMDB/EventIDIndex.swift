import LMDB
import PurchaseLedger
import Synchronization

/// The LMDB backend's event-id index: which position holds the event of an id (the rules'
/// duplicate check, at every append).
///
/// Laid out so that a commit writes few pages. Ids come in any order (an app's UUIDs, many
/// clients' streams at once), so a commit that put each id into one B-tree keyed by id touched
/// a leaf and its branch pages per id. So `events` (event id → position) holds the ids up to
/// the mark, the position `meta` holds under `indexedThroughKey`, and the ids after it are the
/// records' own, read from the log (`IndexTail`; in ledgers written before, from
/// `recentEvents`: position → id). The append that brings the tail to `moveThreshold` records
/// moves their ids into `events` in key order and moves the mark, in its own commit:
/// neighbouring keys share pages, so the batch writes far fewer pages than its ids would have
/// one by one. A lookup reads `events`, then the ids of the tail, which each process keeps
/// once read (`TailIDs`). Without a mark (ledgers written before the tail), `events` holds
/// every id.
enum EventIDIndex {
    static let moveThreshold: UInt64 = 8192
    /// The key of `meta` whose value (decimal) is the last position whose id `events` holds.
    static let indexedThroughKey = "eventIDsIndexedThrough"

    /// The last position whose id `events` holds; nil when it holds every record's id.
    static func indexedThrough(_ meta: Table<String, String>, in txn: ReadTransaction) throws -> UInt64? {
        guard let text = try txn.value(in: meta, forKey: indexedThroughKey) else { return nil }
        guard let position = UInt64(text) else { throw StorageError(.damaged, "the event-id index's mark is \"\(text)\"") }
        return position
    }

    /// The ids `recent` holds for the positions in `range`, which it must hold every one of.
    static func ids(
        in range: ClosedRange<UInt64>, recent: Table<UInt64, String>, in txn: ReadTransaction
    ) throws -> [(position: UInt64, id: UTF8Key)] {
        var ids: [(position: UInt64, id: UTF8Key)] = []
        ids.reserveCapacity(Int(clamping: range.count))
        try IndexTail.forEachPosition(in: range, of: recent, in: txn, missing: missing) { position, value in
            ids.append((position, UTF8Key(try String(lmdbBytes: value))))
        }
        return ids
    }

    private static func missing(_ position: UInt64) -> StorageError {
        StorageError(.damaged, "the event-id index lacks the id of the event at \(position)", position: position)
    }

    /// Puts the ids into `events`, in key order.
    /// - Throws: `StorageError.damaged` for an id `events` holds already.
    static func put(_ ids: [(position: UInt64, id: UTF8Key)], in events: Table<String, UInt64>, _ write: WriteTransaction) throws {
        for (position, id) in ids.sorted(by: { $0.id < $1.id }) {
            guard try write.insert(position, in: events, forKey: id.string) else {
                throw StorageError(.damaged, "the event-id index already holds \"\(id)\", appended again at \(position)", position: position)
            }
        }
    }

    /// The ids of the tail that this process has read, shared by its transactions: an entry
    /// never changes once committed (until it moves to `events`, where a lookup finds it
    /// first), so an id read in one transaction holds in every transaction that sees its
    /// position.
    final class TailIDs: Sendable {
        private struct Tail {
            /// The mark when the ids were read: none is at or before it.
            var mark: UInt64 = 0
            /// Every id after `mark` through this position is in `positions`.
            var readThrough: UInt64 = 0
            var positions: [UTF8Key: UInt64] = [:]
        }

        private let tail = Mutex(Tail())

        /// The ids a committed write appended after `mark`, at the positions after `last`: kept
        /// when this process had read the tail through `last` (otherwise they are read later).
        func add(_ ids: [UTF8Key: UInt64], after mark: UInt64, following last: UInt64) {
            tail.withLock { tail in
                guard tail.mark == mark, tail.readThrough == last else { return }
                tail.positions.merge(ids) { _, new in new }
                tail.readThrough = ids.values.max() ?? last
            }
        }

        /// The position of the record with `id` after `mark` through `last`, reading the ids
        /// this process has not read yet; `last` must be committed (an aborted write's ids
        /// would otherwise stay).
        func position(
            of id: UTF8Key, after mark: UInt64, through last: UInt64,
            reading read: (ClosedRange<UInt64>) throws -> [(position: UInt64, id: UTF8Key)]
        ) throws -> UInt64? {
            try tail.withLock { tail in
                if tail.mark != mark {
                    if mark > tail.mark, tail.readThrough >= mark {
                        // Moved to `events`: what was read after the new mark stays.
                        tail.positions = tail.positions.filter { $0.value > mark }
                    } else {
                        // A transaction begun before a move, which reads the ids it moved here.
                        tail.positions = [:]
                        tail.readThrough = mark
                    }
                    tail.mark = mark
                }
                if tail.readThrough < last {
                    for (position, id) in try read(tail.readThrough + 1...last) { tail.positions[id] = position }
                    tail.readThrough = last
                }
                guard let position = tail.positions[id], position <= last else { return nil }
                return position
            }
        }
    }
}
