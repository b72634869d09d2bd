import LMDB
import PurchaseLedger
import Synchronization

/// The embedded backend: one LMDB environment in the ledger's directory.
///
/// Tables, all written in the same transaction as the record they index:
/// - `log`: position (u64 big-endian, from 1, appended with `MDB_APPEND`) → record bytes;
/// - `events`: event id → position (idempotency; `EventIDIndex`), up to the mark: the records
///   after it are the tail of this index and the history's (`IndexTail`);
/// - `transactions`: store transaction id → the entry holding it (account, payment), since when,
///   and whether it credited a consumable;
/// - `revocations`: store transaction id → position of its first revocation;
/// - `accountHistory`: an account's events in order (`AccountHistory`), up to the mark;
/// - `recentEvents` and `recentHistory`: where ledgers written before `IndexTail` kept the
///   tails, emptied when such a ledger is first opened to write;
/// - `catalogs`: first position governed → catalog JSON (the catalog in force, and its past);
/// - `meta`: `format` → the storage format marker;
/// - `clock`: position (u64 big-endian), seconds (i64 + 2^63, big-endian), nanoseconds (u32
///   big-endian) → nothing: the ledger's clock readings, in order (`ClockReading`), but for
///   the newest, which LMDB's main table holds (`ClockTail`);
/// - `feeds`: a key of a feed's consumer → its value (a webhook endpoint's progress);
/// - `appTransactions`: Apple's `appTransactionId` → the account of the first report naming it;
/// - `accountNames`: handle (u64 big-endian, from 1, appended) → account id, and
///   `accountHandles`: account id → handle: the account table records of format 2 refer to;
/// - `proofs`: position (u64 big-endian, appended) → the proof (Apple's JWS) that record keeps
///   apart.
///
/// - `scrub`: empty; filled and emptied again after a forget (`scrubFreedPages`).
/// - LMDB's main table, whose keys are these tables' names, also holds `clockTail` (`ClockTail`).
/// - `meta` also holds `lastForget` (the position of the newest `forgotten` record),
///   `eventIDsIndexedThrough` (the indexes' mark), `indexTail` (`IndexTail`), the clock's tail
///   the version before kept there until the first open to write (`ClockTail`), and
///   `rewritePending` from a forget until the file is rewritten (`DataFileRewrite`).
///
/// And, written apart from appends by the snapshot policy:
/// - `snapshots`: position → snapshot header;
/// - `accountStates`: account length, account, position → the account's encoded state then.
final class LMDBLedgerStorage: LedgerStorage, @unchecked Sendable {
    static let dataFileName = "data.mdb"
    static let formatMarker = "purchase-ledger/lmdb/2"
    /// Ledgers written before account handles: read-only, migrated by `ledger copy`.
    static let formatOneMarker = "purchase-ledger/lmdb/1"
    /// The key of `meta` holding the position of the newest `forgotten` record.
    static let lastForgetKey = "lastForget"

    /// Every table, by name: what `DataFileRewrite` copies.
    static let tableNames = [
        "log", "events", "recentEvents", "transactions", "revocations", "history", "recentHistory", "accountHistory", "snapshots", "accountStates", "catalogs", "meta", "clock",
        "feeds", "appTransactions", "accountNames", "accountHandles", "proofs", "scrub",
    ]

    let environment: Environment
    let isReadOnly: Bool
    var storageFormat: String { Self.formatMarker }
    var readableFormats: [String] { [Self.formatOneMarker] }
    let accountNames = AccountNames()
    /// The ids of the log's tail this process has read (`EventIDIndex`).
    private let tailIDs = EventIDIndex.TailIDs()
    /// One process writes an LMDB ledger (`writer.lock` enforces it).
    var isShared: Bool { false }
    private let claim: OpenEnvironments.Claim
    /// `writer.lock`, held while this process may append (`LedgerDirectory.open`).
    private let writerLock = Mutex<ExclusiveFileLock?>(nil)
    private let maximumSize: Int?
    private let directory: String
    let tables: Tables

    struct Tables {
        var log: Table<UInt64, [UInt8]>
        var events: Table<String, UInt64>
        /// Nil in a read-only ledger written before it (whose `events` holds every id).
        var recentEvents: Table<UInt64, String>?
        var transactions: Table<[UInt8], [UInt8]>
        var revocations: Table<[UInt8], UInt64>
        var history: AccountHistory.Layout
        var snapshots: Table<UInt64, [UInt8]>
        var accountStates: Table<[UInt8], [UInt8]>
        var catalogs: Table<UInt64, [UInt8]>
        var meta: Table<String, String>
        /// LMDB's main table (the other tables' names): the clock's tail (`ClockTail`).
        var main: Table<String, String>
        /// Nil in a read-only ledger written before the clock was kept.
        var clock: Table<[UInt8], EmptyValue>?
        /// Nil in a read-only ledger written before feeds were kept.
        var feeds: Table<String, [UInt8]>?
        /// Nil in a read-only ledger written before app transactions were kept.
        var appTransactions: Table<String, String>?
        /// Nil in a read-only ledger of format 1.
        var accountNames: Table<UInt64, String>?
        var accountHandles: Table<String, UInt64>?
        var proofs: Table<UInt64, String>?
        /// Empty between scrubs (`scrubFreedPages`); nil in a read-only ledger without it.
        var scrub: Table<UInt64, [UInt8]>?
    }

