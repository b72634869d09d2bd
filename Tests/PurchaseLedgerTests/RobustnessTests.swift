import LMDB
import Testing
@testable import PurchaseLedger
@testable import PurchaseLedgerLMDB
import LedgerTestSupport

/// What goes wrong around the ledger: odd queries, dropped handles, nesting, reopening.
struct RobustnessTests {
    @Test func historyOfANameTooLongToBeAnAccountIsEmpty() async throws {
        try await withLedger { ledger, _ in
            var s = Script()
            try await ledger.appendAll([s.add("p1", "com.example.gem")])
            #expect(try ledger.history(account: String(repeating: "a", count: 300)).isEmpty)
            #expect(try ledger.history(account: String(repeating: "a", count: 129)).isEmpty)
        }
    }

    @Test func aDroppedLedgerCanBeOpenedAgain() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/ledger"
            do {
                let ledger = try Ledger.open(at: path, catalog: wordGameCatalog, configuration: .testing)
                var s = Script()
                try await ledger.appendAll([s.add("p1", "com.example.gem")])
                // No close(): dropped.
            }
            do {
                _ = try LedgerLog.open(at: path).lastPosition()
                // Dropped too.
            }
            let again = try Ledger.open(at: path, configuration: .testing)
            #expect(again.position == 1)
            await again.close()
        }
    }

    @Test func nestedTransactionsAreRefusedNotDeadlocked() async throws {
        try await withTemporaryDirectory { directory in
            let environment = try Environment(directory: directory)
            let table: Table<UInt64, String> = try environment.openTables { try $0.table("t") }
            let error = #expect(throws: LMDBError.self) {
                try environment.read { _ in
                    try environment.read { txn in try txn.count(table) }
                }
            }
            #expect(error?.code == .unusable)
            // The environment is still usable afterwards.
            try environment.write { txn in try txn.put("a", in: table, forKey: 1) }
            environment.close()
            let closed = #expect(throws: LMDBError.self) { try environment.read { txn in try txn.count(table) } }
            #expect(closed?.code == .unusable)
        }
    }

    @Test func reopeningKeepsTheMapItGrewTo() async throws {
        var small = Ledger.Configuration.testing
        small.snapshotOnClose = false
        var tinyMap = LMDBOptions()
        tinyMap.initialMapSize = 64 << 10
        try await withTemporaryDirectory { directory in
            let path = directory + "/ledger"
            let ledger = try Ledger.open(at: path, catalog: wordGameCatalog, configuration: small, options: tinyMap)
            let events = (0..<3000).map { Event.paymentAdded(id: "e\($0)", account: "u\($0)", at: newYear, payment: "p", product: "com.example.gem") }
            _ = try await ledger.append(contentsOf: events)
            let grown = try (ledger.storage as! LMDBLedgerStorage).environment.info().mapSize
            await ledger.close()
            let reopened = try Ledger.open(at: path, configuration: small, options: tinyMap)
            let info = try (reopened.storage as! LMDBLedgerStorage).environment.info()
            #expect(info.mapSize == grown)
            #expect(info.growthCount == 0)
            await reopened.close()
        }
    }

    @Test func aFailingRequestDoesNotFailTheOthersInItsCommit() async throws {
        var configuration = Ledger.Configuration.testing
        configuration.maximumBatchEvents = 100_000
        var limited = LMDBOptions()
        limited.initialMapSize = 1 << 20
        limited.maximumSize = 2 << 20
        try await withLedger(configuration: configuration, options: limited) { ledger, _ in
            // Keep the writer busy, then queue a request too big for the limit and a small one:
            // they may share a commit; the small one must succeed either way.
            let busy = try await ledger.submit(contentsOf: (0..<2000).map {
                Event.paymentAdded(id: "busy\($0)", account: "b\($0)", at: newYear, payment: "p", product: "com.example.gem")
            })
            let huge = try await ledger.submit(contentsOf: (0..<40_000).map {
                Event.paymentAdded(id: "huge\($0)-\(String(repeating: "x", count: 60))", account: "h\($0)", at: newYear, payment: "p", product: "com.example.gem")
            })
            let small = try await ledger.submit(contentsOf: [Event.paymentAdded(id: "small", account: "s", at: newYear, payment: "p", product: "com.example.gem")])
            _ = try await busy.results()
            let failure = await #expect(throws: StorageError.self) { try await huge.results() }
            #expect(failure?.code == .storageFull)
            #expect(try await small.results().map(\.summary) == ["appended 2001"])
        }
    }

    @Test func submissionsAreAppliedInSubmissionOrder() async throws {
        try await withLedger { ledger, _ in
            var s = Script()
            // Each batch depends on the one before; submitted without waiting.
            var pending: [PendingAppends] = []
            for index in 0..<50 {
                pending.append(try await ledger.submit(contentsOf: [s.add("p\(index)", "com.example.gem"), s.purchased("p\(index)", "t\(index)")]))
            }
            var positions: [UInt64] = []
            for batch in pending {
                for result in try await batch.results() {
                    guard case .success(.appended(let position)) = result else {
                        Issue.record("expected appended, got \(result)")
                        continue
                    }
                    positions.append(position)
                }
            }
            #expect(positions == Array(1...100))
        }
    }
}
