import LMDB
import Testing
@testable import PurchaseLedger
@testable import PurchaseLedgerLMDB
import LedgerTestSupport

struct ScaleAndConcurrencyTests {
    /// 100,000 purchases (200,000 events) into a ledger whose map starts at 64 KiB: the map
    /// grows by itself, every batch is retried transparently, and nothing is lost or doubled.
    @Test func growsFromATinyMapToTwoHundredThousandEvents() async throws {
        var tinyMap = LMDBOptions()
        tinyMap.initialMapSize = 64 << 10
        try await withTemporaryDirectory { directory in
            let path = directory + "/ledger"
            let ledger = try Ledger.open(at: path, catalog: wordGameCatalog, configuration: .testing, options: tinyMap)
            let purchases = 100_000
            var batch: [Event] = []
            for index in 0..<purchases {
                let account = "user-\(index % 5000)"
                let at = Timestamp(seconds: newYear.seconds + Int64(index))
                batch.append(.paymentAdded(id: "a\(index)", account: account, at: at, payment: "p\(index)", product: "com.example.tenhints"))
                batch.append(.transactionUpdated(id: "b\(index)", account: account, at: at, TransactionUpdated(
                    payment: "p\(index)", state: .purchased, transaction: "\(10_000_000 + index)")))
                if batch.count == 4000 {
                    let results = try await ledger.append(contentsOf: batch)
                    #expect(results.allSatisfy { if case .success(.appended) = $0 { true } else { false } })
                    batch.removeAll(keepingCapacity: true)
                }
            }
            #expect(ledger.position == 200_000)
            let info = try (ledger.storage as! LMDBLedgerStorage).environment.info()
            #expect(info.growthCount >= 8, "the map grew \(info.growthCount) times to \(info.mapSize) bytes")
            #expect(info.mapSize > 64 << 10)
            #expect(try ledger.balances(of: "user-42") == ["hints": 200])
            let kept = (try ledger.currentState())
            await ledger.close()

            let reopened = try Ledger.open(at: path, configuration: .testing)
            #expect((try reopened.currentState()) == kept)
            await reopened.close()
            let log = try LedgerLog.open(at: path)
            // A full replay reads the whole log through the map, and lets its pages go as it
            // goes: what stays resident is a fraction of the file.
            #expect(try log.state(useSnapshots: false) == kept)
            let file = try residentBytes(ofMappingsOf: path + "/data.mdb")
            let size = Directory.fileSize(path + "/data.mdb") ?? 0
            #expect(size > 16 << 20 && file < size / 4, "\(file) bytes of a \(size)-byte file stayed resident")
            let report = log.verify()
            #expect(report.isIntact)
            #expect(report.intactRecords == 200_000)
            #expect(try log.accountCount() == 5000)
            log.close()
        }
    }

    /// Many tasks append at once through the single writer; each gets its own outcome, positions
    /// are unique and gap-free, and the state equals a replay of the log.
    @Test func concurrentAppendersAndReaders() async throws {
        try await withLedger { ledger, _ in
            let tasks = 32
            let perTask = 40
            let outcomes = try await withThrowingTaskGroup(of: [AppendOutcome].self) { group in
                for task in 0..<tasks {
                    group.addTask {
                        var script = Script("user-\(task)")
                        var outcomes: [AppendOutcome] = []
                        for index in 0..<perTask / 2 {
                            outcomes.append(try await ledger.append(script.add("p\(index)", "com.example.tenhints")))
                            outcomes.append(try await ledger.append(script.purchased("p\(index)", "\(task)-\(index)")))
                        }
                        return outcomes
                    }
                }
                // Readers, all the while: balances only ever show whole purchases.
                group.addTask {
                    for _ in 0..<200 {
                        for task in 0..<tasks {
                            let hints = try ledger.balances(of: "user-\(task)")["hints"] ?? 0
                            #expect(hints % 10 == 0 && hints <= 10 * Int64(perTask / 2))
                        }
                        await Task.yield()
                    }
                    return []
                }
                var all: [AppendOutcome] = []
                for try await outcomes in group { all += outcomes }
                return all
            }
            let positions = outcomes.map(\.position).sorted()
            #expect(positions == Array(1...UInt64(tasks * perTask)))
            #expect(outcomes.allSatisfy { if case .appended = $0 { true } else { false } })
            for task in 0..<tasks {
                #expect(try ledger.balances(of: "user-\(task)") == ["hints": 10 * Int64(perTask / 2)])
                #expect(try ledger.history(account: "user-\(task)").count == perTask)
            }
            #expect(try ledger.state(at: ledger.position) == (try ledger.currentState()))
        }
    }