    init(directory: String, configuration: Environment.Configuration) throws {
        self.directory = directory
        isReadOnly = configuration.readOnly
        maximumSize = configuration.maximumMapSize
        claim = try OpenEnvironments.claim(directory)
        do {
            environment = try Environment(directory: directory, configuration: configuration)
        } catch {
            claim.release()
            throw error
        }
        do {
            let history = try Self.historyLayout(environment: environment, readOnly: configuration.readOnly)
            tables = try environment.openTables { opener in
                Tables(
                    log: try opener.table("log"),
                    events: try opener.table("events"),
                    recentEvents: try opener.tableIfPresent("recentEvents"),
                    transactions: try opener.table("transactions"),
                    revocations: try opener.table("revocations"),
                    history: history,
                    snapshots: try opener.table("snapshots"),
                    accountStates: try opener.table("accountStates"),
                    catalogs: try opener.table("catalogs"),
                    meta: try opener.table("meta"),
                    main: try opener.mainTable(),
                    clock: try opener.tableIfPresent("clock"),
                    feeds: try opener.tableIfPresent("feeds"),
                    appTransactions: try opener.tableIfPresent("appTransactions"),
                    accountNames: try opener.tableIfPresent("accountNames"),
                    accountHandles: try opener.tableIfPresent("accountHandles"),
                    proofs: try opener.tableIfPresent("proofs"),
                    scrub: try opener.tableIfPresent("scrub"))
            }
            if !configuration.readOnly { try Self.moveIndexTail(environment: environment, tables: tables, onlyANewLedger: true) }
        } catch {
            environment.close()
            claim.release()
            throw error
        }
    }

    deinit {
        close()
    }

    /// How the ledger's history is laid out; a format 2 ledger written before `AccountHistory`
    /// and opened to write is moved to its tables first, in one write.
    private static func historyLayout(environment: Environment, readOnly: Bool) throws -> AccountHistory.Layout {
        let (old, indexed, recent, meta, handles) = try environment.openTables { opener in
            (try opener.existingTable("history", key: [UInt8].self, value: EmptyValue.self),
             try opener.tableIfPresent("accountHistory", key: [UInt8].self, value: EmptyValue.self),
             try opener.tableIfPresent("recentHistory", key: UInt64.self, value: UInt64.self),
             try opener.existingTable("meta", key: String.self, value: String.self),
             try opener.existingTable("accountHandles", key: String.self, value: UInt64.self))
        }
        if let old {
            guard !readOnly, let indexed, let recent else { return .byName(old) }
            // Format 1 (refused for writing when the ledger opens) keeps its history by name.
            let migrated = try environment.write { txn -> Bool in
                guard let meta, try txn.value(in: meta, forKey: "format") == formatMarker, let handles else { return false }
                _ = try AccountHistory.migrate(old, handles: handles, to: indexed, in: txn)
                try txn.deleteTable(old)
                // A process that opened the ledger before reads an empty table under the old
                // name: it reads this and refuses instead (`checkHistoryNotMoved`).
                try txn.put(AccountHistory.movedMarker, in: meta, forKey: AccountHistory.movedKey)
                return true
            }
            return migrated ? .byHandle(indexed: indexed, recent: recent) : .byName(old)
        }
        guard let indexed, let recent else { throw StorageError(.damaged, "the ledger has no history index") }
        return .byHandle(indexed: indexed, recent: recent)
    }

    /// A ledger opened to write whose indexes keep their tail in tables of their own (written
    /// before `IndexTail`) moves it, in one write, once this process holds the writer lock (no
    /// other writer then fills those tables); a new ledger (no format, no record) is marked to
    /// read it from the log as it is created. Not a ledger of format 1 (which the open refuses
    /// to write).
    func moveIndexTail() throws {
        try Self.moveIndexTail(environment: environment, tables: tables, onlyANewLedger: false)
    }

    /// Whether an open to write moves what older versions of this format wrote: only in a
    /// ledger of this format (or a new one, or a copy being made); the open refuses any other
    /// afterwards, and must find it as it was.
    private static func movesWhatOlderVersionsWrote(format: String?) -> Bool {
        format == nil || format == formatMarker || format == formatMarker + IncompleteCopy.suffix
    }

    /// What older versions left of the clock out of order, moved into `clock` once this process
    /// holds the writer lock (`ClockTail.moveWhatOlderVersionsWrote`).
    func moveClockTails() throws {
        guard let clock = tables.clock else { return }
        try environment.write { txn in
            guard Self.movesWhatOlderVersionsWrote(format: try txn.value(in: tables.meta, forKey: "format")) else { return }
            try ClockTail.moveWhatOlderVersionsWrote(meta: tables.meta, main: tables.main, clock: clock, in: txn)
        }
    }

    private static func moveIndexTail(environment: Environment, tables: Tables, onlyANewLedger: Bool) throws {
        guard case .byHandle(let indexed, let recentHistory) = tables.history, let recentEvents = tables.recentEvents else { return }
        try environment.write { txn in
            let format = try txn.value(in: tables.meta, forKey: "format")
            if onlyANewLedger, try format != nil || txn.lastKey(tables.log) != nil { return }
            guard movesWhatOlderVersionsWrote(format: format) else { return }
            try IndexTail.migrate(
                log: tables.log, events: tables.events, recentEvents: recentEvents, history: indexed, recentHistory: recentHistory,
                meta: tables.meta, in: txn)
        }
    }

    func read<R>(_ body: (any LedgerStorageReader) throws -> R) throws -> R {
        do {
            return try environment.read { txn in try body(Reader(txn: txn, tables: tables, tailIDs: tailIDs)) }
        } catch {
            throw LMDBErrors.map(error, maximumSize: nil)
        }
    }

