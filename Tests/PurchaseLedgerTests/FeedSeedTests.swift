import Foundation
import Testing
@testable import PurchaseLedger
import LedgerTestSupport
import PurchaseLedgerLocation

/// A feed read from a cursor starts at the newest snapshot before it, not at the log's start
/// (issue 42), and what it derives is what a derivation from the start derives after that
/// cursor, change for change and byte for byte: at every cursor of a generated stream with a
/// snapshot every 20 events, across a catalog that grew to name an entitlement (whose
/// definitions a derivation judges at each position), on both backends.
struct FeedSeedTests {
    static let grown = try! Catalog(
        products: wordGameCatalog.products,
        entitlements: [.init(id: "pro", products: ["com.example.pro.month", "com.example.hardwords"])])

    @Test(arguments: Backend.available)
    func aFeedStartedAtASnapshotIsTheFeedDerivedFromTheStart(on backend: Backend) async throws {
        try await withLocation(on: backend) { location in
            var configuration = Ledger.Configuration.testing
            configuration.snapshotInterval = 20
            configuration.snapshotsKept = 1000
            var generator = EventStreamGenerator(seed: 77)
            do {
                let ledger = try Ledger.open(location: location, catalog: wordGameCatalog, configuration: configuration)
                for _ in 0..<6 { _ = try await ledger.append(contentsOf: generator.events(30)) }
                _ = try await ledger.recordClock()
                await ledger.close()
            }
            let ledger = try Ledger.open(location: location, catalog: Self.grown, configuration: configuration)
            for _ in 0..<6 { _ = try await ledger.append(contentsOf: generator.events(30)) }
            let whole = try await ChangeFeedTests.collect(ledger.changes(after: .start, follow: false)) { _ in false }
            #expect(whole.count > 50)
            let log = LogReader(storage: ledger.storage)
            let catalog = try #require(try log.currentCatalog())
            var seeded = 0
            // Every tenth change's cursor, and positions between.
            var cursors = stride(from: 0, to: whole.count, by: 10).map { whole[$0].cursor }
            cursors += stride(from: UInt64(1), to: ledger.position, by: 17).map { FeedCursor(position: $0) }
            for cursor in cursors {
                if try LedgerChanges.Iterator.seeded(before: cursor, log: log, catalog: catalog, excluding: []) != nil { seeded += 1 }
                let after = try await ChangeFeedTests.collect(ledger.changes(after: cursor, follow: false)) { _ in false }
                #expect(after.map(\.json) == whole.filter { $0.cursor > cursor }.map(\.json), "after \(cursor)")
            }
            #expect(seeded > cursors.count / 2, "most cursors are past a snapshot")
            await ledger.close()
        }
    }
}