    /// The same purchase delivered to many tasks at once (a retrying client, a redelivery racing
    /// the original): exactly one credit.
    @Test func racingDuplicatesCreditOnce() async throws {
        try await withLedger { ledger, _ in
            var script = Script("ana")
            try await ledger.appendAll([script.add("p1", "com.example.hundredhints")])
            let purchase = script.purchased("p1", "9000001")
            var redeliveries: [Event] = []
            for _ in 0..<15 { redeliveries.append(script.again(purchase)) }
            let racers = [purchase] + redeliveries
            let outcomes = try await withThrowingTaskGroup(of: AppendOutcome.self) { group in
                for event in racers { group.addTask { try await ledger.append(event) } }
                var all: [AppendOutcome] = []
                for try await outcome in group { all.append(outcome) }
                return all
            }
            #expect(outcomes.count { if case .appended = $0 { true } else { false } } == 1)
            #expect(Set(outcomes.map(\.position)) == [2])
            #expect(try ledger.balances(of: "ana") == ["hints": 100])
        }
    }

    @Test func aClosedLedgerRefusesAppends() async throws {
        try await withTemporaryDirectory { directory in
            let ledger = try Ledger.open(at: directory + "/ledger", catalog: wordGameCatalog, configuration: .testing)
            var script = Script()
            try await ledger.appendAll([script.add("p1", "com.example.gem")])
            await ledger.close()
            let error = await #expect(throws: StorageError.self) { try await ledger.append(script.add("p2", "com.example.gem")) }
            #expect(error?.code == .closed)
        }
    }

    @Test func oneWriterProcessAtATimeAndReadOnlyOpens() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/ledger"
            let writer = try Ledger.open(at: path, catalog: wordGameCatalog, configuration: .testing)
            var script = Script()
            try await writer.appendAll([script.add("p1", "com.example.gem")])
            // A second writer is refused while the first holds the ledger (flock is per open file).
            let second = #expect(throws: StorageError.self) { try Ledger.open(at: path, configuration: .testing) }
            #expect(second?.code == .ledgerInUse)
            // LMDB forbids opening one environment twice in a process; so does the ledger.
            #expect(throws: StorageError.self) { try LedgerLog.open(at: path) }
            await writer.close()
            // Other processes may read while one writes; here, after the writer closed.
            var readOnly = Ledger.Configuration.testing
            readOnly.readOnly = true
            let reader = try Ledger.open(at: path, configuration: readOnly)
            #expect(reader.position == 1)
            let refused = await #expect(throws: StorageError.self) { try await reader.append(script.add("p2", "com.example.gem")) }
            #expect(refused?.code == .readOnly)
            await reader.close()
            let again = try Ledger.open(at: path, configuration: .testing)
            await again.close()
        }
    }

    @Test func unusableDirectoriesAreRefused() async throws {
        try await withTemporaryDirectory { directory in
            try writeFile(directory + "/notes.txt", Array("hello".utf8))
            let notALedger = #expect(throws: StorageError.self) {
                try Ledger.open(at: directory, catalog: wordGameCatalog, configuration: .testing)
            }
            #expect(notALedger?.code == .notALedger)
            #expect(throws: StorageError.self) { try LedgerLog.open(at: directory + "/missing") }
            #expect(throws: StorageError.self) {
                try Ledger.open(at: directory + "/notes.txt", catalog: wordGameCatalog, configuration: .testing)
            }
        }
    }

    @Test func aMaximumSizeStopsAppendsWithStorageFull() async throws {
        var limited = LMDBOptions()
        limited.initialMapSize = 256 << 10
        limited.maximumSize = 1 << 20
        try await withTemporaryDirectory { directory in
            let path = directory + "/ledger"
            let ledger = try Ledger.open(at: path, catalog: wordGameCatalog, configuration: .testing, options: limited)
            var appended = 0
            var full: StorageError?
            for batch in 0..<200 where full == nil {
                let events = (0..<500).map { index in
                    Event.paymentAdded(id: "e\(batch)-\(index)", account: "u\(index)", at: newYear, payment: "p\(batch)", product: "com.example.gem")
                }
                do {
                    appended += try await ledger.append(contentsOf: events).count
                } catch let error as StorageError {
                    full = error
                }
            }
            #expect(full?.code == .storageFull)
            #expect(ledger.position == UInt64(appended))
            #expect(appended > 1000)
            await ledger.close()
            let log = try LedgerLog.open(at: path)
            #expect(log.verify().isIntact)
            log.close()
        }
    }
}