    /// Lookups are local reads: nothing to fetch ahead.
    func write<R>(lookingUp lookups: Lookups?, _ body: (any LedgerStorageWriter) throws -> R) throws -> R {
        // LMDB traps on a write transaction in a read-only environment: refuse it here, as
        // every backend does (the storage contract suite checks it).
        guard !isReadOnly else { throw StorageError(.readOnly, "the ledger at \(directory) is open read-only") }
        do {
            var writer: Writer?
            let result = try environment.write { txn in
                let made = Writer(txn: txn, tables: tables, tailIDs: tailIDs)
                writer = made
                return try body(made)
            }
            writer?.committed()
            return result
        } catch let error as LMDBError where error.code == .ioError && Directory.freeBytes(directory).map({ $0 < 1 << 20 }) == true {
            // LMDB reports a write cut short by a full file system as EIO.
            throw StorageError(.storageFull, "the file system holding \(directory) is full; earlier events stay readable", cause: error)
        } catch {
            throw LMDBErrors.map(error, maximumSize: maximumSize)
        }
    }

    func letGoOfReadPages() {
        environment.releaseEveryReadPage()
    }

    /// LMDB copies a page on write and frees the old one, which keeps its bytes in the file until
    /// a later write reuses it: after a forget, old copies of the pages that named the account.
    /// This fills a scratch table with zeroed pages until it has taken every page of the free
    /// list, commits, and empties it: every freed page is overwritten, and the ones freed by
    /// emptying it hold zeros. Only pages no reader still reads can be reused: a page an older
    /// read transaction holds (of this process or another) keeps its bytes until a later scrub.
    func scrubFreedPages() throws -> Int? {
        guard let scrub = tables.scrub, !isReadOnly else { return nil }
        _ = try? environment.clearStaleReaders()
        do {
            let pageSize = try environment.info().pageSize
            // A write reuses only pages freed before the transaction before it (the newest
            // committed one is LMDB's fallback): one commit first, so that the pages the forget
            // freed can be taken.
            try environment.write { txn in try txn.put([0], in: scrub, forKey: 0) }
            let free = try environment.read { try $0.freePageCount() }
            guard free > 0 else { return 0 }
            // Three values a leaf page: a page taken from the free list per three values, and a
            // third more than the list holds, so that none is left.
            let value = [UInt8](repeating: 0, count: pageSize / 4)
            try environment.write { txn in
                for key in 1...UInt64(free * 4 + 16) { try txn.append(value, in: scrub, forKey: key) }
            }
            try environment.write { txn in try txn.removeAll(in: scrub) }
            return free
        } catch {
            throw LMDBErrors.map(error, maximumSize: maximumSize)
        }
    }

    func watchForAppends(_ onChange: @escaping @Sendable (UInt64?) -> Void) {}

    /// Whether a forget left the data file to be rewritten (`DataFileRewrite`).
    func isRewritePending() throws -> Bool {
        do {
            return try environment.read { txn in try txn.contains(tables.meta, key: DataFileRewrite.pendingKey) }
        } catch {
            throw LMDBErrors.map(error, maximumSize: nil)
        }
    }

    func sizeOnDisk() -> Int {
        Directory.fileSize(directory + "/" + Self.dataFileName) ?? 0
    }

    func holdWriterLock(_ lock: ExclusiveFileLock) {
        writerLock.withLock { $0 = lock }
    }

    func close() {
        // The writer lock first: a reopen in this process must not find it still held.
        writerLock.withLock { $0.take() }?.release()
        environment.close()
        claim.release()
    }

    // MARK: Keys

    /// Transaction keys carry a leading byte so that an empty id is still a valid LMDB key.
    static func transactionKey(_ transaction: String) -> [UInt8] {
        var key: [UInt8] = []
        key.reserveCapacity(transaction.utf8.count + 1)
        key.append(0x74)
        key.append(contentsOf: transaction.utf8)
        return key
    }

    /// The account's length (one byte: accounts are at most 128 bytes), then its bytes; nil for
    /// a name too long to be an account.
    static func historyPrefix(_ account: String) -> [UInt8]? {
        guard let length = UInt8(exactly: account.utf8.count) else { return nil }
        var key: [UInt8] = []
        key.reserveCapacity(Int(length) + 9)
        key.append(length)
        key.append(contentsOf: account.utf8)
        return key
    }

    static func historyKey(_ account: String, _ position: UInt64) -> [UInt8]? {
        guard var key = historyPrefix(account) else { return nil }
        withUnsafeBytes(of: position.bigEndian) { key.append(contentsOf: $0) }
        return key
    }

    static func clockKey(_ reading: ClockReading) -> [UInt8] {
        var key: [UInt8] = []
        key.reserveCapacity(20)
        withUnsafeBytes(of: reading.position.bigEndian) { key += $0 }
        withUnsafeBytes(of: (UInt64(bitPattern: reading.time.seconds) ^ (1 << 63)).bigEndian) { key += $0 }
        withUnsafeBytes(of: reading.time.nanoseconds.bigEndian) { key += $0 }
        return key
    }

    static func clockReading(fromKey key: UnsafeRawBufferPointer) throws -> ClockReading {
        guard key.count == 20 else { throw StorageError(.damaged, "the clock holds a key of \(key.count) bytes") }
        let position = UInt64(bigEndian: key.loadUnaligned(fromByteOffset: 0, as: UInt64.self))
        let seconds = Int64(bitPattern: UInt64(bigEndian: key.loadUnaligned(fromByteOffset: 8, as: UInt64.self)) ^ (1 << 63))
        let nanoseconds = UInt32(bigEndian: key.loadUnaligned(fromByteOffset: 16, as: UInt32.self))
        guard nanoseconds < 1_000_000_000 else { throw StorageError(.damaged, "the clock holds a reading of \(nanoseconds) ns") }
        // Only times of years 0000–9999 are ever recorded.
        let time = Timestamp(seconds: seconds, nanoseconds: nanoseconds)
        guard time.isRepresentable else { throw StorageError(.damaged, "the clock holds a reading at \(seconds) s") }
        return ClockReading(position: position, time: time)
    }

