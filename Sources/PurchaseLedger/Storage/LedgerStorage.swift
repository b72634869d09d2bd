/// The narrow interface between the ledger's domain (rules, projections, codec) and a storage
/// engine. The LMDB backend implements it; a second backend implements the same, and the rules
/// and projections stay as they are.
///
/// Records are opaque bytes to the storage (the domain encodes and checks them). What the
/// storage keeps besides the log are the indexes the rules consult inside a write: event id →
/// position, store transaction → holding entry, and account → positions for history.
package protocol LedgerStorage: AnyObject, Sendable {
    var isReadOnly: Bool { get }

    /// Runs `body` against a consistent snapshot. Buffers handed out are valid only inside.
    func read<R>(_ body: (any LedgerStorageReader) throws -> R) throws -> R

    /// Runs `body` in one atomic write, durable when this returns (unless the storage was opened
    /// without sync). `body` may run more than once (after the storage grew), so it must derive
    /// what it writes from its inputs and the reader it is given. Throwing, or calling
    /// `discard()`, writes nothing.
    func write<R>(_ body: (any LedgerStorageWriter) throws -> R) throws -> R

    /// Bytes the ledger occupies on disk.
    func sizeOnDisk() -> Int

    func close()
}

package struct StorageCounts: Sendable, Hashable {
    package var records: Int
    package var eventIDs: Int
    package var transactions: Int
    package var historyEntries: Int
}

package protocol LedgerStorageReader {
    /// The position of the last record; 0 when the log is empty.
    func lastPosition() throws -> UInt64

    /// Visits the records from `start` through `end` (inclusive) in order, while `body` returns
    /// true. `body` gets each record's key and bytes; it must check that keys run without a gap.
    func forEachRecord(from start: UInt64, through end: UInt64, _ body: (UInt64, UnsafeRawBufferPointer) throws -> Bool) throws

    func position(ofEventID id: String) throws -> UInt64?
    func holder(ofTransaction transaction: String) throws -> EntryReference?
    /// Positions of the account's events after `position`, at most `limit`, in order.
    func positions(ofAccount account: String, after position: UInt64, limit: Int) throws -> [UInt64]
    func hasHistoryEntry(account: String, position: UInt64) throws -> Bool
    /// Calls `body` with the record at `position`; false when there is none.
    func record(at position: UInt64, _ body: (UnsafeRawBufferPointer) throws -> Void) throws -> Bool
    /// How many accounts have at least one event.
    func accountCount() throws -> Int

    /// The catalogs recorded so far, oldest first, each with the first position it governs.
    func catalogs() throws -> [(effectiveFrom: UInt64, json: [UInt8])]
    /// The storage format marker; nil for a storage that holds no ledger yet.
    func formatMarker() throws -> String?
    func counts() throws -> StorageCounts
}

package protocol LedgerStorageWriter: LedgerStorageReader {
    /// Appends the record at `position` (the next one) and indexes its event id and account.
    func append(record: [UInt8], at position: UInt64, eventID: String, account: String) throws
    /// Records that `entry` holds `transaction`.
    func setHolder(_ entry: EntryReference, ofTransaction transaction: String) throws
    func recordCatalog(_ json: [UInt8], effectiveFrom position: UInt64) throws
    func setFormatMarker(_ marker: String) throws
    /// Ends the write without committing anything.
    func discard()
}
