import LMDB
import PurchaseLedger

/// The LMDB backend's newest clock readings (`ClockReading`), kept under `key` in LMDB's main
/// table instead of in the `clock` table.
///
/// The writer records a reading with every commit. In `clock`, a B-tree two or three deep once
/// it holds a few thousand, that wrote two or three pages a commit. The main table holds the
/// other tables' roots, so a commit rewrites its one page whatever it writes: the tail costs
/// no page of its own. (It was in `meta` before, a page of its own each commit.) The tail holds
/// fewer than `capacity` readings, each the 40 lowercase hex digits of its `clock` key
/// (`LMDBLedgerStorage.clockKey`), oldest first; the commit that would make it `capacity`
/// moves it into `clock` and removes `key`, and so does one that records a reading before the
/// tail's newest. Every reading of the tail is after every reading of `clock`, so readers read
/// `clock`, then the tail.
///
/// A ledger written before has no `key` (an empty tail) and needs no move. Readers look the
/// tail up in each read transaction, so a process that opened the ledger before another began
/// to keep a tail reads it too. Older versions wrote elsewhere, and the same format marker lets
/// them open the ledger:
/// - the version before this one kept the tail in `meta`: readers read it between `clock` and
///   the main table's tail;
/// - versions before the tail put their readings in `clock`, after positions a tail may hold.
/// A tail not after what comes before it is damage to readers, until this version next opens
/// the ledger to write (`moveWhatOlderVersionsWrote`). An older version reading a ledger this
/// one wrote does not see the main table's tail: it misses the newest readings.
enum ClockTail {
    static let key = "clockTail"
    /// Small enough that the value stays inside the main table's page: LMDB puts a value of
    /// more than about 2,000 bytes (with 4 KiB pages) on pages of its own, which a commit would
    /// write too. The tables' names and roots take about 1,300 bytes of that page, a full tail
    /// about 1,300 more (a test checks that the page stays one).
    static let capacity = 32
    private static let digitsPerReading = 40

    /// The readings of the tail in `table` (the main table, or `meta` for the version before),
    /// oldest first; empty when it holds none.
    /// - Throws: `StorageError.damaged` for a tail that is not whole readings of hex digits,
    ///   holds a reading no writer records or readings out of order, or is not after `newest`
    ///   (what a reader read before it).
    static func readings(_ table: Table<String, String>, after newest: ClockReading?, in txn: ReadTransaction) throws -> [ClockReading] {
        let tail = try txn.withValue(in: table, forKey: key) { text in try decode(text) } ?? []
        if let oldest = tail.first, let newest, oldest <= newest {
            throw StorageError(.damaged, "the clock's tail is not after the clock (an older version wrote readings?): open the ledger to write once")
        }
        return tail
    }

    /// The newest reading of the tail in `table`; nil when it holds none.
    static func newest(_ table: Table<String, String>, in txn: ReadTransaction) throws -> ClockReading? {
        try txn.withValue(in: table, forKey: key) { text in try decode(text, last: true).last } ?? nil
    }

    /// Records `reading` after the tail's newest, or in `clock` when it is not after it (the
    /// tail moved first, so that it stays after `clock`); nothing when it is the newest
    /// already. Moves the tail into `clock` when it would hold `capacity` readings. Decodes the
    /// tail's newest reading only, unless it moves; reads `clock`'s newest only when the tail
    /// is empty: the writer holds the writer lock, and took what older versions left out of
    /// order into `clock` when it took it (`moveWhatOlderVersionsWrote`), so the tail is after
    /// `clock`.
    static func record(
        _ reading: ClockReading, clock: Table<[UInt8], EmptyValue>, main: Table<String, String>, in write: WriteTransaction
    ) throws {
        var text = try write.withValue(in: main, forKey: key) { [UInt8]($0) } ?? []
        var newestInClock: ClockReading?
        if !text.isEmpty {
            let newest = try text.withUnsafeBytes { try decode($0, last: true)[0] }
            if reading == newest { return }
            if reading < newest {
                try move(text, to: clock, from: main, in: write)
                text = []
                newestInClock = newest
            }
        }
        if text.isEmpty, let newestInClock = try newestInClock ?? newest(in: clock, write), reading <= newestInClock {
            try write.put(EmptyValue(), in: clock, forKey: LMDBLedgerStorage.clockKey(reading))
            return
        }
        appendDigits(of: reading, to: &text)
        if text.count >= capacity * digitsPerReading {
            try move(text, to: clock, from: main, in: write)
        } else {
            try write.put(String(decoding: text, as: UTF8.self), in: main, forKey: key)
        }
    }