    static func encode(_ holder: TransactionHolder) -> [UInt8] {
        var writer = ByteWriter(capacity: 64)
        writer.string(holder.entry.account)
        writer.string(holder.entry.payment)
        writer.varint(holder.position)
        writer.byte(holder.creditsConsumable ? 1 : 0)
        return writer.bytes
    }

    static func decodeHolder(_ bytes: UnsafeRawBufferPointer) throws -> TransactionHolder {
        var reader = ByteReader(bytes)
        let entry = EntryReference(account: try reader.string(), payment: try reader.string())
        let position = try reader.varint()
        let flags = try reader.byte()
        guard flags <= 1, position <= TransactionHolder.maximumPosition, reader.isAtEnd else {
            throw ByteReader.Malformed(reason: "malformed transaction index entry")
        }
        return TransactionHolder(entry: entry, position: position, creditsConsumable: flags == 1)
    }

    /// The transaction id back from a `transactions` or `revocations` key.
    static func transaction(fromKey key: UnsafeRawBufferPointer) throws -> String {
        guard key.first == 0x74 else { throw ByteReader.Malformed(reason: "malformed transaction key") }
        return try String(lmdbBytes: UnsafeRawBufferPointer(rebasing: key[1...]))
    }

    // MARK: Reader and writer

    class Reader: LedgerStorageReader {
        let txn: ReadTransaction
        let tables: Tables
        let tailIDs: EventIDIndex.TailIDs

        init(txn: ReadTransaction, tables: Tables, tailIDs: EventIDIndex.TailIDs) {
            self.txn = txn
            self.tables = tables
            self.tailIDs = tailIDs
        }

        func lastPosition() throws -> UInt64 {
            try txn.lastKey(tables.log) ?? 0
        }

        func forEachRecord(
            from start: UInt64, through end: UInt64, _ body: (UInt64, UnsafeRawBufferPointer) throws -> Bool
        ) throws {
            guard start <= end else { return }
            // The pages read are let go as the scan goes: a replay reads the whole log through
            // the map, and every page it touched would otherwise stay in the process's resident
            // memory (for 1,000,000 events, 230 MB of a 408 MB peak). Every 64 KiB of records,
            // not once a chunk: the log's pages lie among the indexes' (the free list reuses
            // pages), and a fault maps the neighbours of the page it needs too (the kernel's
            // fault-around, and the page cache's large folios), so that a chunk of 4,096
            // records held up to 10 MB of the file resident until its end. The span of the
            // records read since the last time, not the transaction's: the lookups between
            // records (names, proofs; states, read through a cursor, count nothing) go with
            // every read page each time the reads have handed out `releasesReadPagesEvery`
            // (`LedgerDirectory.openStorage`).
            try txn.scan(tables.log, from: start, releasingPagesEvery: 64 << 10) { key, value in
                guard key.count == 8 else {
                    throw StorageError(.damaged, "the log holds a key of \(key.count) bytes")
                }
                let position = try UInt64(lmdbBytes: key)
                guard position <= end else { return false }
                return try body(position, value)
            }
        }

        func position(ofEventID id: String) throws -> UInt64? {
            try committedPosition(ofEventID: id, through: .max)
        }

        /// Reads the tail's records through `last` only (`IndexTail`).
        func position(ofEventID id: String, through last: UInt64) throws -> UInt64? {
            try committedPosition(ofEventID: id, through: last)
        }

        /// The position of `id` among the committed records through `last`.
        private final func committedPosition(ofEventID id: String, through last: UInt64) throws -> UInt64? {
            let mark: UInt64? = switch try tailLayout() {
            case .log(let mark): mark
            case .tables: try EventIDIndex.indexedThrough(tables.meta, in: txn)
            }
            let found = try indexedPosition(ofEventID: id, committedThrough: min(last, try lastPosition()), mark: mark)
            return found.flatMap { $0 <= last ? $0 : nil }
        }

        /// The position of `id` among the records through `last`, all committed: in `events`
        /// through `mark`, in the log's tail after it.
        final func indexedPosition(ofEventID id: String, committedThrough last: UInt64, mark: UInt64?) throws -> UInt64? {
            if let position = try txn.value(in: tables.events, forKey: id) { return position }
            guard let mark, last > mark else { return nil }
            let read: (ClosedRange<UInt64>) throws -> [(position: UInt64, id: UTF8Key)]
            switch try tailLayout() {
            case .log:
                read = { range in try IndexTail.entries(in: range, log: self.tables.log, in: self.txn).map { ($0.position, $0.id) } }
            case .tables:
                guard let recent = tables.recentEvents else { throw StorageError(.damaged, "the ledger has an event-id mark and no recentEvents") }
                read = { range in try EventIDIndex.ids(in: range, recent: recent, in: self.txn) }
            }
            return try tailIDs.position(of: UTF8Key(id), after: mark, through: last, reading: read)
        }

        /// Where this transaction finds the indexes' tail (`IndexTail`), read once.
        final func tailLayout() throws -> IndexTail.Layout {
            if let layout = readLayout { return layout }
            let layout = try IndexTail.layout(tables.meta, in: txn)
            readLayout = layout
            return layout
        }

