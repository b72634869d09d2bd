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

    /// And with snapshots far apart, so that a derivation passes over most of the log before
    /// the cursor in silence (`ChangeDeriver.silentThrough`): the changes after it are the same.
    @Test(arguments: Backend.available, [20, 100_000] as [UInt64])
    func aFeedStartedAtASnapshotIsTheFeedDerivedFromTheStart(on backend: Backend, snapshotInterval: UInt64) async throws {
        try await withLocation(on: backend) { location in
            var configuration = Ledger.Configuration.testing
            configuration.snapshotInterval = snapshotInterval
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
            if snapshotInterval == 20 { #expect(seeded > cursors.count / 2, "most cursors are past a snapshot") }
            await ledger.close()
        }
    }

    /// A bounded read stops within a commit of many events (an import's), not at its end: a
    /// catch-up to the log's last event, over commits of hundreds of events each, with a budget
    /// of 100 events a step, derives at most 100 a step (so it stops within each commit), and
    /// its steps end with the feed's last changes.
    @Test func aBoundedReadStopsWithinALargeCommit() async throws {
        try await withLedger(on: .lmdb) { ledger, _ in
            var generator = EventStreamGenerator(seed: 5)
            for _ in 0..<3 { _ = try await ledger.append(contentsOf: generator.events(1_500)) }
            let readings = try ledger.storage.read { try $0.clockReadings(after: nil, limit: 100) }
            let commits = zip([0] + readings.map(\.position), readings.map(\.position)).map { $1 - $0 }
            #expect(commits.max() ?? 0 > 200, "commits of hundreds of events: \(commits)")
            let whole = try await ChangeFeedTests.collect(ledger.changes(after: .start, follow: false)) { _ in false }
            // Past every change but the last event's: the steps derive without a change to hand.
            let after = FeedCursor(position: ledger.position - 1)
            var iterator = ledger.changes(after: after, follow: false).makeAsyncIterator()
            var stepped: [LedgerChange] = []
            var steps: [Int] = []
            reading: while true {
                let before = iterator.eventsDerived
                switch try await iterator.next(within: 100) {
                case .change(let change): stepped.append(change)
                case .reached(let cursor):
                    #expect(cursor >= after, "a step's cursor is never before the one asked after")
                    steps.append(iterator.eventsDerived - before)
                case .end: break reading
                }
            }
            #expect(stepped.map(\.json) == whole.filter { $0.cursor > after }.map(\.json))
            #expect(steps.allSatisfy { $0 <= 100 }, "events derived a step: \(steps)")
            #expect(steps.count >= Int(ledger.position) / 100 - 1, "events derived a step: \(steps)")
        }
    }

    /// A reader's cursor spares the derivation the changes before it: after the last of a long
    /// subscriber's 600 renewals (each change's projection lists every purchase before it, so
    /// judging them all grows with the square of the history), the feed judges only what comes
    /// after the cursor, and finds what a derivation of every change finds there.
    @Test func changesBeforeTheCursorAreNotJudged() async throws {
        try await withLedger(on: .lmdb) { ledger, _ in
            try await LongSubscriber.append(LongSubscriber.renewals(600), to: ledger, chunk: 300)
            var everything = ledger.changes(after: .start, follow: false).makeAsyncIterator()
            var whole: [LedgerChange] = []
            while let change = try await everything.next() { whole.append(change) }
            #expect(everything.projectionsBuilt >= 600, "a derivation of every change judges each")
            let after = FeedCursor(position: ledger.position - 2)
            var late = ledger.changes(after: after, follow: false).makeAsyncIterator()
            var tail: [LedgerChange] = []
            while let change = try await late.next() { tail.append(change) }
            #expect(tail.map(\.json) == whole.filter { $0.cursor > after }.map(\.json))
            #expect(!tail.isEmpty)
            #expect(late.projectionsBuilt <= 2 * tail.count + 4, "judged: \(late.projectionsBuilt) for \(tail.count) changes")
        }
    }

    /// Silence keeps time's changes too: a deriver told readings of its own (every three events,
    /// the clock 45 minutes on each time, so that subscriptions expire between them and after
    /// the last event) finds after any cursor, time's or an event's, what a deriver that judged
    /// every change finds there; among generated events (revocations that reach the account
    /// holding the transaction, sandbox and production reports), in every view of environments.
    @Test func silenceKeepsTheChangesTimeMakesAfterTheCursor() async throws {
        try await withLedger(on: .lmdb) { ledger, _ in
            let product = OrderIndependenceTests.subscription
            let start: Int64 = 1_767_225_600
            var events: [Event] = []
            for index in 0..<60 {
                let bought = Timestamp(seconds: start + Int64(index) * 1_800)
                let account = "s\(index % 7)"
                events.append(.storeTransaction(id: "r\(index)", account: account, signedAt: bought, StoreTransaction(
                    transaction: "\(20_000 + index)", originalTransaction: "orig-\(account)", product: product, purchasedAt: bought,
                    expiresAt: Timestamp(seconds: bought.seconds + 3_000 + Int64(index % 5) * 900),
                    environment: index % 3 == 0 ? .production : .sandbox)))
            }
            var generator = EventStreamGenerator(seed: 3)
            let generated = generator.events(120)
            // The renewals among the generated events, two of theirs to one renewal.
            var mixed: [Event] = []
            for (index, renewal) in events.enumerated() {
                mixed.append(renewal)
                mixed += generated[min(index * 2, generated.count)..<min(index * 2 + 2, generated.count)]
            }
            _ = try await ledger.append(contentsOf: mixed)
            let log = LogReader(storage: ledger.storage)
            let catalog = try #require(try log.currentCatalog())
            var readings = stride(from: UInt64(3), through: ledger.position, by: 3).enumerated().map { step, position in
                ClockReading(position: position, time: Timestamp(seconds: start + Int64(step) * 2_700))
            }
            // Time alone, after the last event: the last subscriptions expire.
            readings.append(ClockReading(position: ledger.position, time: Timestamp(seconds: start + 400_000)))
            func derive(after cursor: FeedCursor, excluding excluded: Set<StoreEnvironment>) throws -> (changes: [LedgerChange], built: Int) {
                var deriver = ChangeDeriver(catalog: catalog, excluding: excluded)
                deriver.silentThrough = cursor
                var changes: [LedgerChange] = []
                for reading in readings {
                    try deriver.advance(to: reading, log: log) { if $0.cursor > cursor { changes.append($0) } }
                }
                return (changes, deriver.projectionsBuilt)
            }
            var timeChanges = 0
            for excluded: Set<StoreEnvironment> in [[], [.sandbox], [.production, .xcode]] {
                let (whole, wholeBuilt) = try derive(after: .start, excluding: excluded)
                timeChanges += whole.filter { if case .time = $0.cause { true } else { false } }.count
                // Every third change's cursor (every kind of cursor is among them), and two positions.
                let cursors = stride(from: 0, to: whole.count, by: 3).map { whole[$0].cursor }
                for cursor in cursors + [FeedCursor(position: 30), FeedCursor(position: ledger.position)] {
                    let (after, built) = try derive(after: cursor, excluding: excluded)
                    #expect(after.map(\.json) == whole.filter { $0.cursor > cursor }.map(\.json), "after \(cursor) excluding \(excluded)")
                    // Each change at or before the cursor is one judgement spared.
                    #expect(built <= wholeBuilt - whole.filter { $0.cursor <= cursor }.count, "after \(cursor): \(built) judged")
                }
            }
            #expect(timeChanges > 10, "subscriptions expire between readings: \(timeChanges)")
        }
    }
    /// A reading long after the last (a server that was down for days) passes the instants of
    /// many renewals and expiries at once: the deriver judges them a few a call, each call holding
    /// no more of time's changes than it was allowed, and finds the changes a deriver told to
    /// judge them all finds, in the same order, byte for byte.
    @Test func timesChangesOfOneReadingAreJudgedAFewACall() async throws {
        try await withLedger(on: .lmdb) { ledger, _ in
            let start: Int64 = 1_767_225_600
            var events: [Event] = []
            for index in 0..<48 {
                // Eight accounts, six renewals each, an hour apart, dated after the first reading.
                let account = "r\(index % 8)"
                let bought = Timestamp(seconds: start + 3_600 + Int64(index / 8) * 3_600 + Int64(index % 8) * 60)
                events.append(.storeTransaction(id: "renewal\(index)", account: account, signedAt: Timestamp(seconds: start), StoreTransaction(
                    transaction: "\(30_000 + index)", originalTransaction: "first-\(account)", product: OrderIndependenceTests.subscription,
                    purchasedAt: bought, expiresAt: Timestamp(seconds: bought.seconds + 3_000), environment: .production)))
            }
            _ = try await ledger.append(contentsOf: events)
            let log = LogReader(storage: ledger.storage)
            let catalog = try #require(try log.currentCatalog())
            let readings = [
                ClockReading(position: ledger.position, time: Timestamp(seconds: start)),
                ClockReading(position: ledger.position, time: Timestamp(seconds: start + 30 * 86_400)),
            ]
            var whole = ChangeDeriver(catalog: catalog)
            var expected: [LedgerChange] = []
            for reading in readings {
                try whole.advance(to: reading, log: log) { expected.append($0) }
            }
            let timeChanges = expected.filter { if case .time = $0.cause { true } else { false } }
            #expect(timeChanges.count >= 48, "every renewal starts and every one expires: \(timeChanges.count)")

            var bounded = ChangeDeriver(catalog: catalog)
            var found: [LedgerChange] = []
            var calls = 0
            for reading in readings {
                var followed = false
                while !followed {
                    var thisCall = 0
                    followed = try bounded.advance(to: reading, log: log, maximumEvents: 5, maximumTimeChanges: 3) { change in
                        if case .time = change.cause { thisCall += 1 }
                        found.append(change)
                    }
                    #expect(thisCall <= 3)
                    calls += 1
                }
            }
            #expect(found.map(\.json) == expected.map(\.json))
            #expect(calls > timeChanges.count / 3, "\(calls) calls for \(timeChanges.count) of time's changes")
        }
    }
}
