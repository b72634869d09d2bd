import Dispatch
import Logging
import NIOCore
import PostgresNIO
import PurchaseLedger
import Synchronization

/// The PostgreSQL backend: the same storage protocol as LMDB's, on tables several processes
/// share (`PostgresSchema`).
///
/// - Writes: one connection, used by the ledger's writer thread only. Each write is one
///   transaction that first locks the head row (`SELECT … FOR UPDATE`), so writers in every
///   process run one at a time, each seeing everything committed before it; positions come from
///   the head and are gap-free. The transaction then updates the head and notifies the other
///   processes (`pg_notify`), and commits: five statements, each a round trip, whatever it
///   appends (its rows go in one, `PendingWrites`).
/// - Reads: a pool of connections, each read one `REPEATABLE READ READ ONLY` transaction (one
///   consistent view, like an LMDB read transaction).
/// - Watching: one more connection `LISTEN`s for the notifications, and a timer polls the head
///   as a fallback (a lost connection), or alone (`PostgresOptions.notifications` off, for an
///   engine without LISTEN/NOTIFY).
final class PostgresLedgerStorage: LedgerStorage, @unchecked Sendable {
    static let formatMarker = "purchase-ledger/postgres/2"
    /// Databases written before account handles: read-only, migrated by `ledger copy`.
    static let formatOneMarker = "purchase-ledger/postgres/1"
    static let channel = "purchase_ledger_appends"

    let isReadOnly: Bool
    var storageFormat: String { Self.formatMarker }
    var readableFormats: [String] { [Self.formatOneMarker] }
    let accountNames = AccountNames()
    var isShared: Bool { true }
    let location: PostgresLocation
    private let logger: Logger
    private let synchronousCommit: Bool
    private let pollInterval: Duration
    /// Whether commits notify the other processes and this one listens (`pg_notify`/`LISTEN`).
    private let notifications: Bool
    /// The writer's connection, opened at the first write (the writer's thread only).
    private let writerConnection = Mutex<BlockingConnection?>(nil)
    private let readers: ReaderPool
    private let watcher = Mutex<AppendWatcher?>(nil)
    /// The last position this process's writer committed, or is committing: a notification up
    /// to it announces this process's own append, which the ledger has or is about to publish.
    private let ownHead = OwnHead()
    private let isClosed = Atomic<Bool>(false)
    /// The tables later migrations added that the database has, decided once at open: a
    /// writable open migrated it (all of them), and a read-only one reads the schema it found.
    private let present: PresentTables

    /// Which tables of later migrations a database has.
    struct PresentTables: Sendable {
        var clock = true
        var feeds = true
        var customers = true
        var accounts = true
        var proofs = true

        static func read(_ connection: BlockingConnection) throws -> PresentTables {
            guard let row = try connection.query("""
                SELECT to_regclass('ledger_clock') IS NOT NULL, to_regclass('ledger_feeds') IS NOT NULL,
                       to_regclass('ledger_app_transactions') IS NOT NULL, to_regclass('ledger_accounts') IS NOT NULL,
                       to_regclass('ledger_proofs') IS NOT NULL
                """).first else { throw StorageError(.io, "PostgreSQL answered no row") }
            let (clock, feeds, customers, accounts, proofs) = try row.decode((Bool, Bool, Bool, Bool, Bool).self)
            return PresentTables(clock: clock, feeds: feeds, customers: customers, accounts: accounts, proofs: proofs)
        }
    }

    init(location: PostgresLocation, readOnly: Bool, synchronousCommit: Bool, options: PostgresOptions, logger: Logger) throws {
        self.location = location
        self.isReadOnly = readOnly
        self.synchronousCommit = synchronousCommit
        self.pollInterval = options.pollInterval
        self.notifications = options.notifications
        let readerConnections = options.readerConnections
        self.logger = logger
        readers = ReaderPool(location: location, limit: max(1, readerConnections), logger: logger)
        let connection = try BlockingConnection.connect(location, logger: logger)
        defer { connection.close() }
        if readOnly {
            let known = try connection.query("SELECT to_regclass('ledger_migrations') IS NOT NULL").first?.decode(Bool.self) ?? false
            guard known else { throw StorageError(.notALedger, "\(location) holds no ledger") }
        } else {
            let applied = try PostgresSchema.migrate(connection)
            if !applied.isEmpty {
                logger.info("migrated the ledger's schema", metadata: ["location": "\(location)", "versions": "\(applied)"])
            }
        }
        present = try PresentTables.read(connection)
    }

    deinit {
        close()
    }

    // MARK: LedgerStorage

    func read<R>(_ body: (any LedgerStorageReader) throws -> R) throws -> R {
        try readers.withConnection { connection in
            try connection.query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            do {
                let result = try body(Reader(connection: connection, present: present))
                try connection.query("COMMIT")
                return result
            } catch {
                // A connection still in the transaction must not go back to the pool: closed,
                // the pool drops it.
                if !connection.isBroken, (try? connection.query("ROLLBACK")) == nil { connection.close() }
                throw error
            }
        }
    }

    func write<R>(lookingUp lookups: Lookups?, _ body: (any LedgerStorageWriter) throws -> R) throws -> R {
        guard !isReadOnly else { throw StorageError(.readOnly, "the ledger at \(location) is open read-only") }
        // A serialization failure or a deadlock aborted the transaction: run it again from the
        // start (the protocol allows `body` to run more than once). PostgreSQL's own writers
        // cannot deadlock (they all lock the head row first); CockroachDB's serializable
        // transactions may abort under contention.
        for attempt in 1... {
            do {
                return try writeOnce(lookups, body)
            } catch where attempt < 5 && ["40001", "40P01"].contains(PostgresErrors.sqlState(of: error)) {
                logger.debug("write aborted by the database; running it again", metadata: ["attempt": "\(attempt)"])
            }
        }
        preconditionFailure("unreachable")
    }