        /// Set by the writer when it moves the tail.
        final var readLayout: IndexTail.Layout?

        /// How many records the log holds after `mark` (none when the mark is past them: damage
        /// that `counts()` reports).
        private final func tailRecords(after mark: UInt64) throws -> Int {
            let last = try lastPosition()
            return Int(clamping: last - min(mark, last))
        }

        /// The history's tail as this transaction finds it.
        final func historyTail(recent: Table<UInt64, UInt64>) throws -> AccountHistory.Tail {
            switch try tailLayout() {
            case .log(let mark): .log(tables.log, mark: mark)
            case .tables: .table(recent)
            }
        }

        func holder(ofTransaction transaction: String) throws -> TransactionHolder? {
            try txn.withValue(in: tables.transactions, forKey: LMDBLedgerStorage.transactionKey(transaction)) { bytes in
                try LMDBLedgerStorage.decodeHolder(bytes)
            }
        }

        func revocation(ofTransaction transaction: String) throws -> UInt64? {
            try txn.value(in: tables.revocations, forKey: LMDBLedgerStorage.transactionKey(transaction))
        }

        func forEachHolder(_ body: (String, TransactionHolder) throws -> Void) throws {
            try txn.scan(tables.transactions) { key, value in
                try body(try LMDBLedgerStorage.transaction(fromKey: key), try LMDBLedgerStorage.decodeHolder(value))
                return true
            }
        }

        func forEachRevocation(_ body: (String, UInt64) throws -> Void) throws {
            try txn.scan(tables.revocations) { key, value in
                try body(try LMDBLedgerStorage.transaction(fromKey: key), try UInt64(lmdbBytes: value))
                return true
            }
        }

        /// `clock`'s readings, then its tail's (`ClockTail`).
        func clockReadings(after: ClockReading?, limit: Int) throws -> [ClockReading] {
            guard let clock = tables.clock, limit > 0 else { return [] }
            var readings: [ClockReading] = []
            try txn.scan(clock, from: after.map(LMDBLedgerStorage.clockKey)) { key, _ in
                let reading = try LMDBLedgerStorage.clockReading(fromKey: key)
                if let after, reading <= after { return true }
                readings.append(reading)
                return readings.count < limit
            }
            guard readings.count < limit else { return readings }
            // Each tail after what comes before it: the older version's in `meta`, then this one's.
            var newest = try ClockTail.newest(in: clock, txn)
            for table in [tables.meta, tables.main] {
                let tail = try ClockTail.readings(table, after: newest, in: txn)
                newest = tail.last ?? newest
                for reading in tail where after.map({ reading > $0 }) ?? true {
                    readings.append(reading)
                    if readings.count == limit { return readings }
                }
            }
            return readings
        }

        func lastClockReading() throws -> ClockReading? {
            guard let clock = tables.clock else { return nil }
            // Unchecked: each tail is after what comes before it once the writer's open moved
            // what older versions left out of order (`clockReadings` checks it).
            return try ClockTail.newest(tables.main, in: txn) ?? ClockTail.newest(tables.meta, in: txn) ?? ClockTail.newest(in: clock, txn)
        }

        func account(ofAppTransaction appTransaction: String) throws -> String? {
            guard let table = tables.appTransactions, !appTransaction.isEmpty else { return nil }
            return try txn.value(in: table, forKey: appTransaction)
        }

        func accountNames(from handle: UInt64, limit: Int) throws -> [(handle: UInt64, account: String)] {
            guard let table = tables.accountNames, limit > 0 else { return [] }
            var rows: [(handle: UInt64, account: String)] = []
            try txn.scan(table, from: handle) { key, value in
                rows.append((try UInt64(lmdbBytes: key), try String(lmdbBytes: value)))
                return rows.count < limit
            }
            return rows
        }

        func accountHandle(of account: String) throws -> UInt64? {
            guard let table = tables.accountHandles, !account.isEmpty else { return nil }
            return try txn.value(in: table, forKey: account)
        }

        func lastAccountHandle() throws -> UInt64 {
            guard let table = tables.accountNames else { return 0 }
            return try txn.lastKey(table) ?? 0
        }

        func proof(at position: UInt64) throws -> String? {
            guard let table = tables.proofs else { return nil }
            return try txn.value(in: table, forKey: position)
        }

        func proofPositions() throws -> [UInt64] {
            guard let table = tables.proofs else { return [] }
            var positions: [UInt64] = []
            try txn.scan(table) { key, _ in
                positions.append(try UInt64(lmdbBytes: key))
                return true
            }
            return positions
        }

        func feedState(_ key: String) throws -> [UInt8]? {
            guard let feeds = tables.feeds else { return nil }
            return try txn.value(in: feeds, forKey: key)
        }

        func feedStates(prefix: String) throws -> [(key: String, value: [UInt8])] {
            try feedStates(prefix: prefix, from: prefix, limit: .max)
        }

        func feedStates(prefix: String, from first: String, limit: Int) throws -> [(key: String, value: [UInt8])] {
            guard let feeds = tables.feeds, limit > 0 else { return [] }
            var states: [(key: String, value: [UInt8])] = []
            let start = Array(prefix.utf8)
            let from = Array(first.utf8).lexicographicallyPrecedes(start) ? prefix : first
            // LMDB has no empty key to seek to: every key starts with the empty prefix.
            try txn.scan(feeds, from: from.isEmpty ? nil : from) { key, value in
                guard key.starts(with: start) else { return false }
                guard let name = String(validating: key, as: UTF8.self) else {
                    throw StorageError(.damaged, "the feeds table holds a key that is not UTF-8")
                }
                states.append((name, Array(value)))
                return states.count < limit
            }
            return states
        }

