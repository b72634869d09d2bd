/// The narrow interface between the ledger's domain (rules, projections, codec) and a storage
/// engine. The LMDB backend implements it; a second backend implements the same, and the rules
/// and projections stay as they are.
///
/// Records and snapshots are opaque bytes to the storage (the domain encodes and checks them).
/// What the storage keeps besides the log are the indexes written in the same commit as each
/// record: event id → position, store transaction → the entry holding it, revoked store
/// transactions, and account → positions for history; and, written apart from appends, the
/// snapshots of the projections.
package protocol LedgerStorage: AnyObject, Sendable {
    var isReadOnly: Bool { get }
    /// The format marker this storage writes into a new ledger and requires of an existing one.
    var storageFormat: String { get }
    /// Older format markers this storage still reads: a ledger of one opens read-only, and
    /// `ledger copy` migrates it.
    var readableFormats: [String] { get }
    /// Whether other processes may append to the same ledger (a shared database). The writer
    /// then catches up with their appends inside each write, before it validates anything, and
    /// a full snapshot never removes the snapshots other processes read from.
    var isShared: Bool { get }

    /// Shared storage only: calls `onChange` (from any thread) whenever another process may
    /// have appended, with the last position when it is known, until the storage is closed.
    /// Storage that is not shared never calls it.
    func watchForAppends(_ onChange: @escaping @Sendable (UInt64?) -> Void)

    /// Runs `body` against a consistent snapshot. Buffers handed out are valid only inside.
    func read<R>(_ body: (any LedgerStorageReader) throws -> R) throws -> R

    /// Runs `body` in one atomic write, durable when this returns (unless the storage was opened
    /// without sync). `body` may run more than once (after the storage grew), so it must derive
    /// what it writes from its inputs and the reader it is given. Throwing, or calling
    /// `discard()`, writes nothing.
    ///
    /// `lookups` says what the body's rules will look up (a batch's event ids and store
    /// transactions): a storage whose lookups cost a network round trip fetches them together
    /// with the start of the write; the others ignore it.
    func write<R>(lookingUp lookups: Lookups?, _ body: (any LedgerStorageWriter) throws -> R) throws -> R

    /// Bytes the ledger occupies on disk.
    func sizeOnDisk() -> Int

    /// What this process has read of the account table: one instance per open storage.
    var accountNames: AccountNames { get }

    /// After a forget (`Forgetting`): overwrites the old versions of pages the storage keeps in
    /// its own files, as far as readers of older versions allow; returns how many it
    /// overwrote, nil for a storage that keeps none it can reach (docs/POSTGRES.md says what
    /// PostgreSQL keeps).
    func scrubFreedPages() throws -> Int?

    /// After a long read made of many short ones (a replay, an export): lets go of the memory
    /// the reads mapped in and kept (LMDB's pages of its data file); nothing, for a storage
    /// that maps nothing.
    func letGoOfReadPages()

    func close()
}

extension LedgerStorage {
    package func scrubFreedPages() throws -> Int? { nil }

    package func letGoOfReadPages() {}

    /// A write with nothing to look up ahead.
    package func write<R>(_ body: (any LedgerStorageWriter) throws -> R) throws -> R {
        try write(lookingUp: nil, body)
    }
}

/// Tells recorded catalogs apart cheaply: the first position the newest governs, and its
/// size. A catalog grown before any event is recorded at the same position as the one it
/// replaces; it is larger, since catalogs only grow and their JSON is canonical.
package struct CatalogVersion: Sendable, Hashable {
    package var effectiveFrom: UInt64
    package var size: Int

    package init(effectiveFrom: UInt64, size: Int) {
        self.effectiveFrom = effectiveFrom
        self.size = size
    }
}

package struct StorageCounts: Sendable, Hashable {
    package var records: Int
    package var eventIDs: Int
    package var transactions: Int
    package var revocations: Int
    package var historyEntries: Int
    /// Customers (`appTransactionId`) with an account.
    package var appTransactions: Int
    /// Rows of the account table (handle ↔ account id).
    package var accountHandles: Int
    /// Proofs kept apart from their records.
    package var proofs: Int

    package init(
        records: Int, eventIDs: Int, transactions: Int, revocations: Int, historyEntries: Int, appTransactions: Int = 0,
        accountHandles: Int = 0, proofs: Int = 0
    ) {
        self.records = records
        self.eventIDs = eventIDs
        self.transactions = transactions
        self.revocations = revocations
        self.historyEntries = historyEntries
        self.appTransactions = appTransactions
        self.accountHandles = accountHandles
        self.proofs = proofs
    }
}