    private func writeOnce<R>(_ lookups: Lookups?, _ body: (any LedgerStorageWriter) throws -> R) throws -> R {
        guard !isClosed.load(ordering: .acquiring) else { throw StorageError(.closed, "the ledger is closed") }
        let connection = try writerConnectionForUse()
        do {
            // postgres-nio sends a statement once the one before it has been answered, so each
            // statement is a round trip: a write is five (BEGIN, the lock, what the rules will
            // look up, the buffered writes, COMMIT), whatever it appends.
            connection.send("BEGIN")
            let locking = connection.start("SELECT position FROM ledger_head WHERE id = 1 FOR UPDATE")
            // Sent right behind the lock, so it runs once the lock is held. Each statement sees
            // what was committed when it started, so this one sees every write before the lock
            // was granted (a column joined to the locking SELECT would not: its rows are those
            // of before the wait).
            let prefetching = connection.start(Writer.lookupQuery(lookups))
            guard let lockedHead = try connection.wait(locking).first?.decode(Int64.self) else {
                throw StorageError(.damaged, "the ledger's head row is missing")
            }
            let head = try StoredPosition.from(lockedHead)
            let writer = Writer(connection: connection, head: head, present: present)
            try writer.remember(lookups, found: connection.wait(prefetching))
            let result = try body(writer)
            if writer.isDiscarded {
                try connection.query("ROLLBACK")
                return result
            }
            let appended = writer.head != head
            // Delivered at commit, to every process listening; a few bytes, once per write. A
            // write that appended nothing but grew the catalog has the others look, too.
            var notification: (channel: String, payload: String)?
            if notifications, appended {
                notification = (Self.channel, String(writer.head))
            } else if notifications, writer.recordedCatalog {
                notification = (Self.channel, "catalog")
            }
            writer.flush(movingHead: appended, notifying: notification)
            // Set before COMMIT: its notification may reach the listener before its answer
            // reaches this thread.
            let previousHead = ownHead.claim(through: writer.head)
            do {
                let commit = try connection.query("COMMIT")
                // COMMIT of a transaction that failed answers ROLLBACK, not an error.
                guard commit.metadata.command == "COMMIT" else {
                    throw StorageError(.io, "PostgreSQL rolled the write back (\(commit.metadata.command))")
                }
            } catch {
                // Another process may commit those positions instead: its notification must
                // not be taken for this one's, and a catch-up looks now.
                ownHead.release(back: previousHead)
                watcher.withLock { $0 }?.signal()
                throw error
            }
            return result
        } catch {
            // Whatever state the transaction is in, end it; a connection that cannot is dropped.
            if connection.isBroken || (try? connection.query("ROLLBACK")) == nil {
                dropWriterConnection()
            }
            throw error
        }
    }

    private func writerConnectionForUse() throws -> BlockingConnection {
        if let connection = writerConnection.withLock({ $0 }), !connection.isBroken { return connection }
        dropWriterConnection()
        let connection = try BlockingConnection.connect(location, logger: logger)
        // Explicit: the server's, database's or role's default may say otherwise.
        try connection.query(synchronousCommit ? "SET synchronous_commit = on" : "SET synchronous_commit = off")
        // A process that stalls (or loses its network) holding the head lock would hold up
        // every writer: PostgreSQL ends such a transaction after a minute.
        try connection.query("SET idle_in_transaction_session_timeout = '60s'")
        // The writer's statements look keys up and insert: a sequential scan is never the plan
        // they want, but a young or unanalyzed table with a batch's thousand keys in `= ANY`
        // leads the planner to one (measured: 4.5 ms instead of 0.9 ms for a batch's event ids
        // in a table of 300,000). Discouraged, not forbidden: a table without an index still
        // gets one.
        try connection.query("SET enable_seqscan = off")
        writerConnection.withLock { $0 = connection }
        return connection
    }

    private func dropWriterConnection() {
        writerConnection.withLock { connection in
            connection?.close()
            connection = nil
        }
    }

    func watchForAppends(_ onChange: @escaping @Sendable (UInt64?) -> Void) {
        let ownHead = self.ownHead
        let started = AppendWatcher(
            location: location, channel: notifications ? Self.channel : nil, pollInterval: pollInterval, logger: logger
        ) { last in
            // This process's own commit: the ledger publishes it without reading it back.
            if let last, last <= ownHead.position { return }
            onChange(last)
        }
        watcher.withLock { $0 = started }
    }

    /// Notifications of other processes' appends reach this process now.
    var isListening: Bool {
        watcher.withLock { $0?.isListening ?? false }
    }

    func sizeOnDisk() -> Int {
        let size = try? readers.withConnection { connection in
            try connection.query("""
                SELECT sum(pg_total_relation_size(c.oid))::bigint FROM pg_class c
                WHERE c.relname LIKE 'ledger\\_%' AND c.relkind = 'r' AND pg_table_is_visible(c.oid)
                """).first?.decode(Int64?.self) ?? nil
        }
        return Int(size.flatMap { $0 } ?? 0)
    }

    func close() {
        guard !isClosed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        watcher.withLock { $0?.stop(); $0 = nil }
        dropWriterConnection()
        readers.close()
    }

    // MARK: Reading

    class Reader: LedgerStorageReader {
        let connection: BlockingConnection
        let present: PresentTables
        /// Rows fetched per round trip when scanning.
        static let pageSize = 1000

        init(connection: BlockingConnection, present: PresentTables) {
            self.connection = connection
            self.present = present
        }

        /// Runs a query of this transaction (a writer first sends what it buffered).
        func run(_ query: PostgresQuery) throws -> PostgresQueryResult {
            try connection.query(query)
        }

        func lastPosition() throws -> UInt64 {
            let head = try run("SELECT position FROM ledger_head WHERE id = 1").first?.decode(Int64.self)
            return try StoredPosition.from(head ?? 0)
        }

