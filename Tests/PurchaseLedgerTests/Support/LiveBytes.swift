import Foundation
import LMDB
@testable import PurchaseLedger
@testable import PurchaseLedgerLMDB
import LedgerTestSupport

/// Where in the data file LMDB keeps a live record or index key: the address LMDB hands out,
/// minus where the process mapped the file (read from /proc/self/maps). Older copies of a page
/// may linger in freed pages; damage to the live one is what a reader meets.
enum LiveBytes {
    /// The file offset of the record at `position`.
    static func record(at position: UInt64, in directory: String) throws -> Int {
        try withStorage(directory) { storage in
            try storage.environment.read { txn in
                let reader = LMDBLedgerStorage.Reader(txn: txn, tables: storage.tables, tailIDs: .init())
                var address = 0
                _ = try reader.record(at: position) { bytes in address = Int(bitPattern: bytes.baseAddress!) }
                return try offset(of: address, in: directory)
            }
        }
    }

    /// The file offset of `id` in the event-id index: a key of `events` (an id of the tail is
    /// only in its record: `moveIndexTail` first).
    static func eventID(_ id: String, in directory: String) throws -> Int {
        try withStorage(directory) { storage in
            try storage.environment.read { txn in
                let indexed = try txn.withCursor(storage.tables.events) { cursor in
                    try cursor.seek(exactly: id).map { Int(bitPattern: $0.key.baseAddress!) }
                }
                guard let indexed else { throw TestFailure("no index entry for \(id)") }
                return try offset(of: indexed, in: directory)
            }
        }
    }

    /// Moves the indexes' tail (`IndexTail`) into `events` and `accountHistory` now, as the
    /// append that makes it long does.
    static func moveIndexTail(in directory: String) throws {
        try withStorage(directory) { storage in
            guard case .byHandle(let indexed, _) = storage.tables.history else { throw TestFailure("not a history by handle") }
            try storage.write { writer in
                let lmdb = writer as! LMDBLedgerStorage.Writer
                let mark = try EventIDIndex.indexedThrough(storage.tables.meta, in: lmdb.txn) ?? 0
                try IndexTail.move(
                    after: mark, through: try lmdb.lastPosition(), log: storage.tables.log, events: storage.tables.events,
                    history: indexed, meta: storage.tables.meta, in: lmdb.txn as! LMDB.WriteTransaction)
            }
        }
    }

    private static func withStorage<R>(_ directory: String, _ body: (LMDBLedgerStorage) throws -> R) throws -> R {
        let storage = try LMDBLedgerStorage(directory: directory, configuration: .init())
        defer { storage.close() }
        return try body(storage)
    }

    private static func offset(of address: Int, in directory: String) throws -> Int {
        // /proc files report no size: read to the end.
        let maps = String(decoding: try FileBytes.contents(of: "/proc/self/maps"), as: UTF8.self)
        for line in maps.split(separator: "\n") where line.hasSuffix("/data.mdb") && line.contains(directory) {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            let range = fields[0].split(separator: "-").map { Int($0, radix: 16)! }
            let fileOffset = Int(fields[2], radix: 16)!
            if address >= range[0] && address < range[1] { return address - range[0] + fileOffset }
        }
        throw TestFailure("the address is not in a mapping of \(directory)/data.mdb")
    }
}