/// The ledger's clock: the log had reached `position` at `time` by the writer's clock. The
/// writer records one with each commit (at its last position) and when time passes with nothing
/// to append (a tick); ordered by position, then time. The change feed reads it to place time
/// changes among commits (docs/FEEDS.md), so a feed derived again from storage is the same.
package struct ClockReading: Sendable, Hashable, Comparable {
    package var position: UInt64
    package var time: Timestamp

    package init(position: UInt64, time: Timestamp) {
        self.position = position
        self.time = time
    }

    package static func < (lhs: ClockReading, rhs: ClockReading) -> Bool {
        (lhs.position, lhs.time) < (rhs.position, rhs.time)
    }
}


package protocol LedgerStorageReader {
    /// The position of the last record; 0 when the log is empty.
    func lastPosition() throws -> UInt64

    /// Visits the records from `start` through `end` (inclusive) in order, while `body` returns
    /// true. `body` gets each record's key and bytes; it must check that keys run without a gap.
    func forEachRecord(from start: UInt64, through end: UInt64, _ body: (UInt64, UnsafeRawBufferPointer) throws -> Bool) throws
    /// Calls `body` with the record at `position`; false when there is none.
    func record(at position: UInt64, _ body: (UnsafeRawBufferPointer) throws -> Void) throws -> Bool
    /// Calls `body` with the position and record of each of `positions` the log holds, in
    /// ascending order, each once: in one query where the storage is remote.
    func records(at positions: [UInt64], _ body: (UInt64, UnsafeRawBufferPointer) throws -> Void) throws

    func position(ofEventID id: String) throws -> UInt64?
    /// `position(ofEventID:)` among the records through `last` only, reading none after it
    /// (`verify`, which walks the log in order, finds a damaged record at its own position).
    func position(ofEventID id: String, through last: UInt64) throws -> UInt64?
    func holder(ofTransaction transaction: String) throws -> TransactionHolder?
    /// `holder(ofTransaction:)` of each of `transactions` that has one, by transaction
    /// (compared by their bytes): in one query where the storage is remote.
    func holders(ofTransactions transactions: [UTF8Key]) throws -> [UTF8Key: TransactionHolder]
    /// The position of the first revocation of `transaction`.
    func revocation(ofTransaction transaction: String) throws -> UInt64?
    /// `revocation(ofTransaction:)` of each of `transactions` that has one, by transaction
    /// (compared by their bytes): in one query where the storage is remote.
    func revocations(ofTransactions transactions: [UTF8Key]) throws -> [UTF8Key: UInt64]
    func forEachHolder(_ body: (String, TransactionHolder) throws -> Void) throws
    func forEachRevocation(_ body: (String, UInt64) throws -> Void) throws

    /// Positions of the account's events after `position`, at most `limit`, in order.
    func positions(ofAccount account: String, after position: UInt64, limit: Int) throws -> [UInt64]
    func hasHistoryEntry(account: String, position: UInt64) throws -> Bool
    /// For each of the accounts `handles` name, the position of its newest event at or before
    /// `last`; an account with none is left out. In one query where the storage is remote.
    func newestPositions(ofAccounts handles: [UInt64], through last: UInt64) throws -> [UInt64: UInt64]
    /// How many accounts have at least one event.
    func accountCount() throws -> Int
    /// How many store transactions the transaction index holds, when the backend knows it
    /// without a scan; nil otherwise. A hint: a replay sizes its tables by it.
    func transactionCountHint() throws -> Int?

    /// The catalogs recorded so far, oldest first, each with the first position it governs.
    func catalogs() throws -> [(effectiveFrom: UInt64, json: [UInt8])]
    /// Which catalog is the newest, without reading it; nil without one.
    func newestCatalogVersion() throws -> CatalogVersion?
    /// The storage format marker; nil for a storage that holds no ledger yet.
    func formatMarker() throws -> String?
    /// The position of the newest `forgotten` record; 0 when no one was forgotten. A snapshot
    /// that another process began before it captured states that may name the forgotten id.
    func lastForgetPosition() throws -> UInt64
    func counts() throws -> StorageCounts

    /// The clock readings after `after` (all when nil), in order, at most `limit`. A ledger
    /// written before the clock was kept has none until its first writable open.
    func clockReadings(after: ClockReading?, limit: Int) throws -> [ClockReading]
    /// The greatest clock reading; nil without one.
    func lastClockReading() throws -> ClockReading?

    /// What a consumer of the feed stored under `key` (a webhook endpoint's progress); nil
    /// when nothing is.
    func feedState(_ key: String) throws -> [UInt8]?
    /// The account of the first store report that named this `appTransactionId` (Apple's id of
    /// a customer's copy of the app), nil when none did.
    func account(ofAppTransaction appTransaction: String) throws -> String?
    /// Every value stored under a key that starts with `prefix`, in key order (by bytes).
    func feedStates(prefix: String) throws -> [(key: String, value: [UInt8])]
    /// The same from the key `first` on (inclusive; the prefix itself when `first` sorts
    /// before it), at most `limit`.
    func feedStates(prefix: String, from first: String, limit: Int) throws -> [(key: String, value: [UInt8])]
    /// The values stored under those of `keys` that have one, by key.
    func feedStates(keys: [String]) throws -> [String: [UInt8]]

    // MARK: The account table

    /// Rows of the account table from `handle` on, in handle order, at most `limit`.
    func accountNames(from handle: UInt64, limit: Int) throws -> [(handle: UInt64, account: String)]
    /// The rows of those of `handles` (ascending) the account table holds.
    func accountNames(handles: [UInt64]) throws -> [(handle: UInt64, account: String)]
    /// The handle the account table gives `account`; nil when it has none.
    func accountHandle(of account: String) throws -> UInt64?
    /// The greatest handle in the account table; 0 when it is empty.
    func lastAccountHandle() throws -> UInt64
    /// The proof (Apple's JWS) the record at `position` keeps apart; nil when none is stored.
    func proof(at position: UInt64) throws -> String?
    /// The positions of every proof stored, in order.
    func proofPositions() throws -> [UInt64]

    // MARK: Snapshots

    /// Every snapshot header, oldest first, by the position it reflects.
    func snapshotHeaders() throws -> [(position: UInt64, bytes: [UInt8])]
    /// The position of the newest snapshot header, without reading it; nil without one.
    func newestSnapshotPosition() throws -> UInt64?
    /// Calls `body` with the newest stored state of `account` written at or before `position`,
    /// and the position it was written at; returns nil when there is none.
    func accountState<R>(_ account: String, atOrBefore position: UInt64, _ body: (UInt64, UnsafeRawBufferPointer) throws -> R) throws -> R?
    /// The positions at which states of `account` were written, in order.
    func accountStateVersions(_ account: String) throws -> [UInt64]
    /// `accountStateVersions` of each of `accounts`, in their order: in one query where the
    /// storage is remote.
    func accountStateVersions(of accounts: [String]) throws -> [[UInt64]]
    /// Visits every stored account state: account, version, bytes; by account, then version.
    func forEachAccountState(_ body: (String, UInt64, UnsafeRawBufferPointer) throws -> Void) throws
}