        func forEachRecord(from start: UInt64, through end: UInt64, _ body: (UInt64, UnsafeRawBufferPointer) throws -> Bool) throws {
            var next = Int64(clamping: start)
            let last = Int64(clamping: end)
            while next <= last {
                let rows = try run("""
                    SELECT position, record FROM ledger_events WHERE position >= \(next) AND position <= \(last)
                    ORDER BY position LIMIT \(Self.pageSize)
                    """)
                for row in rows {
                    let (position, record) = try row.decode((Int64, ByteBuffer).self)
                    guard try record.withUnsafeReadableBytes({ try body(try StoredPosition.from(position), $0) }) else { return }
                    next = position + 1
                }
                if rows.count < Self.pageSize { return }
            }
        }

        func record(at position: UInt64, _ body: (UnsafeRawBufferPointer) throws -> Void) throws -> Bool {
            guard let row = try run("SELECT record FROM ledger_events WHERE position = \(Int64(clamping: position))").first else {
                return false
            }
            try row.decode(ByteBuffer.self).withUnsafeReadableBytes { try body($0) }
            return true
        }

        func records(at positions: [UInt64], _ body: (UInt64, UnsafeRawBufferPointer) throws -> Void) throws {
            guard !positions.isEmpty else { return }
            let keys = positions.map { Int64(clamping: $0) }
            for row in try run("SELECT position, record FROM ledger_events WHERE position = ANY(\(keys)::bigint[]) ORDER BY position") {
                let (position, record) = try row.decode((Int64, ByteBuffer).self)
                let at = try StoredPosition.from(position)
                try record.withUnsafeReadableBytes { try body(at, $0) }
            }
        }

        func position(ofEventID id: String) throws -> UInt64? {
            try run("SELECT position FROM ledger_events WHERE event_id = \(Keys.bytes(id))")
                .first.map { try StoredPosition.from(try $0.decode(Int64.self)) }
        }

        func holder(ofTransaction transaction: String) throws -> TransactionHolder? {
            try run("""
                SELECT account, payment, position, credits_consumable FROM ledger_transactions
                WHERE transaction_id = \(Keys.bytes(transaction))
                """).first.map(Self.holder)
        }

        func holders(ofTransactions transactions: [UTF8Key]) throws -> [UTF8Key: TransactionHolder] {
            guard !transactions.isEmpty else { return [:] }
            var found: [UTF8Key: TransactionHolder] = [:]
            let keys = transactions.map { Keys.bytes($0.string) }
            for row in try run("""
                SELECT transaction_id, account, payment, position, credits_consumable FROM ledger_transactions
                WHERE transaction_id = ANY(\(keys)::bytea[])
                """) {
                let (transaction, account, payment, position, credits) = try row.decode((ByteBuffer, ByteBuffer, ByteBuffer, Int64, Bool).self)
                found[UTF8Key(Keys.string(transaction))] = try Self.holder(account, payment, position, credits)
            }
            return found
        }

        static func holder(_ row: PostgresRow) throws -> TransactionHolder {
            let (account, payment, position, credits) = try row.decode((ByteBuffer, ByteBuffer, Int64, Bool).self)
            return try holder(account, payment, position, credits)
        }

        /// A holder from the columns `account, payment, position, credits_consumable`.
        static func holder(_ account: ByteBuffer, _ payment: ByteBuffer, _ position: Int64, _ credits: Bool) throws -> TransactionHolder {
            TransactionHolder(
                entry: EntryReference(account: Keys.string(account), payment: Keys.string(payment)),
                position: try StoredPosition.from(position), creditsConsumable: credits)
        }

        func revocation(ofTransaction transaction: String) throws -> UInt64? {
            try run("SELECT position FROM ledger_revocations WHERE transaction_id = \(Keys.bytes(transaction))")
                .first.map { try StoredPosition.from(try $0.decode(Int64.self)) }
        }

        func revocations(ofTransactions transactions: [UTF8Key]) throws -> [UTF8Key: UInt64] {
            guard !transactions.isEmpty else { return [:] }
            var found: [UTF8Key: UInt64] = [:]
            let keys = transactions.map { Keys.bytes($0.string) }
            for row in try run("SELECT transaction_id, position FROM ledger_revocations WHERE transaction_id = ANY(\(keys)::bytea[])") {
                let (transaction, position) = try row.decode((ByteBuffer, Int64).self)
                found[UTF8Key(Keys.string(transaction))] = try StoredPosition.from(position)
            }
            return found
        }

        func forEachHolder(_ body: (String, TransactionHolder) throws -> Void) throws {
            try scanByKey(table: "ledger_transactions", columns: "account, payment, position, credits_consumable") { row in
                let (key, account, payment, position, credits) = try row.decode((ByteBuffer, ByteBuffer, ByteBuffer, Int64, Bool).self)
                try body(Keys.string(key), try Self.holder(account, payment, position, credits))
                return key
            }
        }

        func forEachRevocation(_ body: (String, UInt64) throws -> Void) throws {
            try scanByKey(table: "ledger_revocations", columns: "position") { row in
                let (key, position) = try row.decode((ByteBuffer, Int64).self)
                try body(Keys.string(key), try StoredPosition.from(position))
                return key
            }
        }

        /// Visits a table keyed by `transaction_id` in key order, a page per round trip; `body`
        /// returns each row's key.
        private func scanByKey(table: String, columns: String, _ body: (PostgresRow) throws -> ByteBuffer) throws {
            var after: ByteBuffer?
            while true {
                let condition = after == nil ? "" : "WHERE transaction_id > $1"
                var query = PostgresQuery(
                    unsafeSQL: "SELECT transaction_id, \(columns) FROM \(table) \(condition) ORDER BY transaction_id LIMIT \(Self.pageSize)")
                if let after { query.binds.append(after) }
                let rows = try run(query)
                for row in rows {
                    after = try body(row)
                }
                if rows.count < Self.pageSize { return }
            }
        }