        func snapshotHeaders() throws -> [(position: UInt64, bytes: [UInt8])] {
            var headers: [(position: UInt64, bytes: [UInt8])] = []
            try txn.scan(tables.snapshots) { key, value in
                headers.append((try UInt64(lmdbBytes: key), Array(value)))
                return true
            }
            return headers
        }

        func accountState<R>(
            _ account: String, atOrBefore position: UInt64, _ body: (UInt64, UnsafeRawBufferPointer) throws -> R
        ) throws -> R? {
            guard let prefix = LMDBLedgerStorage.historyPrefix(account),
                  let key = LMDBLedgerStorage.historyKey(account, position)
            else { return nil }
            return try txn.withCursor(tables.accountStates) { cursor in
                // The first key after the wanted one, then one step back: the newest at or before.
                var entry = try cursor.seek(atOrAfter: key)
                if let found = entry, !found.key.elementsEqual(key) {
                    entry = try cursor.previous()
                } else if entry == nil {
                    entry = try cursor.last()
                }
                guard let (foundKey, value) = entry, foundKey.count == prefix.count + 8, foundKey.starts(with: prefix) else {
                    return nil
                }
                let version = UInt64(bigEndian: foundKey.loadUnaligned(fromByteOffset: prefix.count, as: UInt64.self))
                return try body(version, value)
            }
        }

        func accountStateVersions(_ account: String) throws -> [UInt64] {
            guard let prefix = LMDBLedgerStorage.historyPrefix(account), let start = LMDBLedgerStorage.historyKey(account, 0) else { return [] }
            var versions: [UInt64] = []
            try txn.scan(tables.accountStates, from: start) { key, _ in
                guard key.count == prefix.count + 8, key.starts(with: prefix) else { return false }
                versions.append(UInt64(bigEndian: key.loadUnaligned(fromByteOffset: prefix.count, as: UInt64.self)))
                return true
            }
            return versions
        }

        func forEachAccountState(_ body: (String, UInt64, UnsafeRawBufferPointer) throws -> Void) throws {
            try txn.scan(tables.accountStates) { key, value in
                guard let length = key.first, key.count == Int(length) + 9 else {
                    throw StorageError(.damaged, "a stored account state has a malformed key")
                }
                let account = try String(lmdbBytes: UnsafeRawBufferPointer(rebasing: key[1..<1 + Int(length)]))
                let version = UInt64(bigEndian: key.loadUnaligned(fromByteOffset: 1 + Int(length), as: UInt64.self))
                try body(account, version, value)
                return true
            }
        }

        func positions(ofAccount account: String, after position: UInt64, limit: Int) throws -> [UInt64] {
            switch tables.history {
            case .byHandle(let indexed, let recent):
                guard let handle = try accountHandle(of: account) else { return [] }
                return try AccountHistory.positions(of: handle, after: position, limit: limit, indexed: indexed, tail: try historyTail(recent: recent), in: txn)
            case .byName(let history):
                try checkHistoryNotMoved()
                var positions: [UInt64] = []
                guard limit > 0, position < UInt64.max, let prefix = LMDBLedgerStorage.historyPrefix(account),
                      let start = LMDBLedgerStorage.historyKey(account, position + 1)
                else { return positions }
                try txn.scan(history, from: start) { key, _ in
                    guard key.count == prefix.count + 8, key.starts(with: prefix) else { return false }
                    positions.append(UInt64(bigEndian: key.loadUnaligned(fromByteOffset: prefix.count, as: UInt64.self)))
                    return positions.count < limit
                }
                return positions
            }
        }

        func newestPositions(ofAccounts handles: [UInt64], through last: UInt64) throws -> [UInt64: UInt64] {
            switch tables.history {
            case .byHandle(let indexed, let recent):
                return try AccountHistory.newestPositions(of: handles, through: last, indexed: indexed, tail: try historyTail(recent: recent), in: txn)
            case .byName:
                // Only the proof tree asks, and only of a ledger open to write, whose history
                // the open made one by handle.
                throw StorageError(.readOnly, "a ledger of an older layout is read-only until it is opened to write")
            }
        }

        func hasHistoryEntry(account: String, position: UInt64) throws -> Bool {
            switch tables.history {
            case .byHandle(let indexed, let recent):
                guard let handle = try accountHandle(of: account) else { return false }
                return try AccountHistory.contains(handle: handle, position: position, indexed: indexed, tail: try historyTail(recent: recent), in: txn)
            case .byName(let history):
                try checkHistoryNotMoved()
                guard let key = LMDBLedgerStorage.historyKey(account, position) else { return false }
                return try txn.contains(history, key: key)
            }
        }

        func record(at position: UInt64, _ body: (UnsafeRawBufferPointer) throws -> Void) throws -> Bool {
            try txn.withValue(in: tables.log, forKey: position) { bytes in try body(bytes) } != nil
        }

        func transactionCountHint() throws -> Int? {
            try txn.count(tables.transactions)
        }

        func accountCount() throws -> Int {
            switch tables.history {
            case .byHandle(let indexed, let recent):
                return try AccountHistory.accountCount(indexed: indexed, tail: try historyTail(recent: recent), in: txn)
            case .byName(let history):
                try checkHistoryNotMoved()
                // One seek per account: from an account's first key, jump past its last possible key.
                var count = 0
                try txn.withCursor(history) { cursor in
                    var entry = try cursor.first()
                    while let key = entry?.key, key.count > 8 {
                        count += 1
                        entry = try cursor.seek(atOrAfter: Array(key.prefix(key.count - 8)) + [UInt8](repeating: 0xFF, count: 9))
                    }
                }
                return count
            }
        }