extension LedgerStorageReader {
    package func transactionCountHint() throws -> Int? { nil }

    /// An index that reads no record to answer.
    package func position(ofEventID id: String, through last: UInt64) throws -> UInt64? {
        try position(ofEventID: id).flatMap { $0 <= last ? $0 : nil }
    }

    /// One lookup per handle: what an embedded storage costs nothing more for.
    package func accountNames(handles: [UInt64]) throws -> [(handle: UInt64, account: String)] {
        try handles.compactMap { handle in
            try accountNames(from: handle, limit: 1).first.flatMap { $0.handle == handle ? $0 : nil }
        }
    }

    /// One lookup per position: what an embedded storage costs nothing more for.
    package func records(at positions: [UInt64], _ body: (UInt64, UnsafeRawBufferPointer) throws -> Void) throws {
        for position in Set(positions).sorted() {
            _ = try record(at: position) { try body(position, $0) }
        }
    }

    /// One lookup per transaction: what an embedded storage costs nothing more for.
    package func holders(ofTransactions transactions: [UTF8Key]) throws -> [UTF8Key: TransactionHolder] {
        var found: [UTF8Key: TransactionHolder] = [:]
        for transaction in transactions {
            if let holder = try holder(ofTransaction: transaction.string) { found[transaction] = holder }
        }
        return found
    }