        func positions(ofAccount account: String, after position: UInt64, limit: Int) throws -> [UInt64] {
            guard limit > 0 else { return [] }
            return try run("""
                SELECT position FROM ledger_events WHERE account = \(Keys.bytes(account)) AND position > \(Int64(clamping: position))
                ORDER BY position LIMIT \(Int64(clamping: limit))
                """).map { try StoredPosition.from(try $0.decode(Int64.self)) }
        }

        func newestPositions(ofAccounts handles: [UInt64], through last: UInt64) throws -> [UInt64: UInt64] {
            guard !handles.isEmpty, present.accounts else { return [:] }
            let keys = handles.map { Int64(clamping: $0) }
            // Each account's newest entry at or before `last`: one step back along the history index.
            let rows = try run("""
                SELECT a.handle, newest.position FROM ledger_accounts a
                CROSS JOIN LATERAL (SELECT e.position FROM ledger_events e WHERE e.account = a.account AND e.position <= \(Int64(clamping: last))
                    ORDER BY e.position DESC LIMIT 1) newest
                WHERE a.handle = ANY(\(keys)::bigint[])
                """)
            var newest: [UInt64: UInt64] = [:]
            for row in rows {
                let (handle, position) = try row.decode((Int64, Int64).self)
                newest[try StoredPosition.from(handle)] = try StoredPosition.from(position)
            }
            return newest
        }

        func hasHistoryEntry(account: String, position: UInt64) throws -> Bool {
            try !run("""
                SELECT 1 FROM ledger_events WHERE account = \(Keys.bytes(account)) AND position = \(Int64(clamping: position))
                """).rows.isEmpty
        }

        func accountCount() throws -> Int {
            Int(try run("SELECT count(DISTINCT account) FROM ledger_events").first?.decode(Int64.self) ?? 0)
        }

        func newestCatalogVersion() throws -> CatalogVersion? {
            try run("SELECT effective_from, length(catalog) FROM ledger_catalogs ORDER BY effective_from DESC LIMIT 1").first.map { row in
                let (from, size) = try row.decode((Int64, Int32).self)
                return CatalogVersion(effectiveFrom: try StoredPosition.from(from), size: Int(size))
            }
        }

        func clockReadings(after: ClockReading?, limit: Int) throws -> [ClockReading] {
            guard limit > 0 else { return [] }
            // A ledger of schema 1 opened read-only has no clock yet.
            guard present.clock else { return [] }
            let from = after ?? ClockReading(position: 0, time: .earliest)
            let inclusive = after == nil
            return try run("""
                SELECT position, seconds, nanoseconds FROM ledger_clock
                WHERE (position, seconds, nanoseconds) \(unescaped: inclusive ? ">=" : ">")
                    (\(Int64(clamping: from.position)), \(from.time.seconds), \(Int32(from.time.nanoseconds)))
                ORDER BY position, seconds, nanoseconds LIMIT \(Int64(limit))
                """).map { row in
                try Self.clockReading(try row.decode((Int64, Int64, Int32).self))
            }
        }

        func lastClockReading() throws -> ClockReading? {
            guard present.clock else { return nil }
            return try run("""
                SELECT position, seconds, nanoseconds FROM ledger_clock ORDER BY position DESC, seconds DESC, nanoseconds DESC LIMIT 1
                """).first.map { row in
                try Self.clockReading(try row.decode((Int64, Int64, Int32).self))
            }
        }

        /// A row of `ledger_clock`, checked: only times of years 0000–9999 are ever recorded.
        private static func clockReading(_ row: (position: Int64, seconds: Int64, nanoseconds: Int32)) throws -> ClockReading {
            guard (0..<1_000_000_000).contains(row.nanoseconds) else {
                throw StorageError(.damaged, "the clock holds a reading of \(row.nanoseconds) ns")
            }
            let time = Timestamp(seconds: row.seconds, nanoseconds: UInt32(row.nanoseconds))
            guard time.isRepresentable else { throw StorageError(.damaged, "the clock holds a reading at \(row.seconds) s") }
            return ClockReading(position: try StoredPosition.from(row.position), time: time)
        }

        func account(ofAppTransaction appTransaction: String) throws -> String? {
            guard present.customers else { return nil }
            return try run("SELECT account FROM ledger_app_transactions WHERE app_transaction = \(Keys.bytes(appTransaction))")
                .first.map { Keys.string(try $0.decode(ByteBuffer.self)) }
        }

        func accountNames(from handle: UInt64, limit: Int) throws -> [(handle: UInt64, account: String)] {
            guard limit > 0, present.accounts else { return [] }
            return try Self.accountRows(run("""
                SELECT handle, account FROM ledger_accounts WHERE handle >= \(Int64(clamping: handle)) ORDER BY handle LIMIT \(Int64(limit))
                """))
        }

        func accountNames(handles: [UInt64]) throws -> [(handle: UInt64, account: String)] {
            guard !handles.isEmpty, present.accounts else { return [] }
            let keys = handles.map { Int64(clamping: $0) }
            return try Self.accountRows(run("SELECT handle, account FROM ledger_accounts WHERE handle = ANY(\(keys)::bigint[]) ORDER BY handle"))
        }

        /// Rows of the account table (handle, account), as both readers select them.
        private static func accountRows(_ result: PostgresQueryResult) throws -> [(handle: UInt64, account: String)] {
            try result.map { row in
                let (handle, account) = try row.decode((Int64, ByteBuffer).self)
                return (try StoredPosition.from(handle), Keys.string(account))
            }
        }

        func accountHandle(of account: String) throws -> UInt64? {
            guard present.accounts else { return nil }
            return try run("SELECT handle FROM ledger_accounts WHERE account = \(Keys.bytes(account))").first.map { row in
                try StoredPosition.from(try row.decode(Int64.self))
            }
        }

