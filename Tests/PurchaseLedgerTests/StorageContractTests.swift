import LedgerTestSupport
import Testing
@testable import PurchaseLedger

/// The contract every storage backend keeps (`LedgerStorage`, `LedgerStorageReader`,
/// `LedgerStorageWriter`), run against each backend: what the ledger above relies on, stated
/// once. A third backend passes these, and the ledger-level suites that run on every backend
/// (`RuleTests`, `WordGameStoreTests`, `PostgresBackendTests.bothBackendsAgreeEventForEvent`),
/// before it is used.
struct StorageContractTests {
    /// Opens a new storage on `backend`, runs `body`, closes it; `reopen` opens the same
    /// location again (after the first is closed).
    private func withStorage(
        on backend: Backend, _ body: (any LedgerStorage, _ reopen: (Bool) throws -> any LedgerStorage) async throws -> Void
    ) async throws {
        try await withLocation(on: backend) { location in
            let storage = try backend.openStorage(location)
            var opened: [any LedgerStorage] = [storage]
            defer { for storage in opened { storage.close() } }
            try await body(storage) { readOnly in
                opened[0].close()
                let again = try backend.openStorage(location, readOnly: readOnly)
                opened.append(again)
                return again
            }
        }
    }

    /// The record at `position`: an event `e<position>` of the account whose handle is `handle`,
    /// by default the one `appendRecords` gives (accounts `a1`, `a2`, `a0` get 1, 2, 3). A
    /// record the ledger writes, since a backend may read its id and account from it (the LMDB
    /// backend's indexes do).
    private static func record(_ position: UInt64, handle: UInt64? = nil) -> [UInt8] {
        let event = Event.paymentAdded(
            id: "e\(position)", account: "account", at: Timestamp(seconds: 1_767_225_600 + Int64(position)),
            payment: "p\(position)", product: "com.example.tenhints")
        return LogRecordCodec.record(event, position: position) { _ in handle ?? (position % 3 == 0 ? 3 : position % 3) }.bytes
    }

    /// Appends records 1…count: event ids `e<n>`, accounts `a<n % 3>`.
    private func appendRecords(_ storage: any LedgerStorage, count: UInt64, from first: UInt64 = 1) throws {
        try storage.write { (writer: any LedgerStorageWriter) throws in
            for position in first..<(first + count) {
                try Self.append(position, account: "a\(position % 3)", writer)
            }
        }
    }

    /// Appends a record at `position`, event id `e<position>`, giving `account` the next handle
    /// first when the account table has none for it (as a ledger does: records name handles).
    private static func append(_ position: UInt64, account: String, _ writer: any LedgerStorageWriter) throws {
        if try writer.accountHandle(of: account) == nil {
            try writer.putAccountName(account, handle: try writer.lastAccountHandle() + 1)
        }
        let handle = try writer.accountHandle(of: account)
        try writer.append(record: record(position, handle: handle), at: position, eventID: "e\(position)", account: account)
    }

    @Test(arguments: Backend.available)
    func aNewStorageIsEmpty(on backend: Backend) async throws {
        try await withStorage(on: backend) { storage, _ in
            try storage.read { (reader: any LedgerStorageReader) throws in
                #expect(try reader.lastPosition() == 0)
                #expect(try reader.formatMarker() == nil)
                #expect(try reader.catalogs().isEmpty)
                #expect(try reader.newestCatalogVersion() == nil)
                #expect(try reader.newestSnapshotPosition() == nil)
                #expect(try reader.snapshotHeaders().isEmpty)
                #expect(try reader.accountCount() == 0)
                #expect(try reader.counts() == StorageCounts(records: 0, eventIDs: 0, transactions: 0, revocations: 0, historyEntries: 0))
                #expect(try reader.record(at: 1) { _ in } == false)
            }
        }
    }