    /// Moves what older versions left out of order into `clock`, once, by the process that
    /// takes the writer lock (no other version writes while it holds it): the tail the version
    /// before kept in `meta`, and then the main table's, when it is not after `clock`.
    static func moveWhatOlderVersionsWrote(
        meta: Table<String, String>, main: Table<String, String>, clock: Table<[UInt8], EmptyValue>, in write: WriteTransaction
    ) throws {
        if let legacy = try write.withValue(in: meta, forKey: key, { [UInt8]($0) }) {
            try move(legacy, to: clock, from: meta, in: write)
        }
        // Decoded whole, so that a malformed tail fails the open, not each commit after it.
        guard let text = try write.withValue(in: main, forKey: key, { [UInt8]($0) }),
              let oldest = try text.withUnsafeBytes({ try decode($0) }).first,
              let newestInClock = try newest(in: clock, write) else { return }
        if oldest <= newestInClock { try move(text, to: clock, from: main, in: write) }
    }

    /// `clock`'s newest reading; nil when it is empty.
    static func newest(in clock: Table<[UInt8], EmptyValue>, _ txn: ReadTransaction) throws -> ClockReading? {
        try txn.withCursor(clock) { cursor in
            try cursor.last().map { entry in try LMDBLedgerStorage.clockReading(fromKey: entry.key) }
        }
    }

    /// Puts the readings of `text` into `clock` and removes the tail from `table`.
    private static func move(
        _ text: [UInt8], to clock: Table<[UInt8], EmptyValue>, from table: Table<String, String>, in write: WriteTransaction
    ) throws {
        for reading in try text.withUnsafeBytes({ try decode($0) }) {
            try write.put(EmptyValue(), in: clock, forKey: LMDBLedgerStorage.clockKey(reading))
        }
        _ = try write.delete(in: table, key: key)
    }

    private static func appendDigits(of reading: ClockReading, to text: inout [UInt8]) {
        let digits = Array("0123456789abcdef".utf8)
        for byte in LMDBLedgerStorage.clockKey(reading) {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0f)])
        }
    }

    /// The readings of `text`, in order; only its first or its last when asked.
    private static func decode(_ text: UnsafeRawBufferPointer, first: Bool = false, last: Bool = false) throws -> [ClockReading] {
        guard text.count % digitsPerReading == 0, text.count > 0 else {
            throw StorageError(.damaged, "the clock's tail holds \(text.count) bytes, not whole readings")
        }
        let end = first ? digitsPerReading : text.count
        let start = last ? text.count - digitsPerReading : 0
        var readings: [ClockReading] = []
        readings.reserveCapacity((end - start) / digitsPerReading)
        var key = [UInt8](repeating: 0, count: digitsPerReading / 2)
        for offset in stride(from: start, to: end, by: digitsPerReading) {
            for index in key.indices {
                guard let high = hexValue(text[offset + 2 * index]), let low = hexValue(text[offset + 2 * index + 1]) else {
                    throw StorageError(.damaged, "the clock's tail holds a byte that is not a lowercase hex digit")
                }
                key[index] = high << 4 | low
            }
            let reading = try key.withUnsafeBytes { try LMDBLedgerStorage.clockReading(fromKey: $0) }
            if let previous = readings.last, reading <= previous {
                throw StorageError(.damaged, "the clock's tail holds readings out of order")
            }
            readings.append(reading)
        }
        return readings
    }

    private static func hexValue(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        default: nil
        }
    }
}