        func lastAccountHandle() throws -> UInt64 {
            guard present.accounts else { return 0 }
            return try StoredPosition.from(try run("SELECT coalesce(max(handle), 0) FROM ledger_accounts").first?.decode(Int64.self) ?? 0)
        }

        func proof(at position: UInt64) throws -> String? {
            guard present.proofs else { return nil }
            return try run("SELECT proof FROM ledger_proofs WHERE position = \(Int64(clamping: position))").first.map { row in
                Keys.string(try row.decode(ByteBuffer.self))
            }
        }

        func proofPositions() throws -> [UInt64] {
            guard present.proofs else { return [] }
            return try run("SELECT position FROM ledger_proofs ORDER BY position").rows.map { row in
                try StoredPosition.from(try row.decode(Int64.self))
            }
        }

        func feedState(_ key: String) throws -> [UInt8]? {
            guard present.feeds else { return nil }
            return try run("SELECT value FROM ledger_feeds WHERE key = \(Keys.bytes(key))").first.map { row in
                Array(try row.decode(ByteBuffer.self).readableBytesView)
            }
        }

        func feedStates(keys: [String]) throws -> [String: [UInt8]] {
            guard !keys.isEmpty, present.feeds else { return [:] }
            var values: [String: [UInt8]] = [:]
            for row in try run("SELECT key, value FROM ledger_feeds WHERE key = ANY(\(keys.map(Keys.bytes))::bytea[])") {
                let (key, value) = try row.decode((ByteBuffer, ByteBuffer).self)
                values[Keys.string(key)] = Array(value.readableBytesView)
            }
            return values
        }

        func feedStates(prefix: String) throws -> [(key: String, value: [UInt8])] {
            try feedStates(prefix: prefix, from: prefix, limit: .max)
        }

        func feedStates(prefix: String, from first: String, limit: Int) throws -> [(key: String, value: [UInt8])] {
            guard present.feeds, limit > 0 else { return [] }
            let start = Array(prefix.utf8)
            let from = Array(first.utf8).lexicographicallyPrecedes(start) ? prefix : first
            let count = Int64(min(limit, Int(Int64.max)))
            // The keys that start with the prefix are those from it up to its successor.
            var upper = start
            while let last = upper.last, last == 0xFF { upper.removeLast() }
            let bounded = !upper.isEmpty
            if bounded { upper[upper.count - 1] += 1 }
            let query: PostgresQuery = bounded
                ? "SELECT key, value FROM ledger_feeds WHERE key >= \(Keys.bytes(from)) AND key < \(ByteBuffer(bytes: upper)) ORDER BY key LIMIT \(count)"
                : "SELECT key, value FROM ledger_feeds WHERE key >= \(Keys.bytes(from)) ORDER BY key LIMIT \(count)"
            return try run(query).compactMap { row in
                let (key, value) = try row.decode((ByteBuffer, ByteBuffer).self)
                let keyBytes = Array(key.readableBytesView)
                guard keyBytes.starts(with: start) else { return nil }
                guard let name = String(validating: keyBytes, as: UTF8.self) else {
                    throw StorageError(.damaged, "ledger_feeds holds a key that is not UTF-8")
                }
                return (name, Array(value.readableBytesView))
            }
        }

        func newestSnapshotPosition() throws -> UInt64? {
            let newest = try run("SELECT max(position) FROM ledger_snapshots").first?.decode(Int64?.self)
            return try newest.flatMap { $0 }.map { try StoredPosition.from($0) }
        }

        func catalogs() throws -> [(effectiveFrom: UInt64, json: [UInt8])] {
            try run("SELECT effective_from, catalog FROM ledger_catalogs ORDER BY effective_from").map { row in
                let (from, json) = try row.decode((Int64, ByteBuffer).self)
                return (try StoredPosition.from(from), Array(json.readableBytesView))
            }
        }

        private func metaValue(_ key: String) throws -> String? {
            try run("SELECT value FROM ledger_meta WHERE key = \(key)").first?.decode(String.self)
        }

        func formatMarker() throws -> String? {
            try metaValue("format")
        }

        func lastForgetPosition() throws -> UInt64 {
            guard let value = try metaValue("lastForget") else { return 0 }
            guard let position = UInt64(value) else { throw StorageError(.damaged, "ledger_meta's last forget is \"\(value)\"") }
            return position
        }

        func counts() throws -> StorageCounts {
            let row = try run("""
                SELECT (SELECT count(*) FROM ledger_events), (SELECT count(*) FROM ledger_transactions),
                       (SELECT count(*) FROM ledger_revocations)
                """).first
            guard let row else { throw StorageError(.io, "PostgreSQL returned no counts") }
            let (records, transactions, revocations) = try row.decode((Int64, Int64, Int64).self)
            // A database older than migration 3 has no customers.
            let hasCustomers = present.customers
            let customers = hasCustomers ? try run("SELECT count(*) FROM ledger_app_transactions").first?.decode(Int64.self) ?? 0 : 0
            let hasAccounts = present.accounts
            let handles = hasAccounts ? try run("SELECT count(*) FROM ledger_accounts").first?.decode(Int64.self) ?? 0 : 0
            let proofs = hasAccounts ? try run("SELECT count(*) FROM ledger_proofs").first?.decode(Int64.self) ?? 0 : 0
            // Event ids and history are columns of the events table: one row each per record.
            return StorageCounts(
                records: Int(records), eventIDs: Int(records), transactions: Int(transactions),
                revocations: Int(revocations), historyEntries: Int(records), appTransactions: Int(customers),
                accountHandles: Int(handles), proofs: Int(proofs))
        }

        func snapshotHeaders() throws -> [(position: UInt64, bytes: [UInt8])] {
            try run("SELECT position, header FROM ledger_snapshots ORDER BY position").map { row in
                let (position, header) = try row.decode((Int64, ByteBuffer).self)
                return (try StoredPosition.from(position), Array(header.readableBytesView))
            }
        }

