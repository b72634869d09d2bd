import LedgerTestSupport
import Logging
import PostgresNIO
import Testing
@testable import PurchaseLedger
@testable import PurchaseLedgerPostgres
import PurchaseLedgerLocation

/// The PostgreSQL backend: the same outcomes and projections as LMDB, its schema, and several
/// ledgers (as several processes would) appending to one database.
@Suite(.enabled(if: Backend.postgresURL != nil, "needs PURCHASE_LEDGER_TEST_POSTGRES (tools/test starts a cluster)"))
struct PostgresBackendTests {
    /// The same stream, in the same batches, on both backends: the same outcome for every
    /// event, the same state after every batch, the same records, and a clean
    /// `verify`. With frequent snapshots and a small cache, the rules read most accounts from
    /// a snapshot (on PostgreSQL, fetched with the batch's lookups).
    @Test(arguments: [5, 17, 42] as [UInt64], [false, true])
    func bothBackendsAgreeEventForEvent(seed: UInt64, snapshotting: Bool) async throws {
        var configuration = Ledger.Configuration.testing
        if snapshotting {
            configuration.snapshotInterval = 25
            configuration.cachedAccounts = 2
        }
        func run(_ backend: Backend) async throws -> (outcomes: [AppendResult], states: [LedgerState], records: [LogRecord], intact: Bool) {
            var generator = EventStreamGenerator(seed: seed)
            var random = SeededGenerator(seed: seed &* 7)
            return try await withLocation(on: backend) { location in
                let ledger = try Ledger.open(location: location, catalog: wordGameCatalog, configuration: configuration)
                var outcomes: [AppendResult] = []
                var states: [LedgerState] = []
                for _ in 0..<10 {
                    outcomes += try await ledger.append(contentsOf: generator.events(Int.random(in: 1...30, using: &random)))
                    states.append(try ledger.currentState())
                }
                var records: [LogRecord] = []
                for try await record in ledger.records() { records.append(record) }
                await ledger.close()
                let log = try LedgerLog.open(location: location)
                defer { log.close() }
                return (outcomes, states, records, log.verify().isIntact)
            }
        }
        let lmdb = try await run(.lmdb)
        let postgres = try await run(.postgres)
        #expect(Set(lmdb.outcomes.compactMap(\.code)).count >= 6, "the stream should break many rules")
        // Purchases moved and shared between accounts are among what both agree on.
        #expect(lmdb.records.contains { $0.event.type == .transferred }, "the stream should move a purchase")
        #expect(postgres.outcomes == lmdb.outcomes)
        #expect(postgres.states == lmdb.states)
        #expect(postgres.records == lmdb.records)
        #expect(lmdb.intact && postgres.intact)
    }

    @Test func reopeningReadsTheSnapshotAndTheTail() async throws {
        try await withLocation(on: .postgres) { location in
            var configuration = Ledger.Configuration.testing
            configuration.snapshotInterval = 50
            configuration.snapshotOnClose = false
            var generator = EventStreamGenerator(seed: 5)
            let ledger = try Ledger.open(location: location, catalog: wordGameCatalog, configuration: configuration)
            for _ in 0..<8 { _ = try await ledger.append(contentsOf: generator.events(40)) }
            let state = try ledger.currentState()
            await ledger.close()
            // The newest snapshot once closed: one written in the background may finish after
            // the appends return, on a loaded machine.
            let log = try LedgerLog.open(location: location)
            let snapshotAt = try log.snapshots().filter { $0.problem == nil }.map(\.position).max()
            log.close()
            #expect(snapshotAt != nil)

            let reopened = try Ledger.open(location: location, configuration: configuration)
            #expect(reopened.statistics().snapshotPosition == snapshotAt)
            #expect(try reopened.currentState() == state)
            #expect(try reopened.state(at: state.position / 2) == (try LedgerLog.open(location: location).state(at: state.position / 2)))
            await reopened.close()
        }
    }