        private func historyEntryCount() throws -> Int {
            switch tables.history {
            case .byHandle(let indexed, let recent):
                switch try tailLayout() {
                case .log(let mark): return try txn.count(indexed) + tailRecords(after: mark)
                case .tables: return try txn.count(indexed) + txn.count(recent)
                }
            case .byName(let history):
                try checkHistoryNotMoved()
                return try txn.count(history)
            }
        }

        /// A history by name that another process moved since this one opened the ledger is
        /// gone: LMDB reads an empty table under its handle, so this says so instead.
        private func checkHistoryNotMoved() throws {
            guard try txn.value(in: tables.meta, forKey: AccountHistory.movedKey) == nil else {
                throw StorageError(
                    .unsupportedFormat, "another process moved the ledger's history to its new layout since this one opened it: open it again")
            }
        }

        func catalogs() throws -> [(effectiveFrom: UInt64, json: [UInt8])] {
            var result: [(effectiveFrom: UInt64, json: [UInt8])] = []
            try txn.scan(tables.catalogs) { key, value in
                result.append((try UInt64(lmdbBytes: key), Array(value)))
                return true
            }
            return result
        }

        func newestSnapshotPosition() throws -> UInt64? {
            // As many headers as `snapshotsKept`: not worth a cursor of its own.
            try snapshotHeaders().last?.position
        }

        func newestCatalogVersion() throws -> CatalogVersion? {
            // A handful of catalogs at most: not worth a cursor of its own.
            try catalogs().last.map { CatalogVersion(effectiveFrom: $0.effectiveFrom, size: $0.json.count) }
        }

        func formatMarker() throws -> String? {
            try txn.value(in: tables.meta, forKey: "format")
        }

        func lastForgetPosition() throws -> UInt64 {
            guard let value = try txn.value(in: tables.meta, forKey: LMDBLedgerStorage.lastForgetKey) else { return 0 }
            guard let position = UInt64(value) else { throw StorageError(.damaged, "the meta table's last forget is \"\(value)\"") }
            return position
        }

        func counts() throws -> StorageCounts {
            let records = try txn.count(tables.log)
            if let mark = try EventIDIndex.indexedThrough(tables.meta, in: txn), mark > (try lastPosition()) {
                throw StorageError(.damaged, "the event-id index's mark, \(mark), is past the log's last record")
            }
            let tailIDs: Int = switch try tailLayout() {
            case .log(let mark): try tailRecords(after: mark)
            case .tables: try tables.recentEvents.map { try txn.count($0) } ?? 0
            }
            let eventIDs = try txn.count(tables.events) + tailIDs
            return StorageCounts(
                records: records, eventIDs: eventIDs,
                transactions: try txn.count(tables.transactions), revocations: try txn.count(tables.revocations),
                historyEntries: try historyEntryCount(), appTransactions: try tables.appTransactions.map { try txn.count($0) } ?? 0,
                accountHandles: try tables.accountNames.map { try txn.count($0) } ?? 0,
                proofs: try tables.proofs.map { try txn.count($0) } ?? 0)
        }
    }

    final class Writer: Reader, LedgerStorageWriter {
        private let write: WriteTransaction
        /// The last position committed before this transaction's first append, and the
        /// event-id index's mark then: read at the first append.
        private var before: (last: UInt64, mark: UInt64)?
        /// The ids this transaction appended after the mark: not committed, so not in `tailIDs`.
        private var appendedIDs: [UTF8Key: UInt64] = [:]
        private var discarded = false

        init(txn: WriteTransaction, tables: Tables, tailIDs: EventIDIndex.TailIDs) {
            write = txn
            super.init(txn: txn, tables: tables, tailIDs: tailIDs)
        }

        override func position(ofEventID id: String, through last: UInt64) throws -> UInt64? {
            try position(ofEventID: id).flatMap { $0 <= last ? $0 : nil }
        }

        override func position(ofEventID id: String) throws -> UInt64? {
            guard let before else { return try super.position(ofEventID: id) }
            if let position = appendedIDs[UTF8Key(id)] { return position }
            return try indexedPosition(ofEventID: id, committedThrough: before.last, mark: before.mark)
        }

        /// Appends the record. Its id and account are the indexes' tail from now on (`IndexTail`):
        /// nothing else is written, until the append that makes the tail long enough moves it.
        func append(record: [UInt8], at position: UInt64, eventID: String, account: String) throws {
            guard case .byHandle(let indexed, _) = tables.history, case .log(let storedMark) = try tailLayout() else {
                throw StorageError(.readOnly, "a ledger of an older layout is read-only until it is opened to write")
            }
            try write.append(record, in: tables.log, forKey: position)
            let (last, mark): (UInt64, UInt64)
            if let before {
                (last, mark) = before
            } else {
                last = position - 1
                mark = storedMark
                before = (last, mark)
            }
            appendedIDs[UTF8Key(eventID)] = position
            guard position - mark >= EventIDIndex.moveThreshold else { return }
            try IndexTail.move(
                after: mark, through: position, log: tables.log, events: tables.events, history: indexed, meta: tables.meta, in: write)
            // The moved ids, this transaction's among them, are in `events` now.
            before = (last, position)
            appendedIDs = [:]
            readLayout = .log(mark: position)
        }

        func recordClock(_ reading: ClockReading) throws {
            guard let clock = tables.clock else { throw StorageError(.readOnly, "the ledger is open read-only") }
            try ClockTail.record(reading, clock: clock, main: tables.main, in: write)
        }