        func accountState<R>(_ account: String, atOrBefore position: UInt64, _ body: (UInt64, UnsafeRawBufferPointer) throws -> R) throws -> R? {
            guard let row = try run("""
                SELECT version, state FROM ledger_account_states
                WHERE account = \(Keys.bytes(account)) AND version <= \(Int64(clamping: position))
                ORDER BY version DESC LIMIT 1
                """).first else { return nil }
            let (version, state) = try row.decode((Int64, ByteBuffer).self)
            return try state.withUnsafeReadableBytes { try body(try StoredPosition.from(version), $0) }
        }

        func accountStateVersions(_ account: String) throws -> [UInt64] {
            try run("SELECT version FROM ledger_account_states WHERE account = \(Keys.bytes(account)) ORDER BY version")
                .map { try StoredPosition.from(try $0.decode(Int64.self)) }
        }

        func accountStateVersions(of accounts: [String]) throws -> [[UInt64]] {
            var versions = [[UInt64]](repeating: [], count: accounts.count)
            // A query per 10,000 accounts (a snapshot's slice), not one per account.
            for start in stride(from: 0, to: accounts.count, by: 10_000) {
                let chunk = accounts[start..<min(start + 10_000, accounts.count)].map(Keys.bytes)
                let rows = try run("""
                    SELECT a.i, s.version FROM unnest(\(chunk)::bytea[]) WITH ORDINALITY AS a(account, i)
                    JOIN ledger_account_states s ON s.account = a.account ORDER BY a.i, s.version
                    """)
                for row in rows {
                    let (index, version) = try row.decode((Int64, Int64).self)
                    versions[start + Int(index) - 1].append(try StoredPosition.from(version))
                }
            }
            return versions
        }

        func forEachAccountState(_ body: (String, UInt64, UnsafeRawBufferPointer) throws -> Void) throws {
            var after: (ByteBuffer, Int64)?
            while true {
                let rows: PostgresQueryResult
                if let (account, version) = after {
                    rows = try run("""
                        SELECT account, version, state FROM ledger_account_states WHERE (account, version) > (\(account), \(version))
                        ORDER BY account, version LIMIT \(Self.pageSize)
                        """)
                } else {
                    rows = try run("""
                        SELECT account, version, state FROM ledger_account_states ORDER BY account, version LIMIT \(Self.pageSize)
                        """)
                }
                for row in rows {
                    let (account, version, state) = try row.decode((ByteBuffer, Int64, ByteBuffer).self)
                    try state.withUnsafeReadableBytes { try body(Keys.string(account), try StoredPosition.from(version), $0) }
                    after = (account, version)
                }
                if rows.count < Self.pageSize { return }
            }
        }
    }

    // MARK: Writing

    final class Writer: Reader, LedgerStorageWriter {
        /// The last position: the head as locked, plus what this write appended.
        private(set) var head: UInt64
        private(set) var isDiscarded = false
        /// Rows not yet sent: one statement for them all (`flush`), before the next query or
        /// the commit.
        private var pending = PendingWrites()
        /// What this write knows of the indexes (`remember`, and its own writes): a key present
        /// with nil is known to be absent. Other keys are looked up.
        /// By bytes, as the indexes compare them (`String` would take "é" and "e\u{301}" for one).
        private var eventPositions: [UTF8Key: UInt64?] = [:]
        private var holders: [UTF8Key: TransactionHolder?] = [:]
        private var revocations: [UTF8Key: UInt64?] = [:]
        /// Account states as of `statesSnapshot`, as `lookupQuery` found them (nil: none).
        private var accountStates: [UTF8Key: (version: UInt64, state: ByteBuffer)?] = [:]
        private var statesSnapshot: UInt64?
        /// The account table's handles as `lookupQuery` found them (nil: none), and its last.
        private var accountHandles: [UTF8Key: UInt64?] = [:]
        private var lastHandle: UInt64?

        /// The newest catalog, as locked (and as this write recorded).
        private var newestCatalog: CatalogVersion?
        private(set) var recordedCatalog = false
        /// The newest snapshot's position, as locked; `.none` until `remember` and once this
        /// write changed the snapshots (it is read then).
        private var newestSnapshot: UInt64??

        init(connection: BlockingConnection, head: UInt64, present: PresentTables) {
            self.head = head
            super.init(connection: connection, present: present)
        }

        override func newestCatalogVersion() throws -> CatalogVersion? {
            newestCatalog
        }

        override func newestSnapshotPosition() throws -> UInt64? {
            if let known = newestSnapshot { return known }
            return try super.newestSnapshotPosition()
        }

        override func run(_ query: PostgresQuery) throws -> PostgresQueryResult {
            flush()
            return try super.run(query)
        }

        /// Sends the pending rows as one statement (without waiting: checked at the next query
        /// or the commit), with the head's move and the commit's notification when this is the
        /// write's last.
        func flush(movingHead: Bool = false, notifying notification: (channel: String, payload: String)? = nil) {
            guard let statement = pending.statement(head: movingHead ? head : nil, notification: notification) else { return }
            connection.send(statement)
            pending = PendingWrites()
        }

        override func lastPosition() throws -> UInt64 {
            head
        }