    /// One lookup per transaction: what an embedded storage costs nothing more for.
    package func revocations(ofTransactions transactions: [UTF8Key]) throws -> [UTF8Key: UInt64] {
        var found: [UTF8Key: UInt64] = [:]
        for transaction in transactions {
            if let position = try revocation(ofTransaction: transaction.string) { found[transaction] = position }
        }
        return found
    }

    /// One lookup per key: what an embedded storage costs nothing more for.
    package func feedStates(keys: [String]) throws -> [String: [UInt8]] {
        var values: [String: [UInt8]] = [:]
        for key in keys {
            if let value = try feedState(key) { values[key] = value }
        }
        return values
    }

    /// One lookup per account: what an embedded storage costs nothing more for.
    package func accountStateVersions(of accounts: [String]) throws -> [[UInt64]] {
        try accounts.map { try accountStateVersions($0) }
    }
}

package protocol LedgerStorageWriter: LedgerStorageReader {
    /// Appends the record at `position` (the next one) and indexes its event id and account.
    /// The account table names `account` by then (`putAccountName`, earlier in the same write
    /// or before it): a backend may index the history by handle. The record is the ledger's
    /// encoding of an event with that id and that account's handle (`LogRecordCodec`): a backend
    /// may read them from it (the LMDB backend reads its indexes' newest entries so).
    func append(record: [UInt8], at position: UInt64, eventID: String, account: String) throws
    /// Records which entry holds `transaction`.
    func setHolder(_ holder: TransactionHolder, ofTransaction transaction: String) throws
    /// Records the first revocation of `transaction`.
    func setRevocation(_ position: UInt64, ofTransaction transaction: String) throws
    /// Adds a row to the account table: `handle` (the next one) names `account`.
    func putAccountName(_ account: String, handle: UInt64) throws
    /// Records the position of a `forgotten` record, in its write (`lastForgetPosition`).
    func setLastForgetPosition(_ position: UInt64) throws
    /// Stores the proof of the record appended at `position` (in the same write).
    func putProof(_ proof: String, at position: UInt64) throws
    /// Removes the proof of the record at `position` (a forgotten customer's).
    func deleteProof(at position: UInt64) throws
    /// Forgetting (`Forgetting`): the account table's `handle` names `new` from now on and
    /// `old` has no handle; every index that names `old` (history, the transactions' holders,
    /// the customers' app transactions) names `new` instead. Stored account states are the
    /// caller's.
    func renameAccount(handle: UInt64, from old: String, to new: String) throws
    /// Records `account` as the customer of `appTransaction`, unless an account already is (the
    /// first report that named it decides).
    func claimAppTransaction(_ appTransaction: String, for account: String) throws
    /// Forgetting (`Forgetting`): `appTransaction` names a forgotten customer, so no account is
    /// its customer any more (a later report naming it starts over); nothing when none was.
    func forgetAppTransaction(_ appTransaction: String) throws
    /// Records a reading of the ledger's clock (`ClockReading`).
    func recordClock(_ reading: ClockReading) throws
    /// Stores (or, with nil, removes) a feed consumer's value (`feedState`).
    func setFeedState(_ key: String, _ value: [UInt8]?) throws
    func recordCatalog(_ json: [UInt8], effectiveFrom position: UInt64) throws
    func setFormatMarker(_ marker: String) throws

    func putSnapshotHeader(_ bytes: [UInt8], position: UInt64) throws
    func deleteSnapshotHeader(position: UInt64) throws
    func putAccountState(_ bytes: [UInt8], account: String, version: UInt64) throws
    func deleteAccountState(account: String, version: UInt64) throws
    /// Removes every snapshot and stored account state.
    func removeAllSnapshots() throws

    /// Ends the write without committing anything.
    func discard()

}