        func setFeedState(_ key: String, _ value: [UInt8]?) throws {
            guard let feeds = tables.feeds else { throw StorageError(.readOnly, "the ledger is open read-only") }
            if let value {
                try write.put(value, in: feeds, forKey: key)
            } else {
                _ = try write.delete(in: feeds, key: key)
            }
        }

        func setHolder(_ holder: TransactionHolder, ofTransaction transaction: String) throws {
            try write.put(LMDBLedgerStorage.encode(holder), in: tables.transactions, forKey: LMDBLedgerStorage.transactionKey(transaction))
        }

        func setRevocation(_ position: UInt64, ofTransaction transaction: String) throws {
            try write.put(position, in: tables.revocations, forKey: LMDBLedgerStorage.transactionKey(transaction))
        }

        func putAccountName(_ account: String, handle: UInt64) throws {
            guard let names = tables.accountNames, let handles = tables.accountHandles else {
                throw StorageError(.readOnly, "the ledger is open read-only")
            }
            // LMDB keys are 1 to 511 bytes; the rules keep accounts to 1…128.
            guard !account.isEmpty else { throw StorageError(.io, "an account id is at least one byte") }
            try write.append(account, in: names, forKey: handle)
            guard try write.insert(handle, in: handles, forKey: account) else {
                throw StorageError(.damaged, "the account table already gives \"\(account)\" a handle")
            }
        }

        func putProof(_ proof: String, at position: UInt64) throws {
            guard let proofs = tables.proofs else { throw StorageError(.readOnly, "the ledger is open read-only") }
            try write.append(proof, in: proofs, forKey: position)
        }

        func deleteProof(at position: UInt64) throws {
            guard let proofs = tables.proofs else { throw StorageError(.readOnly, "the ledger is open read-only") }
            _ = try write.delete(in: proofs, key: position)
        }

        func renameAccount(handle: UInt64, from old: String, to new: String) throws {
            guard let names = tables.accountNames, let handles = tables.accountHandles, let customers = tables.appTransactions else {
                throw StorageError(.readOnly, "the ledger is open read-only")
            }
            try write.put(new, in: names, forKey: handle)
            _ = try write.delete(in: handles, key: old)
            guard try write.insert(handle, in: handles, forKey: new) else {
                throw StorageError(.damaged, "the account table already gives \"\(new)\" a handle")
            }
            // The history is by handle: nothing to rename there. The file keeps stale bytes of
            // the old name until it is rewritten (`DataFileRewrite`).
            try write.put("1", in: tables.meta, forKey: DataFileRewrite.pendingKey)
            var held: [(String, TransactionHolder)] = []
            try forEachHolder { transaction, holder in
                if holder.entry.account.utf8.elementsEqual(old.utf8) { held.append((transaction, holder)) }
            }
            for (transaction, var holder) in held {
                holder.entry.account = new
                try setHolder(holder, ofTransaction: transaction)
            }
            var claimed: [String] = []
            try txn.scan(customers) { key, value in
                if value.elementsEqual(old.utf8) { claimed.append(try String(lmdbBytes: key)) }
                return true
            }
            for appTransaction in claimed { try write.put(new, in: customers, forKey: appTransaction) }
        }

        func setLastForgetPosition(_ position: UInt64) throws {
            try write.put(String(position), in: tables.meta, forKey: LMDBLedgerStorage.lastForgetKey)
        }

        func claimAppTransaction(_ appTransaction: String, for account: String) throws {
            guard let table = tables.appTransactions else { throw StorageError(.readOnly, "the ledger is open read-only") }
            // LMDB keys are 1 to 511 bytes; the format keeps names to 256.
            guard !appTransaction.isEmpty else { return }
            try write.insert(account, in: table, forKey: appTransaction)
        }

        func forgetAppTransaction(_ appTransaction: String) throws {
            guard let table = tables.appTransactions else { throw StorageError(.readOnly, "the ledger is open read-only") }
            guard !appTransaction.isEmpty, appTransaction.utf8.count <= 256 else { return }
            _ = try write.delete(in: table, key: appTransaction)
        }

        func putSnapshotHeader(_ bytes: [UInt8], position: UInt64) throws {
            try write.put(bytes, in: tables.snapshots, forKey: position)
        }

        func deleteSnapshotHeader(position: UInt64) throws {
            try write.delete(in: tables.snapshots, key: position)
        }

        func putAccountState(_ bytes: [UInt8], account: String, version: UInt64) throws {
            guard let key = LMDBLedgerStorage.historyKey(account, version) else {
                throw StorageError(.io, "account names are at most 255 bytes")
            }
            try write.put(bytes, in: tables.accountStates, forKey: key)
        }

        func deleteAccountState(account: String, version: UInt64) throws {
            guard let key = LMDBLedgerStorage.historyKey(account, version) else { return }
            try write.delete(in: tables.accountStates, key: key)
        }

        func removeAllSnapshots() throws {
            try write.removeAll(in: tables.snapshots)
            try write.removeAll(in: tables.accountStates)
        }

        func recordCatalog(_ json: [UInt8], effectiveFrom position: UInt64) throws {
            try write.put(json, in: tables.catalogs, forKey: position)
        }

        func setFormatMarker(_ marker: String) throws {
            try write.put(marker, in: tables.meta, forKey: "format")
        }

        func discard() {
            write.discard()
            discarded = true
        }

        /// After the commit: the ids this transaction appended are the tail's next ones, which
        /// this process need not read back.
        func committed() {
            guard !discarded, let before, !appendedIDs.isEmpty else { return }
            tailIDs.add(appendedIDs, after: before.mark, following: before.last)
        }
    }
}