        /// One query, sent once the head is locked: the newest catalog and snapshot (they tell
        /// a catch-up whether another process grew the catalog or wrote a snapshot) and what a
        /// batch's rules will look up: its event ids, the holders and revocations of the store
        /// transactions its events name, and the states of its accounts that are not in memory
        /// (the newest at or before the snapshot).
        static func lookupQuery(_ lookups: Lookups?) -> PostgresQuery {
            let newest = """
                SELECT 4, NULL::bytea, (SELECT max(position) FROM ledger_snapshots), NULL::bytea, NULL::bytea, NULL::boolean, NULL::bytea, NULL::bigint
                UNION ALL
                (SELECT 5, NULL, effective_from, NULL, NULL, NULL, NULL, length(catalog)::bigint FROM ledger_catalogs ORDER BY effective_from DESC LIMIT 1)
                """
            guard let lookups else { return PostgresQuery(unsafeSQL: newest) }
            // Without repeats, by bytes (a `Set<String>` would keep one of "é" and "e\u{301}").
            let ids: [ByteBuffer] = Set(lookups.eventIDs.map { UTF8Key($0) }).map { Keys.bytes($0.string) }
            let keys: [ByteBuffer] = Set(lookups.transactions.map { UTF8Key($0) }).map { Keys.bytes($0.string) }
            let accounts: [ByteBuffer] = lookups.snapshot == nil ? [] : lookups.accounts.map(Keys.bytes)
            let snapshot = Int64(clamping: lookups.snapshot ?? 0)
            let named: [ByteBuffer] = lookups.accountHandles.map(Keys.bytes)
            return """
                \(unescaped: newest)
                UNION ALL
                SELECT 6, account, handle, NULL, NULL, NULL, NULL, NULL FROM ledger_accounts WHERE account = ANY(\(named)::bytea[])
                UNION ALL
                SELECT 7, NULL, (SELECT coalesce(max(handle), 0) FROM ledger_accounts), NULL, NULL, NULL, NULL, NULL
                UNION ALL
                SELECT 0, event_id, position, NULL, NULL, NULL, NULL, NULL FROM ledger_events WHERE event_id = ANY(\(ids)::bytea[])
                UNION ALL
                SELECT 1, transaction_id, position, account, payment, credits_consumable, NULL, NULL FROM ledger_transactions WHERE transaction_id = ANY(\(keys)::bytea[])
                UNION ALL
                SELECT 2, transaction_id, position, NULL, NULL, NULL, NULL, NULL FROM ledger_revocations WHERE transaction_id = ANY(\(keys)::bytea[])
                UNION ALL
                (SELECT DISTINCT ON (account) 3, account, version, NULL, NULL, NULL, state, NULL FROM ledger_account_states
                 WHERE account = ANY(\(accounts)::bytea[]) AND version <= \(snapshot) ORDER BY account, version DESC)
                """
        }

        /// Takes what `lookupQuery` found: the newest catalog and snapshot, and the lookups'
        /// keys, which need no query in this write.
        func remember(_ lookups: Lookups?, found rows: PostgresQueryResult) throws {
            if let lookups {
                for id in lookups.eventIDs { eventPositions[UTF8Key(id)] = .some(nil) }
                for key in lookups.transactions {
                    holders[UTF8Key(key)] = .some(nil)
                    revocations[UTF8Key(key)] = .some(nil)
                }
                if let snapshot = lookups.snapshot {
                    statesSnapshot = snapshot
                    for account in lookups.accounts { accountStates[UTF8Key(account)] = .some(nil) }
                }
                for account in lookups.accountHandles { accountHandles[UTF8Key(account)] = .some(nil) }
            }
            for row in rows {
                let (kind, key, position, account, payment, credits, state, size) = try row.decode(
                    (Int32, ByteBuffer?, Int64?, ByteBuffer?, ByteBuffer?, Bool?, ByteBuffer?, Int64?).self)
                switch (kind, key, position) {
                case (4, _, _):
                    newestSnapshot = .some(try position.map { try StoredPosition.from($0) })
                case (5, _, let position?):
                    guard let size else { throw StorageError(.damaged, "a catalog is missing its bytes") }
                    newestCatalog = CatalogVersion(effectiveFrom: try StoredPosition.from(position), size: Int(size))
                case (0, let key?, let position?):
                    eventPositions[UTF8Key(Keys.string(key))] = try StoredPosition.from(position)
                case (1, let key?, let position?):
                    guard let account, let payment, let credits else { throw StorageError(.damaged, "a transaction index entry is incomplete") }
                    holders[UTF8Key(Keys.string(key))] = TransactionHolder(
                        entry: EntryReference(account: Keys.string(account), payment: Keys.string(payment)),
                        position: try StoredPosition.from(position), creditsConsumable: credits)
                case (2, let key?, let position?):
                    revocations[UTF8Key(Keys.string(key))] = try StoredPosition.from(position)
                case (3, let key?, let position?):
                    guard let state else { throw StorageError(.damaged, "an account state is missing its bytes") }
                    accountStates[UTF8Key(Keys.string(key))] = (try StoredPosition.from(position), state)
                case (6, let key?, let handle?):
                    accountHandles[UTF8Key(Keys.string(key))] = try StoredPosition.from(handle)
                case (7, _, let handle?):
                    lastHandle = try StoredPosition.from(handle)
                default:
                    throw StorageError(.damaged, "PostgreSQL answered the lookups with an incomplete row (kind \(kind))")
                }
            }
            guard newestSnapshot != nil else { throw StorageError(.io, "PostgreSQL returned no row for the newest snapshot") }
        }

        override func position(ofEventID id: String) throws -> UInt64? {
            if let known = eventPositions[UTF8Key(id)] { return known }
            return try super.position(ofEventID: id)
        }

        override func holder(ofTransaction transaction: String) throws -> TransactionHolder? {
            if let known = holders[UTF8Key(transaction)] { return known }
            return try super.holder(ofTransaction: transaction)
        }

        override func accountState<R>(
            _ account: String, atOrBefore position: UInt64, _ body: (UInt64, UnsafeRawBufferPointer) throws -> R
        ) throws -> R? {
            if position == statesSnapshot, let known = accountStates[UTF8Key(account)] {
                guard let (version, state) = known else { return nil }
                return try state.withUnsafeReadableBytes { try body(version, $0) }
            }
            return try super.accountState(account, atOrBefore: position, body)
        }