    @Test func migrationsRunOnceEvenWhenProcessesStartTogether() async throws {
        try await withLocation(on: .postgres) { location in
            let ledgers = try await withThrowingTaskGroup(of: Ledger.self) { group in
                for _ in 0..<4 {
                    group.addTask { try Ledger.open(location: location, catalog: wordGameCatalog, configuration: .testing) }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            for ledger in ledgers { await ledger.close() }
            let connection = try BlockingConnection.connect(try PostgresLocation(url: location), logger: Logger(label: "test"))
            defer { connection.close() }
            let versions = try connection.query("SELECT version FROM ledger_migrations ORDER BY version").map { try $0.decode(Int.self) }
            #expect(versions == PostgresSchema.migrations.map(\.version))
            let catalogs = try connection.query("SELECT count(*) FROM ledger_catalogs").first!.decode(Int64.self)
            #expect(catalogs == 1)
        }
    }

    /// Schema 5 rewrites the accounts' commitments that ledgers written before kept with a
    /// position (72 bytes, 40 once forgotten) in the form without it, so that a version from
    /// before refuses the database rather than take a stale position as a leaf's `previous`.
    @Test func schemaFiveRewritesTheCommitmentsKeptWithAPosition() async throws {
        try await withLocation(on: .postgres) { location in
            var ledger = try Ledger.open(location: location, catalog: TransferTests.catalog, configuration: .testing)
            try await ledger.appendAll(try ForgettingTests.history())
            try await ledger.extendProofTree()
            let before = try ledger.feedStates(prefix: "proof/")
            await ledger.close()
            let salted = try #require(before.first { $0.key == "proof/account/1" }?.value)
            #expect(salted.count == 64)
            let connection = try BlockingConnection.connect(try PostgresLocation(url: location), logger: Logger(label: "test"))
            defer { connection.close() }
            // As schema 4 kept them: one with its salt, one forgotten, each with a position.
            let position: [UInt8] = [0, 0, 0, 0, 0, 0, 0, 9]
            func bytea(_ bytes: [UInt8]) -> ByteBuffer { ByteBuffer(bytes: bytes) }
            try connection.query("UPDATE ledger_feeds SET value = \(bytea(Array(salted.prefix(32)) + position + Array(salted.suffix(32)))) WHERE key = \(bytea(Array("proof/account/1".utf8)))")
            try connection.query("INSERT INTO ledger_feeds (key, value) VALUES (\(bytea(Array("proof/account/77".utf8))), \(bytea(Array(salted.prefix(32)) + position)))")
            try connection.query("DELETE FROM ledger_migrations WHERE version = 5")
            ledger = try Ledger.open(location: location, configuration: .testing)
            let after = try ledger.feedStates(prefix: "proof/")
            await ledger.close()
            #expect(after.first { $0.key == "proof/account/1" }?.value == salted)
            #expect(after.first { $0.key == "proof/account/77" }?.value == Array(salted.prefix(32)))
            // Nothing else changed.
            #expect(after.filter { $0.key != "proof/account/77" }.map(\.key) == before.map(\.key))
            #expect(after.filter { !$0.key.hasPrefix("proof/account/") }.map(\.value) == before.filter { !$0.key.hasPrefix("proof/account/") }.map(\.value))
        }
    }

    @Test(arguments: [
        "postgres://", "postgres://host/db", "postgres://user@host", "postgres://user@host:99999/db",
        "postgres://user@host/db?sslmode=allow", "postgres://user@host/db?color=blue",
    ])
    func unusableURLsAreRefusedByName(url: String) {
        #expect(throws: StorageError.self) { try PostgresLocation(url: url) }
        let error = #expect(throws: StorageError.self) { try Ledger.open(location: url, catalog: wordGameCatalog) }
        #expect(error?.code == .notALedger)
    }

    @Test func urlsParseAndNeverShowTheirPassword() throws {
        let location = try PostgresLocation(url: "postgresql://app:s%40cret@db.example:6432/ledger?sslmode=require")
        #expect(location.username == "app")
        #expect(location.password == "s@cret")
        #expect(location.host == "db.example")
        #expect(location.port == 6432)
        #expect(location.database == "ledger")
        #expect(location.requiresTLS)
        #expect(!location.description.contains("cret"))
        #expect(PostgresLocation.redacting("postgres://app:secret@h/d") == "postgres://app:***@h/d")
        let fromEnvironment = try PostgresLocation(url: "postgres://app@h/d", environment: ["PGPASSWORD": "pw"])
        #expect(fromEnvironment.password == "pw")
    }

    @Test func aDatabaseWithoutALedgerIsNotALedger() async throws {
        try await withLocation(on: .postgres) { location in
            #expect(throws: CatalogError.self) { try Ledger.open(location: location) }
            #expect(throws: StorageError.self) { try LedgerLog.open(location: location) }
        }
    }

    /// A test that nests more databases than there are slots for tests with databases (a copy
    /// nests two) gets them all. When nested databases each took a slot, this test waited
    /// forever for its seventh, and a run in which six copies waited for their second hung.
    /// (No time limit: one would count the wait for the test's own slot behind the others.)
    @Test func aTestNestsMoreDatabasesThanThereAreSlots() async throws {
        func nest(_ depth: Int) async throws -> Set<String> {
            try await withTemporaryDatabase { location in
                depth == 1 ? [location] : try await nest(depth - 1).union([location])
            }
        }
        #expect(try await nest(DatabaseSlots.limit + 1).count == DatabaseSlots.limit + 1)
    }

    /// Only the events table checks its positions: a negative one elsewhere (a damaged or
    /// hand-edited database) is reported as damage where it is read, not a trap.
    @Test func aNegativePositionInTheDatabaseIsDamage() async throws {
        try await withLocation(on: .postgres) { location in
            let storage = try Backend.postgres.openStorage(location)
            defer { storage.close() }
            let holder = TransactionHolder(entry: EntryReference(account: "a1", payment: "p1"), position: 1, creditsConsumable: true)
            try storage.write { (writer: any LedgerStorageWriter) throws in
                try writer.append(record: [1], at: 1, eventID: "e1", account: "a1")
                try writer.setHolder(holder, ofTransaction: "t1")
                try writer.setRevocation(1, ofTransaction: "t2")
            }
            let other = try BlockingConnection.connect(try PostgresLocation(url: location), logger: Logger(label: "test"))
            defer { other.close() }
            _ = try other.query("UPDATE ledger_transactions SET position = -5")
            _ = try other.query("UPDATE ledger_revocations SET position = -1")
            for read in [{ (reader: any LedgerStorageReader) throws in _ = try reader.holder(ofTransaction: "t1") },
                         { (reader: any LedgerStorageReader) throws in _ = try reader.revocation(ofTransaction: "t2") },
                         { (reader: any LedgerStorageReader) throws in try reader.forEachHolder { _, _ in } }] {
                let error = #expect(throws: StorageError.self) { try storage.read(read) }
                #expect(error?.code == .damaged)
            }
        }
    }
}

/// Several ledgers on one database, as several server processes would have: each validates
/// against the database under its lock, and follows the others.
@Suite(.enabled(if: Backend.postgresURL != nil, "needs PURCHASE_LEDGER_TEST_POSTGRES (tools/test starts a cluster)"))
struct SharedPostgresLedgerTests {
    static let tenHints = "com.example.tenhints"

    /// Waits until `condition` holds, or `timeout` has passed (the caller checks which). The
    /// bound is generous: it is reached only when something is wrong, and a machine running
    /// every suite at once can take seconds where an idle one takes milliseconds.
    static func waitUntil(timeout: Duration = .seconds(60), _ condition: () throws -> Bool) async throws {
        let deadline = ContinuousClock.now + timeout
        while try !condition() && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    /// The options of a process that hears of the others' appends by its poll alone.
    static func pollingOnly(every interval: Duration) -> PostgresOptions {
        var options = PostgresOptions()
        options.notifications = false
        options.pollInterval = interval
        return options
    }

    /// The same store transaction reported to three ledgers at once, under different payments
    /// and ids. For three accounts: exactly one takes it, the others are told
    /// `transactionAlreadyCredited`. For one account (1.1): every entry takes it, and it is
    /// credited once.
    @Test(arguments: [false, true], 0..<3)
    func aContestedTransactionIsCreditedOnce(oneAccount: Bool, round: Int) async throws {
        try await withLocation(on: .postgres) { location in
            let ledgers = try (0..<3).map { _ in try Ledger.open(location: location, catalog: wordGameCatalog, configuration: .testing) }
            let accounts = oneAccount ? ["u0", "u0", "u0"] : ["u0", "u1", "u2"]
            let outcomes = try await withThrowingTaskGroup(of: [AppendResult].self) { group in
                for (index, ledger) in ledgers.enumerated() {
                    group.addTask {
                        var script = Script(accounts[index])
                        script.count = index * 100
                        return try await ledger.append(contentsOf: [
                            script.add("p\(index)", Self.tenHints), script.purchased("p\(index)", "t-\(round)"),
                        ])
                    }
                }
                return try await group.reduce(into: []) { $0 += $1 }
            }
            let appended = outcomes.count { if case .success(.appended) = $0 { true } else { false } }
            if oneAccount {
                #expect(appended == 6, "\(outcomes.map(\.summary))")
            } else {
                #expect(appended == 3 + 1, "three payments added, one purchase credited: \(outcomes.map(\.summary))")
                #expect(outcomes.compactMap(\.code) == [.transactionAlreadyCredited, .transactionAlreadyCredited])
            }
            for ledger in ledgers {
                try await ledger.catchUp()
                let balances = try Set(accounts).map { try ledger.balances(of: $0)["hints"] ?? 0 }
                #expect(balances.reduce(0, +) == 10, "credited once in all: \(balances)")
            }
            for ledger in ledgers { await ledger.close() }
        }
    }

    /// Three ledgers append interleaved streams concurrently. What each acknowledged is in the
    /// log at the position it was told, the positions run without a gap, and every ledger's
    /// projections, once caught up, equal a replay of the log from the start.
    @Test func concurrentWritersKeepOneGapFreeLogAndAgree() async throws {
        try await withLocation(on: .postgres) { location in
            let ledgers = try (0..<3).map { _ in try Ledger.open(location: location, catalog: wordGameCatalog, configuration: .testing) }
            let acknowledged = try await withThrowingTaskGroup(of: [(String, UInt64)].self) { group in
                for (index, ledger) in ledgers.enumerated() {
                    for writer in 0..<4 {
                        group.addTask {
                            var generator = EventStreamGenerator(seed: UInt64(index * 10 + writer))
                            var positions: [(String, UInt64)] = []
                            for _ in 0..<10 {
                                let events = generator.events(8)
                                for (event, result) in zip(events, try await ledger.append(contentsOf: events)) {
                                    if case .success(.appended(let position)) = result { positions.append((event.id, position)) }
                                }
                            }
                            return positions
                        }
                    }
                }
                return try await group.reduce(into: []) { $0 += $1 }
            }
            let log = try LedgerLog.open(location: location)
            defer { log.close() }
            let last = try log.lastPosition()
            #expect(Set(acknowledged.map(\.1)) == Set(1...last), "every position acknowledged once, none missing")
            var byPosition: [UInt64: String] = [:]
            try log.forEachRecord { byPosition[$0.position] = $0.event.id }
            for (id, position) in acknowledged { #expect(byPosition[position] == id) }
            #expect(log.verify().isIntact)
            let replayed = try log.state(at: last)
            for ledger in ledgers {
                #expect(try await ledger.catchUp() == last)
                #expect(try ledger.currentState() == replayed)
                await ledger.close()
            }
        }
    }

    /// A ledger that only reads follows the appends of another one by notification alone.
    @Test func aQuietLedgerFollowsByNotification() async throws {
        try await withLocation(on: .postgres) { location in
            var configuration = Ledger.Configuration.testing
            let writer = try Ledger.open(location: location, catalog: wordGameCatalog, configuration: configuration)
            var options = PostgresOptions()
            options.pollInterval = .seconds(3600)
            configuration.snapshotOnClose = false
            let follower = try Ledger.open(location: location, configuration: configuration, options: options)
            // Listening starts with a catch-up of its own: the second append can reach the
            // follower by its notification only.
            try await Self.waitUntil { (follower.storage as? PostgresLedgerStorage)?.isListening == true }
            var script = Script("u9")
            try await writer.appendAll([script.add("p1", Self.tenHints)])
            try await Self.waitUntil { follower.position == 1 }
            try await writer.appendAll([script.purchased("p1", "t1")])
            try await Self.waitUntil { follower.position == 2 }
            #expect(follower.position == 2)
            #expect(try follower.balances(of: "u9") == ["hints": 10])
            await follower.close()
            await writer.close()
        }
    }

    /// Three ledgers append and write snapshots often, so their sliced snapshots overlap: none
    /// prunes what another's snapshot reads. Every stored snapshot verifies, and a ledger opened
    /// from the newest one equals a full replay.
    @Test func snapshotsWrittenByEveryProcessStayCorrect() async throws {
        try await withLocation(on: .postgres) { location in
            var configuration = Ledger.Configuration.testing
            configuration.snapshotInterval = 40
            configuration.snapshotSlice = .zero
            configuration.cachedAccounts = 4
            configuration.snapshotsKept = 8
            let ledgers = try (0..<3).map { _ in try Ledger.open(location: location, catalog: wordGameCatalog, configuration: configuration) }
            try await withThrowingTaskGroup(of: Void.self) { group in
                // The same accounts from every ledger, so that their snapshots write them all.
                for (index, ledger) in ledgers.enumerated() {
                    group.addTask {
                        for round in 0..<15 {
                            var events: [Event] = []
                            for account in 0..<60 where (account + round + index) % 3 == 0 {
                                var script = Script("acct-\(account)")
                                script.count = 1000 * index + 10 * round
                                events += [script.add("p\(index)-\(round)", Self.tenHints),
                                           script.purchased("p\(index)-\(round)", "t-\(index)-\(round)-\(account)")]
                            }
                            try await ledger.appendAll(events)
                        }
                    }
                }
                try await group.waitForAll()
            }
            let log = try LedgerLog.open(location: location)
            defer { log.close() }
            let last = try log.lastPosition()
            let replayed = try log.state(useSnapshots: false)
            for ledger in ledgers {
                try await ledger.catchUp()
                #expect(try ledger.currentState() == replayed)
                await ledger.close()
            }
            #expect(try log.snapshots().count >= 2)
            #expect(log.verify().isIntact)
            var reopening = Ledger.Configuration.testing
            reopening.readOnly = true
            let reopened = try Ledger.open(location: location, configuration: reopening)
            #expect(reopened.position >= last)
            #expect(try reopened.currentState() == replayed)
            await reopened.close()
        }
    }

    /// The interleaving behind a failure of the test above on a loaded machine, step by step:
    /// one process begins a snapshot, another writes newer ones (and prunes the version of an
    /// account the first one's snapshot reads), then the first finishes. Its snapshot is
    /// dropped as overtaken, and it moves to the newest one at once, instead of reading that
    /// account from a snapshot that no longer has it.
    @Test func aSnapshotOvertakenByAnotherProcessIsDropped() async throws {
        try await withLocation(on: .postgres) { location in
            var configuration = Ledger.Configuration.testing
            configuration.snapshotInterval = nil
            configuration.snapshotOnClose = false
            configuration.snapshotsKept = 2
            configuration.cachedAccounts = 4
            let first = try Ledger.open(location: location, catalog: wordGameCatalog, configuration: configuration)
            // The second follows only when told to (as a process whose notifications lag).
            let options = Self.pollingOnly(every: .seconds(3600))
            let second = try Ledger.open(location: location, configuration: configuration, options: options)
            // 40 accounts (two slices of 32) and "quiet", which the second's next snapshot does
            // not write: it reads "quiet" from its previous snapshot's version.
            var scripts = (0..<40).map { Script("acct-\($0)") }
            var quiet = Script("quiet")
            try await first.appendAll(scripts.indices.flatMap { [scripts[$0].add("p1", Self.tenHints), scripts[$0].purchased("p1", "t1-\($0)")] }
                + [quiet.add("p1", Self.tenHints), quiet.purchased("p1", "t-quiet-1")])
            try await second.catchUp()
            #expect(try await second.writeSnapshot() == first.position)
            try await first.appendAll(scripts.indices.map { scripts[$0].add("p2", Self.tenHints) })
            try await second.catchUp()
            let begunAt = second.position
            try second.onWriter {
                #expect(second.live.beginSnapshot())
                let completed = try second.live.writeSnapshotSlice(keep: 2, budget: .zero)
                #expect(completed == nil, "one slice of two")
            }
            // The first changes "quiet" three times, a snapshot after each: the third prunes the
            // version the unfinished snapshot reads.
            for round in 2...4 {
                try await first.appendAll([quiet.add("p\(round)", Self.tenHints)])
                #expect(try await first.writeSnapshot() == first.position)
            }
            let last = first.position
            // The second finishes its snapshot: overtaken, it is dropped, and the second starts
            // over from the newest snapshot (and the events after its own position).
            _ = try await second.writeSnapshot()
            #expect(second.statistics().snapshotPosition == last, "not \(begunAt): the overtaken snapshot is not in force")
            #expect(second.position == last)
            #expect(try second.balances(of: "quiet") == ["hints": 10])
            let log = try LedgerLog.open(location: location)
            defer { log.close() }
            #expect(log.verify().isIntact)
            let replayed = try log.state(useSnapshots: false)
            #expect(try second.currentState() == replayed)
            await first.close()
            await second.close()
        }
    }

    /// Without notifications (an engine without LISTEN/NOTIFY), the poll alone brings other
    /// processes' appends.
    @Test func withoutNotificationsThePollFollows() async throws {
        try await withLocation(on: .postgres) { location in
            let options = Self.pollingOnly(every: .milliseconds(100))
            let writer = try Ledger.open(location: location, catalog: wordGameCatalog, configuration: .testing, options: options)
            let follower = try Ledger.open(location: location, configuration: .testing, options: options)
            var script = Script("u8")
            try await writer.appendAll([script.add("p1", Self.tenHints), script.purchased("p1", "t1")])
            try await Self.waitUntil { follower.position >= 2 }
            #expect(follower.position == 2)
            #expect(try follower.balances(of: "u8") == ["hints": 10])
            await follower.close()
            await writer.close()
        }
    }

    /// A catalog grown by one process is taken by the others when they next catch up, so they
    /// can replay and validate events of the new products.
    @Test func aGrownCatalogReachesTheOtherLedgers() async throws {
        try await withLocation(on: .postgres) { location in
            let first = try Ledger.open(location: location, catalog: wordGameCatalog, configuration: .testing)
            let grown = try Catalog(products: wordGameCatalog.products + [.init(id: "com.example.stars", type: .consumable, grants: ["stars": 5])])
            let second = try Ledger.open(location: location, catalog: grown, configuration: .testing)
            // Grown before any event, at the same position: still told apart, and taken.
            try await first.catchUp()
            #expect(first.catalog == grown)
            var script = Script("u3")
            try await second.appendAll([script.add("p1", "com.example.stars"), script.purchased("p1", "t1")])
            try await first.catchUp()
            #expect(first.catalog == grown)
            #expect(try first.balances(of: "u3") == ["stars": 5])
            try await first.appendAll([script.add("p2", "com.example.stars")])
            // A process that starts later with the older catalog (a rolling upgrade) uses the
            // ledger's grown one.
            let third = try Ledger.open(location: location, catalog: wordGameCatalog, configuration: .testing)
            #expect(third.catalog == grown)
            await third.close()
            await first.close()
            await second.close()
        }
    }

    /// A catalog grown while a write waits for the head lock is the one that write checks its
    /// events against: what it learns with the lock is read once the lock is granted, not as it
    /// stood before the wait.
    @Test func aWriteWaitingForTheLockSeesTheCatalogGrownMeanwhile() async throws {
        try await withLocation(on: .postgres) { location in
            let options = Self.pollingOnly(every: .seconds(3600))
            let ledger = try Ledger.open(location: location, catalog: wordGameCatalog, configuration: .testing, options: options)
            var script = Script("u4")
            try await ledger.appendAll([script.add("p1", Self.tenHints)])
            let grown = try Catalog(products: wordGameCatalog.products + [.init(id: "com.example.stars", type: .consumable, grants: ["stars": 5])])
            // Another process's write, by hand: it takes the head lock, records the grown
            // catalog, and commits while the ledger's write waits.
            let other = try BlockingConnection.connect(try PostgresLocation(url: location), logger: Logger(label: "test"))
            defer { other.close() }
            try other.query("BEGIN")
            _ = try other.query("SELECT position FROM ledger_head WHERE id = 1 FOR UPDATE")
            let event = script.add("p2", "com.example.stars")
            let appending = Task { try await ledger.append(contentsOf: [event]) }
            func waiters() throws -> Int64 {
                try other.query("""
                    SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'
                    """).first!.decode(Int64.self)
            }
            try await Self.waitUntil(timeout: .seconds(60)) { try waiters() > 0 }
            #expect(try waiters() == 1, "the ledger's write waits for the lock")
            _ = try other.query("INSERT INTO ledger_catalogs (effective_from, catalog) VALUES (2, \(ByteBuffer(string: grown.json)))")
            _ = try other.query("COMMIT")
            #expect(try await appending.value.map(\.summary) == ["appended 2"], "not unknownProduct")
            #expect(ledger.catalog == grown)
            await ledger.close()
        }
    }
}