    @Test(arguments: Backend.available)
    func recordsAndTheirIndexesAreReadBackInOrder(on backend: Backend) async throws {
        try await withStorage(on: backend) { storage, _ in
            try appendRecords(storage, count: 10)
            try storage.read { (reader: any LedgerStorageReader) throws in
                #expect(try reader.lastPosition() == 10)
                var visited: [UInt64] = []
                try reader.forEachRecord(from: 3, through: 10) { position, bytes in
                    #expect(Array(bytes) == Self.record(position))
                    visited.append(position)
                    return position < 6
                }
                #expect(visited == [3, 4, 5, 6], "visits in order and stops when told")
                var bytes: [UInt8] = []
                #expect(try reader.record(at: 7) { bytes = Array($0) })
                #expect(bytes == Self.record(7))
                #expect(try reader.record(at: 11) { _ in } == false)
                var some: [UInt64] = []
                try reader.records(at: [9, 2, 11, 5, 2]) { position, bytes in
                    #expect(Array(bytes) == Self.record(position))
                    some.append(position)
                }
                #expect(some == [2, 5, 9], "those the log holds, in order, once each")
                #expect(try reader.position(ofEventID: "e4") == 4)
                #expect(try reader.position(ofEventID: "e11") == nil)
                #expect(try reader.positions(ofAccount: "a1", after: 0, limit: .max) == [1, 4, 7, 10])
                #expect(try reader.positions(ofAccount: "a1", after: 1, limit: 2) == [4, 7])
                #expect(try reader.positions(ofAccount: "nobody", after: 0, limit: .max) == [])
                #expect(try reader.hasHistoryEntry(account: "a2", position: 5))
                #expect(try !reader.hasHistoryEntry(account: "a2", position: 4))
                #expect(try reader.accountCount() == 3)
                #expect(try reader.counts() == StorageCounts(records: 10, eventIDs: 10, transactions: 0, revocations: 0, historyEntries: 10, accountHandles: 3))
            }
        }
    }