        override func revocation(ofTransaction transaction: String) throws -> UInt64? {
            if let known = revocations[UTF8Key(transaction)] { return known }
            return try super.revocation(ofTransaction: transaction)
        }

        func append(record: [UInt8], at position: UInt64, eventID: String, account: String) throws {
            precondition(position == head + 1, "records are appended at the next position")
            pending.append(record: record, at: position, eventID: eventID, account: account)
            eventPositions[UTF8Key(eventID)] = position
            head = position
        }

        func setHolder(_ holder: TransactionHolder, ofTransaction transaction: String) throws {
            holders[UTF8Key(transaction)] = holder
            pending.setHolder(holder, ofTransaction: transaction)
        }

        func setRevocation(_ position: UInt64, ofTransaction transaction: String) throws {
            revocations[UTF8Key(transaction)] = position
            pending.setRevocation(position, ofTransaction: transaction)
        }

        override func accountHandle(of account: String) throws -> UInt64? {
            if let known = accountHandles[UTF8Key(account)] { return known }
            return try super.accountHandle(of: account)
        }

        override func lastAccountHandle() throws -> UInt64 {
            if let lastHandle { return lastHandle }
            return try super.lastAccountHandle()
        }

        func putAccountName(_ account: String, handle: UInt64) throws {
            pending.putAccountName(account, handle: handle)
            accountHandles[UTF8Key(account)] = handle
            lastHandle = handle
        }

        func putProof(_ proof: String, at position: UInt64) throws {
            pending.putProof(proof, at: position)
        }

        func deleteProof(at position: UInt64) throws {
            flush()
            connection.send("DELETE FROM ledger_proofs WHERE position = \(Int64(clamping: position))")
        }

        func renameAccount(handle: UInt64, from old: String, to new: String) throws {
            // After the rows this write has yet to send (its records name `old` too).
            flush()
            let (from, to) = (Keys.bytes(old), Keys.bytes(new))
            connection.send("UPDATE ledger_accounts SET account = \(to) WHERE handle = \(Int64(clamping: handle))")
            connection.send("UPDATE ledger_events SET account = \(to) WHERE account = \(from)")
            connection.send("UPDATE ledger_transactions SET account = \(to) WHERE account = \(from)")
            connection.send("UPDATE ledger_app_transactions SET account = \(to) WHERE account = \(from)")
            accountHandles[UTF8Key(old)] = .some(nil)
            accountHandles[UTF8Key(new)] = handle
            // Looked up again, renamed, if this write asks.
            holders.removeAll()
        }

        func forgetAppTransaction(_ appTransaction: String) throws {
            flush()
            connection.send("DELETE FROM ledger_app_transactions WHERE app_transaction = \(Keys.bytes(appTransaction))")
        }

        func claimAppTransaction(_ appTransaction: String, for account: String) throws {
            // Sent with the write's other rows; the first committed claim stays, whichever server made it.
            pending.claimAppTransaction(appTransaction, for: account)
        }

        func recordClock(_ reading: ClockReading) throws {
            connection.send("""
                INSERT INTO ledger_clock (position, seconds, nanoseconds)
                VALUES (\(Int64(clamping: reading.position)), \(reading.time.seconds), \(Int32(reading.time.nanoseconds)))
                ON CONFLICT DO NOTHING
                """)
        }

        func setFeedState(_ key: String, _ value: [UInt8]?) throws {
            pending.setFeedState(key, value)
        }

        func recordCatalog(_ json: [UInt8], effectiveFrom position: UInt64) throws {
            if position >= newestCatalog?.effectiveFrom ?? 0 {
                newestCatalog = CatalogVersion(effectiveFrom: position, size: json.count)
            }
            recordedCatalog = true
            connection.send("""
                INSERT INTO ledger_catalogs (effective_from, catalog) VALUES (\(Int64(position)), \(ByteBuffer(bytes: json)))
                ON CONFLICT (effective_from) DO UPDATE SET catalog = excluded.catalog
                """)
        }

        private func putMeta(_ key: String, _ value: String) {
            connection.send("""
                INSERT INTO ledger_meta (key, value) VALUES (\(key), \(value)) ON CONFLICT (key) DO UPDATE SET value = excluded.value
                """)
        }

        func setLastForgetPosition(_ position: UInt64) throws {
            putMeta("lastForget", String(position))
        }

        func setFormatMarker(_ marker: String) throws {
            putMeta("format", marker)
        }

        func putSnapshotHeader(_ bytes: [UInt8], position: UInt64) throws {
            newestSnapshot = .none
            connection.send("""
                INSERT INTO ledger_snapshots (position, header) VALUES (\(Int64(position)), \(ByteBuffer(bytes: bytes)))
                ON CONFLICT (position) DO UPDATE SET header = excluded.header
                """)
        }

        func deleteSnapshotHeader(position: UInt64) throws {
            newestSnapshot = .none
            connection.send("DELETE FROM ledger_snapshots WHERE position = \(Int64(position))")
        }

        func putAccountState(_ bytes: [UInt8], account: String, version: UInt64) throws {
            statesSnapshot = nil
            pending.putAccountState(bytes, account: account, version: version)
        }

        func deleteAccountState(account: String, version: UInt64) throws {
            statesSnapshot = nil
            pending.deleteAccountState(account: account, version: version)
        }

        func removeAllSnapshots() throws {
            statesSnapshot = nil
            newestSnapshot = .none
            pending.forgetAccountStates()
            connection.send("DELETE FROM ledger_snapshots")
            connection.send("DELETE FROM ledger_account_states")
        }

        func discard() {
            isDiscarded = true
        }
    }
}

/// Keys are stored as their UTF-8 bytes (`bytea`).
enum Keys {
    static func bytes(_ string: String) -> ByteBuffer {
        ByteBuffer(string: string)
    }

    static func string(_ buffer: ByteBuffer) -> String {
        String(buffer: buffer)
    }
}
