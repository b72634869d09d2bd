import LedgerTestSupport
import LMDB
import Logging
import PostgresNIO
import Testing
@testable import PurchaseLedger
@testable import PurchaseLedgerLMDB
@testable import PurchaseLedgerPostgres
import PurchaseLedgerLocation

/// Record format 2 (accounts by handle, `LogRecordCodec`) and ledgers of format 1, written
/// before it: read-only, and migrated by copying.
struct RecordFormatTests {
    @Test(arguments: Backend.available)
    func theAccountTableHoldsEachAccountOnceAndTheRecordsNone(on backend: Backend) async throws {
        try await withLocation(on: backend) { location in
            let ledger = try Ledger.open(location: location, catalog: TransferTests.catalog, configuration: .testing)
            let account = "customer-5e2b9c"
            var purchase = TransferTests.purchase(
                "e1", account: account, transaction: "1000001", original: "1000001", product: "lifetime", expires: nil)
            // Apple's report, carrying the account as its token, and its proof.
            let proof = "eyJhbGciOiJFUzI1NiJ9.eyJhcHBBY2NvdW50VG9rZW4iOiJjdXN0b21lci01ZTJiOWMifQ.c2ln"
            guard case .storeTransaction(var fact) = purchase[1].payload else { throw TestFailure("not a store report") }
            (fact.appAccountToken, fact.signed) = (account, proof)
            purchase[1].payload = .storeTransaction(fact)
            _ = try await ledger.appendAll(purchase)
            _ = try await ledger.appendAll(Event.transfer(
                originalTransaction: "1000001", from: account, to: "customer-0a7f", at: TransferTests.now))
            await ledger.close()
            let log = try LedgerLog.open(location: location)
            defer { log.close() }
            let (names, counts, stored) = try log.storage.read { reader in
                (try reader.accountNames(from: 1, limit: 10), try reader.counts(), try reader.proof(at: 2))
            }
            #expect(names.map(\.handle) == [1, 2])
            #expect(names.map(\.account) == [account, "customer-0a7f"])
            #expect(counts.accountHandles == 2)
            // The proof is kept apart, and the event comes back whole.
            #expect(stored == proof)
            #expect(counts.proofs == 1)
            var events: [Event] = []
            try log.forEachRecord { events.append($0.event) }
            #expect(events[1] == purchase[1])
            var records: [[UInt8]] = []
            try log.storage.read { reader in
                try reader.forEachRecord(from: 1, through: .max) { _, bytes in
                    records.append(Array(bytes))
                    return true
                }
            }
            #expect(records.count == 4)
            for record in records {
                #expect(record[0] == 2)
                #expect(occurrences(of: Array(account.utf8), in: record).isEmpty)
            }
            #expect(log.verify().isIntact)
        }
    }

