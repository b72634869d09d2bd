import LedgerTestSupport
import Testing
@testable import PurchaseLedger
@testable import PurchaseLedgerLMDB

/// What survives a close, what a replay rebuilds, and what a rejected event leaves behind.
struct PersistenceTests {
    @Test(arguments: 1...12)
    func stateKeptOnAppendEqualsStateRebuiltFromTheLog(seed: UInt64) async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/ledger"
            var generator = EventStreamGenerator(seed: seed)
            var random = SeededGenerator(seed: seed &* 31)
            var snapshots: [LedgerState] = []
            let ledger = try Ledger.open(at: path, catalog: wordGameCatalog, configuration: .testing)
            var outcomes: [AppendResult] = []
            for _ in 0..<12 {
                let batch = generator.events(Int.random(in: 1...40, using: &random))
                outcomes += try await ledger.append(contentsOf: batch)
                snapshots.append((try ledger.currentState()))
            }
            let appended = outcomes.count { if case .success(.appended) = $0 { true } else { false } }
            #expect(appended > 25, "the stream should append plenty")
            #expect(Set(outcomes.compactMap(\.code)).count >= 8, "the stream should break many rules")

            // Replay to every intermediate position equals the state kept then.
            for snapshot in snapshots {
                #expect(try ledger.state(at: snapshot.position) == snapshot)
            }
            let final = (try ledger.currentState())
            await ledger.close()

            // Reopen: rebuilt by replay, identical, projections included.
            let reopened = try Ledger.open(at: path, configuration: .testing)
            #expect((try reopened.currentState()) == final)
            for account in final.accountIDs {
                #expect(try reopened.projection(of: account, asOf: newYear) == final.projection(of: account, asOf: newYear))
            }
            await reopened.close()
            let log = try LedgerLog.open(at: path)
            #expect(log.verify().isIntact)
            log.close()
        }
    }

    @Test func appendingOneByOneOrInOneBatchGivesTheSameLog() async throws {
        var generator = EventStreamGenerator(seed: 99)
        let events = generator.events(300)
        let (one, oneResults) = try await withLedger { ledger, _ in
            var results: [AppendResult] = []
            for event in events {
                results += try await ledger.append(contentsOf: [event])
            }
            return ((try ledger.currentState()), results)
        }
        let (batched, batchedResults) = try await withLedger { ledger, _ in
            let results = try await ledger.append(contentsOf: events)
            return ((try ledger.currentState()), results)
        }
        #expect(oneResults == batchedResults)
        #expect(one == batched)
    }

    @Test func aRejectedEventLeavesTheDataFileUnchanged() async throws {
        try await withLedger { ledger, path in
            var s = Script("ana")
            var t = Script("ben")
            try await ledger.appendAll([s.add("p1", "com.example.tenhints"), s.purchased("p1", "1"), s.finish("p1")])
            let before = try fileBytes(path + "/data.mdb")
            let results = try await ledger.append(contentsOf: [
                s.finish("p1"),                                   // duplicate
                s.consume("hints", 11),                           // insufficientBalance
                t.purchased("p2", "1", product: "com.example.tenhints"), // transactionAlreadyCredited
                s.add("p3", "com.example.nothing"),               // unknownProduct
            ])
            #expect(results.map(\.summary) == [
                "duplicate 3", "rejected insufficientBalance", "rejected transactionAlreadyCredited", "rejected unknownProduct",
            ])
            #expect(try fileBytes(path + "/data.mdb") == before)
            await #expect(throws: LedgerError.self) { try await ledger.append(s.consume("hints", 100)) }
            #expect(try fileBytes(path + "/data.mdb") == before)
            #expect(ledger.position == 3)
        }
    }

    @Test func aBatchWithRejectsAppendsTheRestAndOnlyTheRest() async throws {
        try await withLedger { ledger, _ in
            var s = Script("ana")
            let results = try await ledger.append(contentsOf: [
                s.add("p1", "com.example.tenhints"),
                s.add("p1", "com.example.tenhints"),
                s.purchased("p1", "1"),
                s.consume("hints", 11),
                s.consume("hints", 4),
            ])
            #expect(results.map(\.summary) == [
                "appended 1", "rejected duplicatePayment", "appended 2", "rejected insufficientBalance", "appended 3",
            ])
            #expect(try ledger.balances(of: "ana") == ["hints": 6])
            let history = try ledger.history(account: "ana")
            #expect(history.map(\.position) == [1, 2, 3])
        }
    }

    @Test func exportImportExportIsByteIdentical() async throws {
        try await withTemporaryDirectory { directory in
            var generator = EventStreamGenerator(seed: 7)
            let first = try Ledger.open(at: directory + "/a", catalog: wordGameCatalog, configuration: .testing)
            _ = try await first.append(contentsOf: generator.events(500))
            await first.close()
            let exported = try export(directory + "/a")
            #expect(exported.count > 10_000)

            let second = try Ledger.open(at: directory + "/b", catalog: wordGameCatalog, configuration: .testing)
            var events: [Event] = []
            for line in exported.split(separator: 0x0A) {
                events.append(try Array(line).withUnsafeBufferPointer { try Event(jsonLine: $0) })
            }
            let results = try await second.append(contentsOf: events)
            #expect(results.allSatisfy { if case .success(.appended) = $0 { true } else { false } })
            await second.close()
            #expect(try export(directory + "/b") == exported)
        }
    }

    private func export(_ path: String) throws -> [UInt8] {
        let log = try LedgerLog.open(at: path)
        defer { log.close() }
        var bytes: [UInt8] = []
        try log.exportJSONLines { bytes += $0 }
        return bytes
    }

    @Test func historyAndRecordsReadTheLog() async throws {
        try await withLedger { ledger, _ in
            var ana = Script("ana")
            var ben = Script("ben")
            try await ledger.appendAll([ana.add("p1", "com.example.gem"), ben.add("p1", "com.example.gem"), ana.purchased("p1", "1")])
            #expect(try ledger.history(account: "ana").map(\.position) == [1, 3])
            #expect(try ledger.history(account: "ana", after: 1).map(\.position) == [3])
            #expect(try ledger.history(account: "ana", limit: 1).map(\.position) == [1])
            #expect(try ledger.history(account: "nobody").isEmpty)
            var positions: [UInt64] = []
            for try await record in ledger.records(from: 2) { positions.append(record.position) }
            #expect(positions == [2, 3])
            #expect(try await ledger.records().reduce(0) { count, _ in count + 1 } == 3)
        }
    }

    @Test func timeTravel() async throws {
        try await withLedger { ledger, _ in
            var s = Script("ana")
            let march = Timestamp(seconds: newYear.seconds + 60 * 86_400)
            try await ledger.appendAll([
                s.add("p1", "com.example.pro.month"), s.purchased("p1", "1", expires: march),
                s.add("p2", "com.example.tenhints"), s.purchased("p2", "2"), s.consume("hints", 3),
            ])
            let atTwo = try ledger.state(at: 2)
            #expect(atTwo.position == 2)
            #expect(atTwo.projection(of: "ana", asOf: newYear)?.entitlements == ["com.example.pro.month"])
            #expect(atTwo.projection(of: "ana", asOf: march)?.entitlements == [])
            #expect(atTwo.projection(of: "ana", asOf: newYear)?.balances == [:])
            #expect(try ledger.state(at: 4).projection(of: "ana")?.balances == ["hints": 10])
            #expect(try ledger.state(at: 0) == LedgerState())
            #expect(throws: StorageError.self) { try ledger.state(at: 6) }
        }
    }
}
