import Synchronization
import Testing
@testable import PurchaseLedger
@testable import PurchaseLedgerLMDB
import LedgerTestSupport

/// `Configuration.onCommit` hears of every write transaction: what it held, and failures.
struct CommitReportTests {
    final class Reports: Sendable {
        let all = Mutex<[CommitReport]>([])
    }

    @Test func eachCommitIsReportedWithItsOutcomes() async throws {
        try await withTemporaryDirectory { directory in
            let reports = Reports()
            var configuration = Ledger.Configuration.testing
            configuration.onCommit = { report in reports.all.withLock { $0.append(report) } }
            let ledger = try Ledger.open(at: directory + "/ledger", catalog: wordGameCatalog, configuration: configuration)
            var ana = Script("ana")
            let added = ana.add("p1", "com.example.tenhints")
            _ = try await ledger.append(contentsOf: [added, added, ana.finish("p1"), ana.consume("hints", 1)])
            await ledger.close()

            let report = try #require(reports.all.withLock { $0.first })
            #expect(report.requests == 1)
            #expect(report.events == 4)
            #expect(report.appended == 1)
            #expect(report.duplicates == 1)
            #expect(report.rejections == [.notFinishable: 1, .insufficientBalance: 1])
            #expect(report.failure == nil)
            #expect(report.duration > .zero)
        }
    }

    @Test func aFailedCommitIsReportedAsAFailure() async throws {
        try await withTemporaryDirectory { directory in
            let reports = Reports()
            var configuration = Ledger.Configuration.testing
            configuration.onCommit = { report in reports.all.withLock { $0.append(report) } }
            var limited = LMDBOptions()
            limited.initialMapSize = 1 << 20
            limited.maximumSize = 1 << 20
            let ledger = try Ledger.open(at: directory + "/ledger", catalog: wordGameCatalog, configuration: configuration, options: limited)
            let events = (0..<20_000).map { index in
                Event.paymentAdded(id: "e\(index)", account: "a\(index % 100)", at: newYear, payment: "p\(index)", product: "com.example.tenhints")
            }
            await #expect(throws: StorageError.self) { try await ledger.append(contentsOf: events) }
            await ledger.close()
            let failures = reports.all.withLock { $0.filter { $0.failure != nil } }
            #expect(failures.count == 1)
            #expect(failures.first?.events == 20_000)
            #expect(failures.first?.failure?.contains("storageFull") == true)
        }
    }
}