    @Test(arguments: Backend.available)
    func aLedgerOfFormatOneOpensReadOnlyAndCopiesToFormatTwo(on backend: Backend) async throws {
        try await withLocation(on: backend) { location in
            var generator = EventStreamGenerator(seed: 28)
            let ledger = try Ledger.open(location: location, catalog: wordGameCatalog, configuration: .testing)
            _ = try await ledger.append(contentsOf: generator.events(600))
            let state = try ledger.currentState()
            await ledger.close()
            let exported = try exportBytes(location)
            try downgradeToFormatOne(location, on: backend)

            // Written to: refused, saying how to migrate.
            #expect {
                try Ledger.open(location: location, configuration: .testing)
            } throws: { error in
                let error = error as? StorageError
                return error?.code == .unsupportedFormat && error?.message.contains("ledger copy") == true
            }
            // Read: the same answers, from its snapshot and replayed, the same export, intact.
            var readOnly = Ledger.Configuration.testing
            readOnly.readOnly = true
            for useSnapshots in [true, false] {
                readOnly.useSnapshots = useSnapshots
                let reopened = try Ledger.open(location: location, configuration: readOnly)
                #expect(try reopened.currentState() == state)
                await reopened.close()
            }
            #expect(try exportBytes(location) == exported)
            let old = try LedgerLog.open(location: location)
            #expect(old.verify().isIntact)
            #expect(try old.storage.read { try $0.counts() }.accountHandles == 0)
            #expect(try old.storage.read { try $0.counts() }.proofs == 0)

            // Copied, event by event: a ledger of format 2 with the same answers and export.
            try await withLocation(on: backend) { copy in
                let migrated = try Ledger.open(location: copy, catalog: try old.catalog(), configuration: .testing)
                var events: [Event] = []
                for try await record in old.records() { events.append(record.event) }
                old.close()
                let outcomes = try await migrated.append(contentsOf: events)
                #expect(outcomes.allSatisfy { if case .success(.appended) = $0 { true } else { false } })
                #expect(try migrated.currentState() == state)
                await migrated.close()
                #expect(try exportBytes(copy) == exported)
                let log = try LedgerLog.open(location: copy)
                defer { log.close() }
                #expect(log.verify().isIntact)
                #expect(try log.storage.read { try $0.formatMarker() }?.hasSuffix("/2") == true)
                #expect(try log.storage.read { try $0.counts() }.proofs > 0, "the stream's proofs are kept apart in the copy")
            }
        }
    }

    /// The id the server gives a call names the customer (the token it sets, the app
    /// transaction id it reads) by its handle in the account table, never itself nor a digest of
    /// it: an event id stays in the log after a forget, and a digest would let anyone who knows
    /// the name find the customer's events again (issue 41, point 3).
    @Test func aCallsEventIDNamesTheCustomerByHandle() {
        #expect(AppStoreCall.eventID(.setAppAccountToken, transaction: "12345", personalHandle: 7) == "appstore-call/setAppAccountToken/12345/h7")
        #expect(AppStoreCall.eventID(.getAppTransactionInfo, transaction: "71134", personalHandle: 9) == "appstore-call/getAppTransactionInfo/h9")
        #expect(AppStoreCall.eventID(.finishTransaction, transaction: "12345", personalHandle: 7) == "appstore-call/finishTransaction/12345")
    }

    @Test func aRecordOfTheOtherFormatIsDamage() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/ledger"
            let ledger = try Ledger.open(at: path, catalog: wordGameCatalog, configuration: .testing)
            var generator = EventStreamGenerator(seed: 3)
            _ = try await ledger.append(contentsOf: generator.events(50))
            await ledger.close()
            // One record of format 1 in a ledger of format 2.
            let storage = try LMDBLedgerStorage(directory: path, configuration: .init())
            var found: LogRecord?
            try LogReader(storage: storage).forEachRecord(from: 10, through: 10) { found = $0 }
            let event = try #require(found)
            try storage.environment.write { txn in
                try txn.put(LogRecordCodec.formatOneRecord(event.event, position: event.position), in: storage.tables.log, forKey: event.position)
            }
            storage.close()
            let log = try LedgerLog.open(location: path)
            defer { log.close() }
            let report = log.verify()
            #expect(report.damage?.kind == .undecodable)
            #expect(report.damage?.position == event.position)
        }
    }

    private func exportBytes(_ location: String) throws -> [UInt8] {
        let log = try LedgerLog.open(location: location)
        defer { log.close() }
        var bytes: [UInt8] = []
        try log.exportJSONLines { bytes += $0 }
        return bytes
    }

    /// A ledger of format 2 written before `AccountHistory` (its history by account name) is
    /// read as it is when opened read-only, and moved to the history by handle when opened to
    /// write: the same positions before and after, then appends go on.
    @Test func aHistoryByNameIsMovedToHandlesWhenTheLedgerIsOpenedToWrite() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/ledger"
            var generator = EventStreamGenerator(seed: 31)
            let ledger = try Ledger.open(at: path, catalog: wordGameCatalog, configuration: .testing)
            _ = try await ledger.append(contentsOf: generator.events(400))
            let state = try ledger.currentState()
            await ledger.close()
            func positionsByAccount() throws -> [String: [UInt64]] {
                let log = try LedgerLog.open(location: path)
                defer { log.close() }
                return try log.storage.read { reader in
                    try Dictionary(uniqueKeysWithValues: state.accountIDs.map { ($0, try reader.positions(ofAccount: $0, after: 0, limit: .max)) })
                }
            }
            let expected = try positionsByAccount()
            var accounts: [(UInt64, String)] = []
            let log = try LedgerLog.open(location: path)
            try log.forEachRecord { accounts.append(($0.position, $0.event.account)) }
            log.close()
            #expect(expected.values.map(\.count).reduce(0, +) == accounts.count)
            let storage = try LMDBLedgerStorage(directory: path, configuration: .init())
            try putHistoryByName(storage, accounts)
            storage.close()

            #expect(try positionsByAccount() == expected, "read by name, read-only")
            // Another process opens it to write, and moves the history, while this one has it
            // open read-only: LMDB would read the old table as empty; it refuses instead.
            var readOnly = Environment.Configuration()
            readOnly.readOnly = true
            let stale = try LMDBLedgerStorage(directory: path, configuration: readOnly)
            let someone = try #require(expected.keys.first)
            #expect(try stale.read { try $0.positions(ofAccount: someone, after: 0, limit: .max) } == expected[someone])
            let moving = try await awaitCommand(builtExecutable("ledger"), ["snapshot", path])
            #expect(moving.status == 0, "\(moving)")
            #expect {
                try stale.read { try $0.positions(ofAccount: someone, after: 0, limit: .max) }
            } throws: { ($0 as? StorageError)?.code == .unsupportedFormat }
            stale.close()
            let reopened = try Ledger.open(at: path, catalog: wordGameCatalog, configuration: .testing)
            #expect(try reopened.currentState() == state)
            _ = try await reopened.append(contentsOf: generator.events(100))
            await reopened.close()
            let moved = try LMDBLedgerStorage(directory: path, configuration: .init())
            let oldTable = try moved.environment.openTables { try $0.existingTable("history", key: [UInt8].self, value: EmptyValue.self) }
            moved.close()
            #expect(oldTable == nil, "the history by name is gone once moved")
            let after = try positionsByAccount()
            for (account, positions) in expected { #expect(after[account]?.prefix(positions.count).elementsEqual(positions) == true) }
            let verified = try LedgerLog.open(location: path)
            defer { verified.close() }
            #expect(verified.verify().isIntact)
            let counts = try verified.storage.read { try $0.counts() }
            #expect(counts.historyEntries == counts.records)
            #expect(counts.records > accounts.count)
        }
    }

    /// Gives an LMDB ledger the history of the versions before `AccountHistory`: `history`, by
    /// account name, without the tables by handle (and, as those versions, every id in `events`).
    private func putHistoryByName(_ storage: LMDBLedgerStorage, _ accounts: [(position: UInt64, account: String)]) throws {
        try OlderIndexLayouts.putEveryIDInEvents(storage)
        let (history, indexed, recent) = try storage.environment.openTables { opener in
            (try opener.table("history", key: [UInt8].self, value: EmptyValue.self),
             try opener.table("accountHistory", key: [UInt8].self, value: EmptyValue.self),
             try opener.table("recentHistory", key: UInt64.self, value: UInt64.self))
        }
        try storage.environment.write { txn in
            for (position, account) in accounts {
                try txn.put(EmptyValue(), in: history, forKey: try #require(LMDBLedgerStorage.historyKey(account, position)))
            }
            try txn.deleteTable(indexed)
            try txn.deleteTable(recent)
        }
    }

    /// Makes the ledger what format 1 wrote: every record with its accounts inline, no account
    /// table, the old marker.
    private func downgradeToFormatOne(_ location: String, on backend: Backend) throws {
        let log = try LedgerLog.open(location: location)
        var records: [(position: UInt64, bytes: [UInt8], account: String)] = []
        try log.forEachRecord { records.append(($0.position, LogRecordCodec.formatOneRecord($0.event, position: $0.position), $0.event.account)) }
        log.close()
        switch backend {
        case .lmdb:
            let storage = try LMDBLedgerStorage(directory: location, configuration: .init())
            defer { storage.close() }
            try putHistoryByName(storage, records.map { ($0.position, $0.account) })
            try storage.environment.write { txn in
                for record in records { try txn.put(record.bytes, in: storage.tables.log, forKey: record.position) }
                try txn.removeAll(in: try #require(storage.tables.accountNames))
                try txn.removeAll(in: try #require(storage.tables.accountHandles))
                try txn.removeAll(in: try #require(storage.tables.proofs))
                try txn.put(LMDBLedgerStorage.formatOneMarker, in: storage.tables.meta, forKey: "format")
            }
        case .postgres:
            let connection = try BlockingConnection.connect(try PostgresLocation(url: location), logger: Logger(label: "test"))
            defer { connection.close() }
            try connection.query("BEGIN")
            for record in records {
                try connection.query("UPDATE ledger_events SET record = \(ByteBuffer(bytes: record.bytes)) WHERE position = \(Int64(record.position))")
            }
            try connection.query("DELETE FROM ledger_accounts")
            try connection.query("DELETE FROM ledger_proofs")
            try connection.query("UPDATE ledger_meta SET value = \(PostgresLedgerStorage.formatOneMarker) WHERE key = 'format'")
            try connection.query("COMMIT")
        }
    }
}