    @Test(arguments: Backend.available)
    func aWriteThatThrowsOrIsDiscardedWritesNothing(on backend: Backend) async throws {
        try await withStorage(on: backend) { storage, _ in
            try appendRecords(storage, count: 2)
            struct Abandon: Error {}
            #expect(throws: Abandon.self) {
                try storage.write { (writer: any LedgerStorageWriter) throws in
                    try Self.append(3, account: "a0", writer)
                    try writer.setRevocation(3, ofTransaction: "t1")
                    throw Abandon()
                }
            }
            try storage.write { (writer: any LedgerStorageWriter) throws in
                try Self.append(3, account: "a0", writer)
                writer.discard()
            }
            try storage.read { (reader: any LedgerStorageReader) throws in
                #expect(try reader.lastPosition() == 2)
                #expect(try reader.position(ofEventID: "e3") == nil)
                #expect(try reader.revocation(ofTransaction: "t1") == nil)
                #expect(try reader.positions(ofAccount: "a0", after: 0, limit: .max) == [])
            }
        }
    }

    @Test(arguments: Backend.available)
    func aWriteSeesItsOwnEarlierWrites(on backend: Backend) async throws {
        try await withStorage(on: backend) { storage, _ in
            let holder = TransactionHolder(entry: EntryReference(account: "a1", payment: "p1"), position: 1, creditsConsumable: true)
            try storage.write { (writer: any LedgerStorageWriter) throws in
                try Self.append(1, account: "a1", writer)
                try writer.setHolder(holder, ofTransaction: "t1")
                try writer.setRevocation(1, ofTransaction: "t0")
                #expect(try writer.lastPosition() == 1)
                #expect(try writer.position(ofEventID: "e1") == 1)
                #expect(try writer.holder(ofTransaction: "t1") == holder)
                #expect(try writer.revocation(ofTransaction: "t0") == 1)
            }
        }
    }

    /// A fact set twice in one write keeps the last (a backend that sends a write's facts
    /// together must still apply them in order), and replaces the one of an earlier write.
    @Test(arguments: Backend.available)
    func aFactSetTwiceInOneWriteKeepsTheLast(on backend: Backend) async throws {
        try await withStorage(on: backend) { storage, _ in
            let holders = (1...3).map {
                TransactionHolder(entry: EntryReference(account: "a\($0)", payment: "p\($0)"), position: UInt64($0), creditsConsumable: $0 == 2)
            }
            try appendRecords(storage, count: 3)
            try storage.write { (writer: any LedgerStorageWriter) throws in
                try writer.setHolder(holders[0], ofTransaction: "t1")
                try writer.setRevocation(1, ofTransaction: "t1")
            }
            try storage.write { (writer: any LedgerStorageWriter) throws in
                try writer.setHolder(holders[1], ofTransaction: "t1")
                try writer.setRevocation(2, ofTransaction: "t1")
                try writer.setHolder(holders[0], ofTransaction: "t2")
                try writer.setHolder(holders[2], ofTransaction: "t1")
                try writer.setRevocation(3, ofTransaction: "t1")
                #expect(try writer.holder(ofTransaction: "t1") == holders[2])
            }
            try storage.read { (reader: any LedgerStorageReader) throws in
                #expect(try reader.holder(ofTransaction: "t1") == holders[2])
                #expect(try reader.holder(ofTransaction: "t2") == holders[0])
                #expect(try reader.revocation(ofTransaction: "t1") == 3)
                #expect(try reader.counts().transactions == 2)
                #expect(try reader.counts().revocations == 1)
            }
        }
    }

    /// Holders are replaced, revocations kept per transaction; keys are compared by their bytes
    /// (é as one code point and as e + accent are two transactions).
    @Test(arguments: Backend.available)
    func transactionFactsAreKeptByTheirBytes(on backend: Backend) async throws {
        try await withStorage(on: backend) { storage, _ in
            let composed = "t\u{E9}"
            let decomposed = "te\u{301}"
            let first = TransactionHolder(entry: EntryReference(account: "a1", payment: "p1"), position: 1, creditsConsumable: true)
            let second = TransactionHolder(entry: EntryReference(account: "a2", payment: "p2"), position: 2, creditsConsumable: false)
            try appendRecords(storage, count: 3)
            try storage.write { (writer: any LedgerStorageWriter) throws in
                try writer.setHolder(first, ofTransaction: composed)
                try writer.setHolder(second, ofTransaction: decomposed)
                try writer.setRevocation(3, ofTransaction: composed)
                try writer.setRevocation(2, ofTransaction: "t8")
                // A write reads its own, at once too (a forget rebuilds accounts in its write).
                #expect(try writer.holders(ofTransactions: [UTF8Key(composed), "t8"]) == [UTF8Key(composed): first])
                #expect(try writer.revocations(ofTransactions: [UTF8Key(composed), "t8", UTF8Key(decomposed)])
                    == [UTF8Key(composed): 3, "t8": 2])
            }
            try storage.read { (reader: any LedgerStorageReader) throws in
                #expect(try reader.holder(ofTransaction: composed) == first)
                #expect(try reader.holder(ofTransaction: decomposed) == second)
                #expect(try reader.revocation(ofTransaction: composed) == 3)
                #expect(try reader.revocation(ofTransaction: decomposed) == nil)
                // At once, as an answer about an account reads them: the same, by their bytes.
                #expect(try reader.revocations(ofTransactions: [UTF8Key(decomposed), UTF8Key(composed), "t9"]) == [UTF8Key(composed): 3])
                #expect(try reader.revocations(ofTransactions: [UTF8Key(decomposed)]).isEmpty)
                #expect(try reader.revocations(ofTransactions: []).isEmpty)
                #expect(try reader.holders(ofTransactions: [UTF8Key(decomposed), "t9", UTF8Key(composed)])
                    == [UTF8Key(composed): first, UTF8Key(decomposed): second])
                #expect(try reader.holders(ofTransactions: ["t8"]).isEmpty)
                #expect(try reader.holders(ofTransactions: []).isEmpty)
                var holders: [[UInt8]: TransactionHolder] = [:]
                try reader.forEachHolder { holders[Array($0.utf8)] = $1 }
                #expect(holders == [Array(composed.utf8): first, Array(decomposed.utf8): second])
                var revocations: [[UInt8]: UInt64] = [:]
                try reader.forEachRevocation { revocations[Array($0.utf8)] = $1 }
                #expect(revocations == [Array(composed.utf8): 3, Array("t8".utf8): 2])
                #expect(try reader.counts().transactions == 2)
                #expect(try reader.counts().revocations == 2)
            }
        }
    }

    @Test(arguments: Backend.available)
    func catalogsAndTheFormatMarkerAreRecorded(on backend: Backend) async throws {
        try await withStorage(on: backend) { storage, _ in
            let first = Array(#"{"products": []}"#.utf8)
            let grown = Array(#"{"products": [{"id": "x", "type": "consumable"}]}"#.utf8)
            try storage.write { (writer: any LedgerStorageWriter) throws in
                try writer.setFormatMarker(storage.storageFormat)
                try writer.recordCatalog(first, effectiveFrom: 1)
            }
            try appendRecords(storage, count: 4)
            try storage.write { writer in try writer.recordCatalog(grown, effectiveFrom: 5) }
            try storage.read { (reader: any LedgerStorageReader) throws in
                #expect(try reader.formatMarker() == storage.storageFormat)
                let catalogs = try reader.catalogs()
                #expect(catalogs.map(\.effectiveFrom) == [1, 5])
                #expect(catalogs.map(\.json) == [first, grown])
                #expect(try reader.newestCatalogVersion() == CatalogVersion(effectiveFrom: 5, size: grown.count))
            }
        }
    }

    @Test(arguments: Backend.available)
    func snapshotsAndAccountStatesAreKeptByPosition(on backend: Backend) async throws {
        try await withStorage(on: backend) { storage, _ in
            try appendRecords(storage, count: 30)
            try storage.write { (writer: any LedgerStorageWriter) throws in
                try writer.putSnapshotHeader([1], position: 10)
                try writer.putAccountState([10], account: "a1", version: 10)
                try writer.putAccountState([11], account: "a2", version: 10)
            }
            try storage.write { (writer: any LedgerStorageWriter) throws in
                try writer.putSnapshotHeader([2], position: 20)
                try writer.putAccountState([20], account: "a1", version: 20)
            }
            try storage.read { (reader: any LedgerStorageReader) throws in
                #expect(try reader.newestSnapshotPosition() == 20)
                #expect(try reader.snapshotHeaders().map(\.position) == [10, 20])
                #expect(try reader.snapshotHeaders().map(\.bytes) == [[1], [2]])
                func state(_ account: String, _ position: UInt64) throws -> [UInt8]? {
                    try reader.accountState(account, atOrBefore: position) { version, bytes in [UInt8(version)] + Array(bytes) }
                }
                #expect(try state("a1", 9) == nil)
                #expect(try state("a1", 15) == [10, 10])
                #expect(try state("a1", 25) == [20, 20])
                #expect(try state("a2", 25) == [10, 11])
                #expect(try state("a0", 25) == nil)
                #expect(try reader.accountStateVersions("a1") == [10, 20])
                #expect(try reader.accountStateVersions(of: ["a2", "a0", "a1"]) == [[10], [], [10, 20]])
                var visited: [String] = []
                try reader.forEachAccountState { account, version, bytes in visited.append("\(account)@\(version)=\(Array(bytes))") }
                #expect(visited == ["a1@10=[10]", "a1@20=[20]", "a2@10=[11]"])
            }
            try storage.write { (writer: any LedgerStorageWriter) throws in
                try writer.deleteAccountState(account: "a1", version: 10)
                try writer.deleteSnapshotHeader(position: 10)
            }
            try storage.read { (reader: any LedgerStorageReader) throws in
                #expect(try reader.snapshotHeaders().map(\.position) == [20])
                #expect(try reader.accountStateVersions("a1") == [20])
            }
            try storage.write { writer in try writer.removeAllSnapshots() }
            try storage.read { (reader: any LedgerStorageReader) throws in
                #expect(try reader.newestSnapshotPosition() == nil)
                #expect(try reader.snapshotHeaders().isEmpty)
                #expect(try reader.accountStateVersions(of: ["a1", "a2"]) == [[], []])
                #expect(try reader.lastPosition() == 30, "removing snapshots leaves the log")
            }
        }
    }

    /// Account states put and deleted in one write end as the last call left each; removing
    /// every snapshot takes the states put before it in the same write, not those after.
    @Test(arguments: Backend.available)
    func accountStatesChangedTwiceInOneWriteKeepTheLast(on backend: Backend) async throws {
        try await withStorage(on: backend) { storage, _ in
            try appendRecords(storage, count: 30)
            try storage.write { (writer: any LedgerStorageWriter) throws in
                try writer.putAccountState([1], account: "a1", version: 10)
                try writer.putAccountState([2], account: "a2", version: 10)
            }
            try storage.write { (writer: any LedgerStorageWriter) throws in
                try writer.putAccountState([3], account: "a1", version: 10)
                try writer.putAccountState([4], account: "a1", version: 10)
                try writer.deleteAccountState(account: "a2", version: 10)
                try writer.putAccountState([5], account: "a2", version: 10)
                try writer.putAccountState([6], account: "a3", version: 10)
                try writer.deleteAccountState(account: "a3", version: 10)
                #expect(try writer.accountStateVersions(of: ["a1", "a2", "a3"]) == [[10], [10], []])
                try writer.putAccountState([7], account: "a1", version: 20)
            }
            func states(_ reader: any LedgerStorageReader) throws -> [String] {
                var visited: [String] = []
                try reader.forEachAccountState { account, version, bytes in visited.append("\(account)@\(version)=\(Array(bytes))") }
                return visited
            }
            try storage.read { (reader: any LedgerStorageReader) throws in #expect(try states(reader) == ["a1@10=[4]", "a1@20=[7]", "a2@10=[5]"]) }
            try storage.write { (writer: any LedgerStorageWriter) throws in
                try writer.putAccountState([8], account: "a4", version: 30)
                try writer.removeAllSnapshots()
                try writer.putAccountState([9], account: "a5", version: 30)
            }
            try storage.read { (reader: any LedgerStorageReader) throws in #expect(try states(reader) == ["a5@30=[9]"]) }
        }
    }

    /// What a write committed is there after the storage is closed and opened again, also
    /// read-only; a read-only storage refuses writes.
    @Test(arguments: Backend.available)
    func whatWasCommittedOutlivesTheStorageAndReadOnlyRefusesWrites(on backend: Backend) async throws {
        try await withStorage(on: backend) { storage, reopen in
            try storage.write { writer in try writer.setFormatMarker(storage.storageFormat) }
            try appendRecords(storage, count: 5)
            let again = try reopen(true)
            #expect(again.isReadOnly)
            try again.read { (reader: any LedgerStorageReader) throws in
                #expect(try reader.lastPosition() == 5)
                #expect(try reader.position(ofEventID: "e5") == 5)
                #expect(try reader.formatMarker() == storage.storageFormat)
            }
            #expect(throws: StorageError.self) {
                try again.write { (writer: any LedgerStorageWriter) throws in
                    try Self.append(6, account: "a0", writer)
                }
            }
            try again.read { (reader: any LedgerStorageReader) throws in #expect(try reader.lastPosition() == 5) }
        }
    }

    /// The account table: rows by handle and by account (compared by bytes), its last handle,
    /// what a write sees of its own rows and of what its lookups fetched ahead, and nothing of
    /// a write that is abandoned.
    @Test(arguments: Backend.available)
    func theAccountTableIsReadByHandleAndByAccount(on backend: Backend) async throws {
        try await withStorage(on: backend) { storage, reopen in
            try storage.read { (reader: any LedgerStorageReader) throws in
                #expect(try reader.lastAccountHandle() == 0)
                #expect(try reader.accountNames(from: 1, limit: 10).isEmpty)
                #expect(try reader.accountHandle(of: "a") == nil)
            }
            try storage.write { (writer: any LedgerStorageWriter) throws in
                try writer.putAccountName("café", handle: 1)
                try writer.putAccountName("cafe\u{301}", handle: 2)
                #expect(try writer.accountHandle(of: "cafe\u{301}") == 2)
                #expect(try writer.lastAccountHandle() == 2)
            }
            struct Abandon: Error {}
            #expect(throws: Abandon.self) {
                try storage.write { (writer: any LedgerStorageWriter) throws in
                    try writer.putAccountName("abandoned", handle: 3)
                    throw Abandon()
                }
            }
            // Fetched ahead, as the ledger's writer asks for a batch's accounts.
            try storage.write(lookingUp: Lookups(accountHandles: ["café", "new"])) { (writer: any LedgerStorageWriter) throws in
                #expect(try writer.accountHandle(of: "café") == 1)
                #expect(try writer.accountHandle(of: "new") == nil)
                #expect(try writer.lastAccountHandle() == 2)
                try writer.putAccountName("new", handle: 3)
                #expect(try writer.accountHandle(of: "new") == 3)
                #expect(try writer.lastAccountHandle() == 3)
            }
            let again = try reopen(true)
            try again.read { (reader: any LedgerStorageReader) throws in
                #expect(try reader.lastAccountHandle() == 3)
                let rows = try reader.accountNames(from: 2, limit: 10)
                #expect(rows.map(\.handle) == [2, 3])
                #expect(rows.map { Array($0.account.utf8) } == [Array("cafe\u{301}".utf8), Array("new".utf8)])
                #expect(try reader.accountNames(from: 1, limit: 1).map(\.handle) == [1])
                #expect(try reader.accountHandle(of: "café") == 1)
                #expect(try reader.accountHandle(of: "abandoned") == nil)
                #expect(try reader.counts().accountHandles == 3)
            }
        }
    }

    /// An account's positions, read at any point of a long log: the LMDB backend keeps the newest
    /// entries apart and moves them into buckets of 65,536 positions every 8,192 appends
    /// (`AccountHistory`), so this log spans moves within a write and across writes, three
    /// buckets, an account absent from the middle one, and a tail not yet moved.
    @Test(arguments: Backend.available)
    func anAccountsPositionsAreReadWholeAcrossALongLog(on backend: Backend) async throws {
        try await withStorage(on: backend) { storage, _ in
            var random = SeededGenerator(seed: 7)
            var expected: [String: [UInt64]] = [:]
            // On PostgreSQL, an index of its own (no buckets): a shorter log says as much.
            let last: UInt64 = backend == .lmdb ? 140_003 : 20_003
            for start in stride(from: UInt64(1), through: last, by: 10_000) {
                // Drawn before the write: a backend may run a write's body again (LMDB, after
                // growing its map).
                let batch = (start...min(start + 9_999, last)).map { position in
                    // `rare` only in the first and the last thousand positions.
                    (position, position % 97 == 0 && (position < 1000 || position > last - 1000) ? "rare" : "a\(random.next() % 50)")
                }
                try storage.write { (writer: any LedgerStorageWriter) throws in
                    for (position, account) in batch { try Self.append(position, account: account, writer) }
                }
                for (position, account) in batch { expected[account, default: []].append(position) }
            }
            try storage.read { (reader: any LedgerStorageReader) throws in
                for (account, positions) in expected {
                    #expect(try reader.positions(ofAccount: account, after: 0, limit: .max) == positions, "\(account)")
                }
                let rare = try #require(expected["rare"])
                #expect(try reader.positions(ofAccount: "rare", after: rare[2], limit: 3) == Array(rare[3..<6]))
                #expect(try reader.positions(ofAccount: "rare", after: 1000, limit: .max) == rare.filter { $0 > 1000 })
                let some = try #require(expected["a7"])
                #expect(try reader.positions(ofAccount: "a7", after: 70_000, limit: 10) == Array(some.filter { $0 > 70_000 }.prefix(10)))
                #expect(try reader.positions(ofAccount: "a7", after: last, limit: .max) == [])
                #expect(try reader.hasHistoryEntry(account: "a7", position: some[some.count / 2]))
                #expect(try reader.hasHistoryEntry(account: "a7", position: some.last!))
                #expect(try !reader.hasHistoryEntry(account: "rare", position: some.last!))
                #expect(try reader.accountCount() == expected.count)
                #expect(try reader.counts().historyEntries == Int(last))
                // Each account's newest position at or before a point: in the tail, at a
                // bucket's edges, behind the middle bucket `rare` is absent from, before any.
                var handles: [UInt64: [UInt64]] = [:]
                for (account, positions) in expected { handles[try #require(try reader.accountHandle(of: account))] = positions }
                let nobody = (handles.keys.max() ?? 0) + 1
                for through in [0, 1, 96, 999, 65_535, 65_536, 65_537, 70_000, 131_071, 131_072, last - 500, last, last + 1] where through <= last + 1 {
                    let newest = try reader.newestPositions(ofAccounts: Array(handles.keys) + [nobody], through: through)
                    let wanted = handles.compactMapValues { $0.last { $0 <= through } }
                    #expect(newest == wanted, "through \(through)")
                }
            }
        }
    }

    /// A forget's storage part (`renameAccount`, `deleteProof`): the handle's row names the new
    /// name, and every index that named the old one names the new one, in one write; a write
    /// that throws renames nothing.
    @Test(arguments: Backend.available)
    func aRenamedAccountIsRenamedInEveryIndexAndItsProofsGo(on backend: Backend) async throws {
        try await withStorage(on: backend) { storage, reopen in
            do {
                try storage.write { (writer: any LedgerStorageWriter) throws in
                    try writer.putAccountName("alice", handle: 1)
                    try writer.putAccountName("bob", handle: 2)
                    for position: UInt64 in 1...4 {
                        try writer.append(
                            record: Self.record(position, handle: position == 3 ? 2 : 1), at: position, eventID: "e\(position)",
                            account: position == 3 ? "bob" : "alice")
                        try writer.putProof("proof \(position)", at: position)
                    }
                    try writer.setHolder(
                        TransactionHolder(entry: EntryReference(account: "alice", payment: "p1"), position: 1, creditsConsumable: true),
                        ofTransaction: "t1")
                    try writer.setHolder(
                        TransactionHolder(entry: EntryReference(account: "bob", payment: "p1"), position: 3, creditsConsumable: false),
                        ofTransaction: "t3")
                    try writer.claimAppTransaction("app-1", for: "alice")
                }
            }
            struct Abandon: Error {}
            #expect(throws: Abandon.self) {
                try storage.write { (writer: any LedgerStorageWriter) throws in
                    try writer.setLastForgetPosition(5)
                    try writer.renameAccount(handle: 1, from: "alice", to: "forgotten/1")
                    throw Abandon()
                }
            }
            #expect(try storage.read { try $0.accountHandle(of: "alice") } == 1)
            #expect(try storage.read { try $0.lastForgetPosition() } == 0)
            try storage.write { (writer: any LedgerStorageWriter) throws in
                try writer.setLastForgetPosition(5)
                try writer.renameAccount(handle: 1, from: "alice", to: "forgotten/1")
                for position: UInt64 in [1, 2, 4] { try writer.deleteProof(at: position) }
                // The write reads its own rename.
                #expect(try writer.accountHandle(of: "alice") == nil)
                #expect(try writer.positions(ofAccount: "forgotten/1", after: 0, limit: 10) == [1, 2, 4])
            }
            let again = try reopen(true)
            try again.read { (reader: any LedgerStorageReader) throws in
                #expect(try reader.accountNames(handles: [1, 2]).map(\.account) == ["forgotten/1", "bob"])
                #expect(try reader.accountHandle(of: "alice") == nil)
                #expect(try reader.accountHandle(of: "forgotten/1") == 1)
                #expect(try reader.lastForgetPosition() == 5)
                #expect(try reader.positions(ofAccount: "alice", after: 0, limit: 10).isEmpty)
                #expect(try reader.positions(ofAccount: "forgotten/1", after: 0, limit: 10) == [1, 2, 4])
                #expect(try reader.positions(ofAccount: "bob", after: 0, limit: 10) == [3])
                #expect(try reader.holder(ofTransaction: "t1")?.entry == EntryReference(account: "forgotten/1", payment: "p1"))
                #expect(try reader.holder(ofTransaction: "t1")?.creditsConsumable == true)
                #expect(try reader.holder(ofTransaction: "t3")?.entry.account == "bob")
                #expect(try reader.account(ofAppTransaction: "app-1") == "forgotten/1")
                #expect(try reader.proofPositions() == [3])
                #expect(try reader.proof(at: 1) == nil)
                let counts = try reader.counts()
                #expect((counts.accountHandles, counts.proofs, counts.historyEntries) == (2, 1, 4))
            }
        }
    }
}
