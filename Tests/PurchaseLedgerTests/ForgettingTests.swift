import Foundation
import LedgerTestSupport
import LMDB
import Logging
import PostgresNIO
import Testing
@testable import PurchaseLedger
@testable import PurchaseLedgerLMDB
@testable import PurchaseLedgerPostgres
import PurchaseLedgerLocation

/// Forgetting a customer (docs/FORMAT.md, "Forgetting a customer"): the id leaves every file of
/// the ledger, the books stay as the pseudonym's, and every reading of the ledger agrees.
struct ForgettingTests {
    static let alice = "alice-7f3c2e@example.com"
    static let aliceToken = "0d5c7a52-33a4-4f1e-9b1f-4c1f6a2e8d11"
    static let bob = "bob-91ab"
    static let proof = "eyJhbGciOiJFUzI1NiJ9.eyJhcHBBY2NvdW50VG9rZW4iOiJhbGljZSJ9.c2ln"

    /// Alice buys a lifetime unlock (Apple's report carries a token of hers that no account goes
    /// by) and a subscription (its report carries her id as the token), moves the subscription
    /// to Bob, and Apple reports its renewal in Bob's account, still with her token; each report
    /// with its proof.
    static func history() throws -> [Event] {
        var events = TransferTests.purchase(
            "a1", account: alice, transaction: "L1", original: "L1", product: "lifetime", expires: nil)
        events[1].payload = try reported(events[1], token: aliceToken)
        var subscription = TransferTests.purchase(
            "a2", account: alice, transaction: "S1", original: "S1", product: "pro.monthly", expires: 30)
        subscription[1].payload = try reported(subscription[1], token: alice)
        events += subscription
        events += Event.transfer(originalTransaction: "S1", from: alice, to: bob, at: TransferTests.days(-1))
        var renewal = TransferTests.purchase(
            "b1", account: bob, transaction: "S2", original: "S1", product: "pro.monthly", expires: 60)[1]
        renewal.payload = try reported(renewal, token: alice)
        events.append(renewal)
        return events
    }

    private static func reported(_ event: Event, token: String) throws -> Event.Payload {
        guard case .storeTransaction(var fact) = event.payload else { throw TestFailure("not a store report") }
        (fact.appAccountToken, fact.signed) = (token, proof)
        return .storeTransaction(fact)
    }

    @Test(arguments: Backend.available)
    func forgettingRemovesTheIdFromTheLedgerAndKeepsTheBooks(on backend: Backend) async throws {
        try await withLocation(on: backend) { location in
            let ledger = try Ledger.open(location: location, catalog: TransferTests.catalog, configuration: .testing)
            try await ledger.appendAll(try Self.history())
            // Stored states name her: her own, and Bob's (his transfer's other side, his report's token).
            try await ledger.writeSnapshot()
            let before = ledger.statistics()
            let entitlements = try ledger.entitlements(of: Self.alice)
            let bobsProjection = try #require(try ledger.projection(of: Self.bob, asOf: TransferTests.now))
            #expect(!entitlements.isEmpty)

            // The search finds what it looks for: her id and token are stored before.
            #expect(!(try Self.places(of: Self.alice, at: location, on: backend)).isEmpty)
            #expect(!(try Self.places(of: Self.aliceToken, at: location, on: backend)).isEmpty)

            let (outcome, pseudonym) = try #require(try await ledger.forget(Self.alice, requestedBy: "ticket-4711"))
            #expect(pseudonym == "forgotten/1")
            guard case .appended(let position) = outcome else { throw TestFailure("not appended: \(outcome)") }
            #expect(try ledger.projection(of: Self.alice) == nil)
            #expect(try ledger.entitlements(of: pseudonym) == entitlements)
            // Bob's renewal report carried her id as its token: it reads as the pseudonym now.
            #expect(bobsProjection.storeTransactions.map(\.report.appAccountToken) == [Self.alice])
            var renamed = bobsProjection
            renamed.storeTransactions[0].report.appAccountToken = pseudonym
            #expect(try ledger.projection(of: Self.bob, asOf: TransferTests.now) == renamed)
            let after = ledger.statistics()
            #expect((after.accounts, after.entries, after.unfinishedEntries) == (before.accounts, before.entries, before.unfinishedEntries))
            // The same request again names an account the ledger no longer has.
            #expect(try await ledger.forget(Self.alice, requestedBy: "ticket-4711") == nil)
            let state = try ledger.currentState()
            try await ledger.writeSnapshot()
            await ledger.close()

            // Replayed, and opened from the snapshot: the same books.
            for useSnapshots in [false, true] {
                var configuration = Ledger.Configuration.testing
                configuration.useSnapshots = useSnapshots
                let reopened = try Ledger.open(location: location, configuration: configuration)
                #expect(try reopened.currentState() == state)
                await reopened.close()
            }
            let log = try LedgerLog.open(location: location)
            #expect(log.verify().isIntact)
            let counts = try log.storage.read { try $0.counts() }
            #expect(counts.proofs == 0, "every proof carried one of her names")
            var exported: [UInt8] = []
            try log.exportJSONLines { exported += $0 }
            let lines = String(decoding: exported, as: UTF8.self).split(separator: "\n")
            #expect(lines.last?.contains("\"type\":\"forgotten\"") == true)
            #expect(lines.last?.contains("\"requestedBy\":\"ticket-4711\"") == true)
            #expect(lines.last?.contains("\"id\":\"forget/1\"") == true)
            #expect(try log.storage.read { try $0.position(ofEventID: "forget/1") } == position)
            log.close()

            // No file of the ledger holds her id or her token: on LMDB once the data file is
            // rewritten (its freed pages, and the unused middles of pages written again, keep
            // what no table holds).
            let sizes = try LedgerLocation(location).rewriteDataFile()
            #expect((sizes != nil) == (backend == .lmdb))
            for needle in [Self.alice, Self.aliceToken] {
                let found = try Self.places(of: needle, at: location, on: backend)
                #expect(found.isEmpty, "\(needle) found in \(found)")
            }
            #expect(occurrences(of: Array(Self.alice.utf8), in: exported).isEmpty)
            #expect(occurrences(of: Array(Self.aliceToken.utf8), in: exported).isEmpty)

            // A copy of the export is the same ledger: the pseudonyms take their own handles.
            try await withLocation(on: backend) { copy in
                let copied = try Ledger.open(location: copy, catalog: TransferTests.catalog, configuration: .testing)
                let events = try String(decoding: exported, as: UTF8.self).split(separator: "\n").map { try Event(jsonLine: String($0)) }
                try await copied.appendAll(events)
                #expect(try copied.currentState() == state)
                await copied.close()
                let copyLog = try LedgerLog.open(location: copy)
                defer { copyLog.close() }
                var again: [UInt8] = []
                try copyLog.exportJSONLines { again += $0 }
                #expect(again == exported)
                #expect(copyLog.verify().isIntact)
            }

            // Her id comes back as a new account, owning nothing of the old one's.
            let fresh = try Ledger.open(location: location, catalog: TransferTests.catalog, configuration: .testing)
            try await fresh.appendAll(TransferTests.purchase(
                "n1", account: Self.alice, transaction: "C9", original: "C9", product: "coins", expires: nil))
            #expect(try fresh.entitlements(of: Self.alice) == [])
            #expect(try fresh.balances(of: Self.alice) == ["coin": 10])
            #expect(try fresh.entitlements(of: pseudonym) == entitlements)
            await fresh.close()
            let reopened = try LedgerLog.open(location: location)
            defer { reopened.close() }
            #expect(reopened.verify().isIntact)
            #expect(try reopened.storage.read { try $0.accountHandle(of: Self.alice) } == 4)
        }
    }

    @Test(arguments: Backend.available)
    func aForgetInABatchCommitsAloneAndAPseudonymsFormIsReserved(on backend: Backend) async throws {
        try await withLedger(on: backend, catalog: TransferTests.catalog) { ledger, _ in
            try await ledger.appendAll(TransferTests.purchase(
                "a1", account: "carol", transaction: "L1", original: "L1", product: "lifetime", expires: nil))
            // Before and after it in one submission: each in its commit, in order.
            let results = try await ledger.append(contentsOf: [
                .transactionFinished(id: "a1/finish", account: "carol", at: TransferTests.now, payment: "appstore:L1"),
                Event(id: "forget/1", account: "carol", at: TransferTests.now, payload: .forgotten(Forgotten(requestedBy: "ops"))),
                .transactionUpdated(id: "c2", account: "carol", at: TransferTests.now, TransactionUpdated(
                    payment: "appstore:C1", state: .purchased, transaction: "C1", product: "coins")),
            ])
            try TransferTests.appended(results)
            #expect(try ledger.balances(of: "carol") == ["coin": 10])
            #expect(try ledger.entitlements(of: "forgotten/1") == ["lifetime"])
            #expect(try ledger.unfinished(of: "forgotten/1").isEmpty)

            // A name of the pseudonyms' form the account table does not give that handle.
            let taken = try await ledger.append(contentsOf: [
                .transactionUpdated(id: "x1", account: "forgotten/7", at: TransferTests.now, TransactionUpdated(
                    payment: "p", state: .purchased, transaction: "C2", product: "coins")),
                Event(id: "forget/9", account: "nobody", at: TransferTests.now, payload: .forgotten(Forgotten(requestedBy: "ops"))),
            ])
            #expect(taken.map(\.code) == [.invalidEvent, .invalidEvent])
        }
    }

    /// Forgets amid a random stream, with snapshots written a slice at a time around them: the
    /// state kept up to date, the one opened from the snapshot and the one replayed agree; the
    /// ledger verifies; a copy from its export is the same ledger; both backends agree.
    @Test(arguments: [3, 11] as [UInt64])
    func forgetsAmidARandomStreamKeepEveryReadingInAgreement(seed: UInt64) async throws {
        var exports: [[UInt8]] = []
        for backend in Backend.available {
            try await withLocation(on: backend) { location in
                var configuration = Ledger.Configuration.testing
                configuration.snapshotInterval = 64
                let ledger = try Ledger.open(location: location, catalog: wordGameCatalog, configuration: configuration)
                var generator = EventStreamGenerator(seed: seed)
                var forgotten = 0
                for round in 0..<6 {
                    _ = try await ledger.append(contentsOf: generator.events(150))
                    // An account the stream named lately, as the app's support would pick one.
                    let accounts = generator.emitted.suffix(40).map(\.account)
                    let account = accounts[(round * 7) % accounts.count]
                    if try await ledger.forget(account, requestedBy: "round \(round)", at: generator.clock) != nil { forgotten += 1 }
                }
                #expect(forgotten >= 4)
                let state = try ledger.currentState()
                await ledger.close()
                for useSnapshots in [true, false] {
                    var reopening = Ledger.Configuration.testing
                    reopening.useSnapshots = useSnapshots
                    let reopened = try Ledger.open(location: location, configuration: reopening)
                    #expect(try reopened.currentState() == state, "snapshots: \(useSnapshots)")
                    await reopened.close()
                }
                let log = try LedgerLog.open(location: location)
                #expect(log.verify().isIntact)
                var exported: [UInt8] = []
                try log.exportJSONLines { exported += $0 }
                log.close()
                exports.append(exported)
                try await withLocation(on: backend) { copy in
                    let copied = try Ledger.open(location: copy, catalog: wordGameCatalog, configuration: .testing)
                    let events = try String(decoding: exported, as: UTF8.self).split(separator: "\n").map { try Event(jsonLine: String($0)) }
                    let results = try await copied.append(contentsOf: events)
                    #expect(results.allSatisfy { if case .success(.appended) = $0 { true } else { false } })
                    #expect(try copied.currentState() == state)
                    await copied.close()
                }
            }
        }
        #expect(Set(exports).count == 1, "the backends agree")
    }

    /// The change feed: a feed following the ledger across a forget reads the new account of
    /// the same id as new (its projection owns nothing of the pseudonym's), and gives the same
    /// changes as the feed derived again afterwards, which names the pseudonym throughout.
    @Test(arguments: Backend.available)
    func aFollowingFeedAgreesWithTheFeedDerivedAgain(on backend: Backend) async throws {
        try await withLedger(on: backend, catalog: TransferTests.catalog) { ledger, _ in
            try await ledger.appendAll(try Self.history())
            var before: [LedgerChange] = []
            for try await change in ledger.changes(follow: false) { before.append(change) }
            var live = ledger.changes(follow: true).makeAsyncIterator()
            for _ in before { _ = try await live.next() }

            _ = try #require(try await ledger.forget(Self.alice, requestedBy: "ops"))
            try await ledger.appendAll(TransferTests.purchase(
                "n1", account: Self.alice, transaction: "C9", original: "C9", product: "coins", expires: nil))
            var again: [LedgerChange] = []
            for try await change in ledger.changes(follow: false) { again.append(change) }
            // The purchase's two events change her new account; the forget itself changes none.
            #expect(again.count == before.count + 2)
            var followed: [LedgerChange] = []
            for _ in 0..<2 { followed.append(try #require(try await live.next())) }
            #expect(followed == Array(again.suffix(2)))
            #expect(followed.allSatisfy { $0.account == Self.alice && $0.projection.entitlements == [] })
            #expect(followed.last?.projection.balances == ["coin": 10])
            #expect(again.dropLast(2).allSatisfy { $0.account != Self.alice })
            #expect(again.contains { $0.account == "forgotten/1" })
        }
    }

    /// PostgreSQL: another server that read her account before the forget reads it no more after
    /// catching up, and gives her id a new handle. What came after the forget in the same catch-up
    /// (Apple's refund, recorded in the pseudonym's account) it reads under the pseudonym, not
    /// under the name it had read before.
    @Test(arguments: Backend.available.filter { $0 == .postgres })
    func anotherProcessFollowsTheForget(on backend: Backend) async throws {
        try await withLocation(on: backend) { location in
            let first = try Ledger.open(location: location, catalog: TransferTests.catalog, configuration: .testing)
            let second = try Ledger.open(location: location, catalog: TransferTests.catalog, configuration: .testing)
            try await first.appendAll(try Self.history())
            _ = try await second.catchUp()
            #expect(try second.entitlements(of: Self.alice) == ["lifetime"])
            let (_, pseudonym) = try #require(try await first.forget(Self.alice, requestedBy: "ops"))
            #expect(try first.unfinished(of: pseudonym).map(\.payment) == ["appstore:L1", "appstore:S1"])
            try await first.appendAll([
                .revoked(id: "refund/L1", account: pseudonym, at: TransferTests.now, transaction: "L1"),
                .transactionFinished(id: "finish/L1", account: pseudonym, at: TransferTests.now, payment: "appstore:L1"),
            ])
            #expect(try first.entitlements(of: pseudonym) == [])
            _ = try await second.catchUp()
            #expect(try second.projection(of: Self.alice) == nil)
            #expect(try second.entitlements(of: pseudonym) == [])
            #expect(try second.unfinished(of: pseudonym).map(\.payment) == ["appstore:S1"])
            #expect(try second.currentState() == (try first.currentState()))
            try await second.appendAll(TransferTests.purchase(
                "n1", account: Self.alice, transaction: "C9", original: "C9", product: "coins", expires: nil))
            _ = try await first.catchUp()
            #expect(try first.balances(of: Self.alice) == ["coin": 10])
            #expect(try first.entitlements(of: pseudonym) == [])
            await first.close()
            await second.close()
            let log = try LedgerLog.open(location: location)
            defer { log.close() }
            #expect(log.verify().isIntact)
        }
    }

    /// Two servers sharing the ledger at `location`: the first has appended her history and a
    /// consumable of hers (C1, 10 coins), and the second has caught up with them.
    static func twoServersAfterHerCoins(
        at location: String, second configuration: Ledger.Configuration = .testing
    ) async throws -> (first: Ledger, second: Ledger) {
        let first = try Ledger.open(location: location, catalog: TransferTests.catalog, configuration: .testing)
        let second = try Ledger.open(location: location, catalog: TransferTests.catalog, configuration: configuration)
        try await first.appendAll(try history() + TransferTests.purchase(
            "c1", account: alice, transaction: "C1", original: "C1", product: "coins", expires: nil))
        _ = try await second.catchUp()
        return (first, second)
    }

    /// The first server refunds her coins (C1), then forgets her; her pseudonym.
    static func refundHerCoinsThenForgetHer(on first: Ledger) async throws -> String {
        try await first.appendAll([.revoked(id: "refund/C1", account: alice, at: TransferTests.now, transaction: "C1")])
        return try #require(try await first.forget(alice, requestedBy: "ops")).pseudonym
    }

    /// The second server holds her coins taken back under her pseudonym, and the same state as
    /// the first; then closes both.
    static func expectHerCoinsTakenBackAlike(on first: Ledger, and second: Ledger, pseudonym: String) async throws {
        #expect(try second.balances(of: pseudonym) == ["coin": 0])
        #expect(try second.currentState() == (try first.currentState()))
        await first.close()
        await second.close()
    }

    /// PostgreSQL: another server catches up, in one read, with a refund of her consumable and
    /// then her forget, having known her by her name: it takes the credit back as the server that
    /// appended them did. (Its watching is stopped, so that one catch-up reads both.)
    @Test(arguments: Backend.available.filter { $0 == .postgres })
    func aCatchUpWithARefundThenAForgetTakesTheCreditBack(on backend: Backend) async throws {
        try await withLocation(on: backend) { location in
            let (first, second) = try await Self.twoServersAfterHerCoins(at: location)
            #expect(try second.balances(of: Self.alice) == ["coin": 10])
            await second.follower?.stop()
            let pseudonym = try await Self.refundHerCoinsThenForgetHer(on: first)
            #expect(try first.balances(of: pseudonym) == ["coin": 0])
            _ = try await second.catchUp()
            try await Self.expectHerCoinsTakenBackAlike(on: first, and: second, pseudonym: pseudonym)
        }
    }

    /// The same, her account no longer in the other server's memory (read from the snapshot
    /// when asked for): what it reads of her from the snapshot, which the forget renamed in
    /// storage, is her state, not none.
    @Test(arguments: Backend.available.filter { $0 == .postgres })
    func aCatchUpWithARefundThenAForgetOfAnAccountNotInMemoryTakesTheCreditBack(on backend: Backend) async throws {
        try await withLocation(on: backend) { location in
            var evicting = Ledger.Configuration.testing
            evicting.cachedAccounts = 0
            let (first, second) = try await Self.twoServersAfterHerCoins(at: location, second: evicting)
            _ = try await first.writeSnapshot()
            _ = try await second.catchUp()
            #expect(try second.balances(of: Self.alice) == ["coin": 10])
            await second.follower?.stop()
            let pseudonym = try await Self.refundHerCoinsThenForgetHer(on: first)
            _ = try await second.catchUp()
            #expect(try second.entitlements(of: pseudonym) == (try first.entitlements(of: pseudonym)))
            try await Self.expectHerCoinsTakenBackAlike(on: first, and: second, pseudonym: pseudonym)
        }
    }

    /// PostgreSQL: another server whose change feed is read while its projections lag behind a
    /// refund and a forget (its watching stopped): the feed reads nothing past them, so the
    /// projections read the forget first and take the refund under her name, as the server that
    /// appended it did; the feed goes on once they caught up, through the refund. (Before, the
    /// feed's first fill read the forget and renamed the server's names first: the catch-up
    /// then lost the refund.)
    @Test(arguments: Backend.available.filter { $0 == .postgres })
    func aFeedReadWhileItsServerLagsLosesNoRefund(on backend: Backend) async throws {
        try await withLocation(on: backend) { location in
            let (first, second) = try await Self.twoServersAfterHerCoins(at: location)
            await second.follower?.stop()
            let pseudonym = try await Self.refundHerCoinsThenForgetHer(on: first)
            var changes = second.changes(follow: false).makeAsyncIterator()
            let firstChange = try #require(try await changes.next())
            #expect(firstChange.position <= second.position)
            _ = try await second.catchUp()
            var last = firstChange
            while let change = try await changes.next() { last = change }
            // The refund's change, the last: her coins taken back, as on the first server.
            #expect(last.cause == .event(id: "refund/C1", type: .revoked))
            #expect(last.projection.balances["coin"] == 0)
            try await Self.expectHerCoinsTakenBackAlike(on: first, and: second, pseudonym: pseudonym)
        }
    }

    /// A feed that read her history under her name, then reads her coins, her forget and the
    /// refund of her coins, all committed meanwhile: the refund's change is the one a feed
    /// derived again after the forget gives (her coins taken back).
    @Test(arguments: Backend.available)
    func aFeedBehindAPurchaseAndAForgetDerivesTheRefundAsAFeedDerivedAgain(on backend: Backend) async throws {
        try await withLocation(on: backend) { location in
            let ledger = try Ledger.open(location: location, catalog: TransferTests.catalog, configuration: .testing)
            try await ledger.appendAll(try Self.history())
            var lagging = ledger.changes(follow: false).makeAsyncIterator()
            while try await lagging.next() != nil {}
            try await ledger.appendAll(TransferTests.purchase(
                "c1", account: Self.alice, transaction: "C1", original: "C1", product: "coins", expires: nil))
            let pseudonym = try #require(try await ledger.forget(Self.alice, requestedBy: "ops")).pseudonym
            try await ledger.appendAll([.revoked(id: "refund/C1", account: pseudonym, at: TransferTests.now, transaction: "C1")])
            var read: [LedgerChange] = []
            while let change = try await lagging.next() { read.append(change) }
            var derivedAgain: [LedgerChange] = []
            for try await change in ledger.changes(follow: false) { derivedAgain.append(change) }
            let refund = LedgerChange.Cause.event(id: "refund/C1", type: .revoked)
            let lagged = try #require(read.last { $0.cause == refund })
            let again = try #require(derivedAgain.last { $0.cause == refund })
            #expect(lagged.account == pseudonym)
            #expect(lagged.projection.balances == again.projection.balances)
            #expect(lagged.differences == again.differences)
            await ledger.close()
        }
    }

    /// PostgreSQL: another server that still knows her by her name (its watching stopped) once
    /// the first committed her forget and a refund after it: a reader of its log (a history, an
    /// export) reads her records, whose proofs the forget removed, as forgotten ones, not as
    /// damage; and its feed, read from the start once the server caught up (a feed reads
    /// nothing past its server's projections), names her in no change after the forget.
    @Test(arguments: Backend.available.filter { $0 == .postgres })
    func anotherServersFeedNamesNoForgottenCustomerAfterTheForget(on backend: Backend) async throws {
        try await withLocation(on: backend) { location in
            let (first, second) = try await Self.twoServersAfterHerCoins(at: location)
            await second.follower?.stop()
            let (outcome, pseudonym) = try #require(try await first.forget(Self.alice, requestedBy: "ops"))
            guard case .appended(let forgetAt) = outcome else { throw TestFailure("the forget was not appended: \(outcome)") }
            try await first.appendAll([.revoked(id: "refund/C1", account: pseudonym, at: TransferTests.now, transaction: "C1")])
            var read = 0
            try second.log.forEachRecord(from: 1, through: try second.log.lastPosition()) { _ in read += 1 }
            #expect(read == Int(forgetAt) + 1)
            _ = try await second.catchUp()
            var changes: [LedgerChange] = []
            for try await change in second.changes(follow: false) { changes.append(change) }
            let after = changes.filter { $0.position > forgetAt }
            #expect(!after.isEmpty)
            #expect(after.allSatisfy { $0.account != Self.alice })
            #expect(after.last?.account == pseudonym)
            await first.close()
            await second.close()
        }
    }

    /// PostgreSQL: a process that reads a chunk of the log ahead (and the facts its events ask
    /// about, in one query) while it still knows her by her name decodes the records after the
    /// forget again, once the forget's renames are taken in: they name her pseudonym. (Which
    /// records a catch-up reads in one chunk depends on when another process's commits are
    /// signalled; here the chunk is read directly.)
    @Test(arguments: Backend.available.filter { $0 == .postgres })
    func recordsReadAheadOfAForgetAreDecodedWithItsRenames(on backend: Backend) async throws {
        try await withLocation(on: backend) { location in
            let ledger = try Ledger.open(location: location, catalog: TransferTests.catalog, configuration: .testing)
            try await ledger.appendAll(try Self.history())
            let handle = try #require(try ledger.log.storage.read { try $0.accountHandle(of: Self.alice) })
            let (outcome, pseudonym) = try #require(try await ledger.forget(Self.alice, requestedBy: "ops"))
            guard case .appended(let forgetAt) = outcome else { throw TestFailure("the forget was not appended: \(outcome)") }
            try await ledger.appendAll([
                .transactionFinished(id: "finish/L1", account: pseudonym, at: TransferTests.now, payment: "appstore:L1"),
            ])
            await ledger.close()

            let storage = try backend.openStorage(location, readOnly: true)
            defer { storage.close() }
            // What a process that read her events before the forget holds.
            storage.accountNames.adopt([(handle: handle, account: Self.alice)])
            var named: [(position: UInt64, account: String)] = []
            var aheadNamed: [String] = []
            try storage.read { reader in
                try LogReader.forEachDecoded(
                    reader, storage: storage, from: forgetAt, through: try reader.lastPosition(), readingProofs: false,
                    ahead: { aheadNamed = $0.map(\.account) }
                ) { record in
                    if record.event.type == .forgotten {
                        _ = try LogReader.renames(ofForgetAt: record.position, reader: reader, names: storage.accountNames)
                    }
                    named.append((record.position, record.event.account))
                }
            }
            #expect(aheadNamed == [Self.alice, Self.alice])
            #expect(named.map(\.position) == [forgetAt, forgetAt + 1])
            #expect(named.map(\.account) == [Self.alice, pseudonym])
        }
    }

    /// Two processes write a shared ledger: one is half-way through a snapshot (its states were
    /// captured before the forget, some naming her) when the other forgets her. The rest of the
    /// snapshot must not store her id again: the forget renamed the stored states it found, not
    /// those still in the first process's memory. So the first drops its snapshot.
    @Test(arguments: Backend.available.filter { $0 == .postgres })
    func aSnapshotBegunBeforeAnotherProcessForgotIsDropped(on backend: Backend) async throws {
        try await withLocation(on: backend) { location in
            let first = try Ledger.open(location: location, catalog: TransferTests.catalog, configuration: .testing)
            let second = try Ledger.open(location: location, catalog: TransferTests.catalog, configuration: .testing)
            // Short names first in a snapshot's order: hers come in a later slice.
            for number in 0..<40 {
                try await first.appendAll(TransferTests.purchase(
                    "o\(number)", account: "u\(number)", transaction: "T\(number)", original: "T\(number)", product: "coins", expires: nil))
            }
            try await first.appendAll(try Self.history())
            #expect(first.live.beginSnapshot())
            #expect(try first.live.writeSnapshotSlice(keep: 2, budget: .zero) == nil, "a first slice, not the whole")
            #expect(first.live.isWritingSnapshot)

            _ = try await second.catchUp()
            try #require(try await second.forget(Self.alice, requestedBy: "ops") != nil)
            while first.live.isWritingSnapshot { _ = try first.live.writeSnapshotSlice(keep: 2, budget: .zero) }
            #expect(try Self.places(of: Self.alice, at: location, on: backend) == [])
            #expect(try Self.places(of: Self.aliceToken, at: location, on: backend) == [])
            _ = try await first.catchUp()
            #expect(try first.currentState() == (try second.currentState()))
            await first.close()
            await second.close()
            let log = try LedgerLog.open(location: location)
            defer { log.close() }
            #expect(log.verify().isIntact)
        }
    }

    /// `verify` holds a forget to its renames: a table that names a forgotten handle otherwise
    /// again (a restore of the table from before the forget, say) is damage at the forget.
    @Test func verifyFindsAForgottenNameBackInTheAccountTable() async throws {
        try await withLocation(on: .lmdb) { location in
            let ledger = try Ledger.open(location: location, catalog: TransferTests.catalog, configuration: .testing)
            // Without proofs: a record that keeps one apart and names no pseudonym is damage of its own.
            try await ledger.appendAll(TransferTests.purchase(
                "a1", account: Self.alice, transaction: "L1", original: "L1", product: "lifetime", expires: nil))
            let (outcome, pseudonym) = try #require(try await ledger.forget(Self.alice, requestedBy: "ops"))
            await ledger.close()
            guard case .appended(let position) = outcome else { throw TestFailure("not appended") }
            let before = try LedgerLog.open(location: location)
            #expect(before.verify().isIntact)
            before.close()
            let storage = try LMDBLedgerStorage(directory: location, configuration: .init())
            try storage.write { try $0.renameAccount(handle: 1, from: pseudonym, to: "someone-else") }
            storage.close()
            let log = try LedgerLog.open(location: location)
            defer { log.close() }
            let report = log.verify()
            #expect(report.damage?.kind == .indexMismatch)
            #expect(report.damage?.position == position)
        }
    }

    /// The rewrite of an LMDB data file needs the ledger closed by this process (LMDB must not
    /// open an environment twice in one) and by every writer; it keeps every entry.
    @Test func aDataFileIsRewrittenOnlyWhenTheLedgerIsClosedAndKeepsEveryEntry() async throws {
        try await withLocation(on: .lmdb) { location in
            let ledger = try Ledger.open(location: location, catalog: TransferTests.catalog, configuration: .testing)
            try await ledger.appendAll(try Self.history())
            #expect {
                try Ledger.rewriteDataFile(at: location)
            } throws: { ($0 as? StorageError)?.code == .ledgerInUse }
            let state = try ledger.currentState()
            await ledger.close()
            var before: [UInt8] = []
            let log = try LedgerLog.open(location: location)
            try log.exportJSONLines { before += $0 }
            let counts = try log.storage.read { try $0.counts() }
            // The clock's newest readings too, which LMDB's main table keeps (`ClockTail`).
            let clock = try log.storage.read { try $0.clockReadings(after: nil, limit: .max) }
            #expect(!clock.isEmpty)
            log.close()

            let sizes = try Ledger.rewriteDataFile(at: location)
            #expect(sizes.after <= sizes.before)
            #expect(!FileManager.default.fileExists(atPath: location + "/rewrite.tmp"))
            let rewritten = try LedgerLog.open(location: location)
            var after: [UInt8] = []
            try rewritten.exportJSONLines { after += $0 }
            #expect(after == before)
            #expect(try rewritten.storage.read { try $0.counts() } == counts)
            #expect(try rewritten.storage.read { try $0.clockReadings(after: nil, limit: .max) } == clock)
            #expect(rewritten.verify().isIntact)
            rewritten.close()
            let reopened = try Ledger.open(location: location, configuration: .testing)
            #expect(try reopened.currentState() == state)
            await reopened.close()
        }
    }

    /// A server forgets through the library, and cannot rewrite the file it serves from: the
    /// forget leaves the rewrite to the next open for writing (a restart), which does it when no
    /// other process has the ledger open. While one has (here `ledger changes --follow`), a
    /// rewrite is refused and an open leaves it pending: a reader of the old file would read the
    /// lock file of the new one.
    @Test func theNextOpenRewritesWhatAForgetLeftOnceNoOtherProcessHasTheLedgerOpen() async throws {
        try await withLocation(on: .lmdb) { location in
            func isPending() throws -> Bool {
                let storage = try LMDBLedgerStorage(directory: location, configuration: .init())
                defer { storage.close() }
                return try storage.isRewritePending()
            }
            let ledger = try Ledger.open(location: location, catalog: TransferTests.catalog, configuration: .testing)
            try await ledger.appendAll(try Self.history())
            // Stored states that name her, renamed by the forget: pages written again.
            try await ledger.writeSnapshot()
            try #require(try await ledger.forget(Self.alice, requestedBy: "ticket-4711") != nil)
            let state = try ledger.currentState()
            await ledger.close()
            #expect(try isPending())

            let reader = try ChildProcess(builtExecutable("ledger"), ["changes", "--follow", location])
            defer { if reader.isRunning { _ = reader.kill() } }
            try await SharedPostgresLedgerTests.waitUntil { try ExclusiveEnvironmentUse(directory: location) == nil }
            try #require(try ExclusiveEnvironmentUse(directory: location) == nil, "the reader has the ledger open")
            #expect {
                try Ledger.rewriteDataFile(at: location)
            } throws: { ($0 as? StorageError)?.code == .ledgerInUse }
            let meanwhile = try Ledger.open(location: location, configuration: .testing)
            #expect(try meanwhile.currentState() == state)
            await meanwhile.close()
            #expect(try isPending(), "left for a later open")

            _ = reader.stop()
            let reopened = try Ledger.open(location: location, configuration: .testing)
            #expect(try reopened.currentState() == state)
            await reopened.close()
            #expect(try !isPending())
            #expect(try Self.places(of: Self.alice, at: location, on: .lmdb) == [])
            #expect(try Self.places(of: Self.aliceToken, at: location, on: .lmdb) == [])
            let log = try LedgerLog.open(location: location)
            defer { log.close() }
            #expect(log.verify().isIntact)
        }
    }

    /// The byte search a forget makes of every stored state and parked delivery.
    /// A forget leaves no name of the customer in any encoding (issue 41, point 3): her id (with
    /// a quote, a slash and a non-ASCII letter, so that its JSON-escaped and base64 forms differ
    /// from it), her token and her app transaction id (Apple's customer id, which the records keep
    /// by handle since), in the records, the indexes (the customers' index no longer links it to
    /// the pseudonym), the export, and the webhook endpoints' records (a parked delivery about
    /// her, found whatever the form her name takes in it: JSON-escaped in its body, base64url in
    /// its key and id; a progress record whose cursors name her, lowered), on both backends; a
    /// parked delivery about another account stays.
    @Test(arguments: Backend.available)
    func aForgetLeavesNoNameInAnyEncoding(on backend: Backend) async throws {
        let alice = "ali\"ce/\u{E9}t\u{E9}"
        let token = "5c0d2e7a-1b3f-4e8a-9c6d-0f1e2d3c4b5a"
        let customer = "704281553910"
        let names = [alice, token, customer]
        try await withLocation(on: backend) { location in
            let ledger = try Ledger.open(location: location, catalog: TransferTests.catalog, configuration: .testing)
            var events = TransferTests.purchase("a1", account: alice, transaction: "S1", original: "S1", product: "pro.monthly", expires: 30)
            guard case .storeTransaction(var fact) = events[1].payload else { throw TestFailure("not a report") }
            (fact.appAccountToken, fact.appTransaction, fact.signed) = (token, customer, Self.proof)
            events[1].payload = .storeTransaction(fact)
            var renewal = RenewalInfo(originalTransaction: "S1", product: "pro.monthly")
            (renewal.appAccountToken, renewal.appTransaction) = (token, customer)
            events.append(.renewalInfo(id: "a3", account: alice, signedAt: TransferTests.days(-1), renewal))
            events += TransferTests.purchase("b1", account: Self.bob, transaction: "B1", original: "B1", product: "lifetime", expires: nil)
            try await ledger.appendAll(events)
            #expect(try ledger.account(ofAppTransaction: customer) == alice)
            // An endpoint parked a change of hers and one of Bob's, and its progress names her.
            let hers = FeedCursor(position: 2, account: alice)
            let bobs = FeedCursor(position: 4, account: Self.bob)
            let body = LedgerChange(
                cursor: hers, account: alice, position: 2, cause: .event(id: "a1/report", type: .storeTransaction), asOf: TransferTests.now,
                differences: [], projection: try #require(try ledger.projection(of: alice))).json
            try await ledger.updateFeedState { state in
                for (cursor, account) in [(hers, alice), (bobs, Self.bob)] {
                    let parked = WebhookState.Parked(
                        id: cursor.description, account: account, attempts: 3, error: "HTTP 500", parkedAt: "2026-11-28T00:00:00Z",
                        body: account == alice ? body : "{}")
                    try state.set(WebhookState.parkedPrefix("ep") + cursor.description, WebhookState.encode(parked))
                }
                try state.set(WebhookState.progressKey("ep"), WebhookState.encode(WebhookState.Progress(
                    checkpoint: hers.description, done: [FeedCursor(position: 3, account: alice).description, bobs.description])))
            }
            // The search finds what it looks for before.
            var exported: [UInt8] = []
            for try await record in ledger.records() { exported += Array((record.event.jsonLine + "\n").utf8) }
            for name in names { #expect(!Leaks.find([name], in: exported).isEmpty, "\(name) is in the export before") }
            #expect(!Leaks.find([alice], in: Array(body.utf8)).filter { $0.contains("JSON-escaped") }.isEmpty)

            _ = try #require(try await ledger.forget(alice, requestedBy: "ticket-1"))
            #expect(try ledger.account(ofAppTransaction: customer) == nil, "no account is her customer id's any more")
            let states = try ledger.feedStates(prefix: WebhookState.prefix)
            #expect(states.map(\.key).sorted() == [WebhookState.parkedPrefix("ep") + bobs.description, WebhookState.progressKey("ep")])
            let stored = try #require(states.first { $0.key.hasSuffix("/progress") }?.value)
            let progress = try #require(WebhookState.Progress(storedBytes: stored))
            #expect(progress == WebhookState.Progress(checkpoint: "1", done: [bobs.description]))
            await ledger.close()

            let log = try LedgerLog.open(location: location)
            exported = []
            try log.exportJSONLines { exported += $0 }
            #expect(log.verify().isIntact)
            log.close()
            #expect(Leaks.find(names, in: exported) == [])
            _ = try LedgerLocation(location).rewriteDataFile()
            #expect(try Self.leaks(of: names, at: location, on: backend) == [])
        }
    }

    /// Where any of `names` is found, in any encoding (`Leaks`): in each file under an LMDB
    /// ledger's directory, or in each value of a PostgreSQL ledger's tables.
    static func leaks(of names: [String], at location: String, on backend: Backend) throws -> [String] {
        switch backend {
        case .lmdb:
            return try Leaks.find(names, inFilesUnder: location)
        case .postgres:
            let connection = try BlockingConnection.connect(try PostgresLocation(url: location), logger: Logger(label: "test"))
            defer { connection.close() }
            let columns = try connection.query("""
                SELECT table_name::text, column_name::text, data_type::text FROM information_schema.columns
                WHERE table_schema = 'public' AND data_type IN ('bytea', 'text')
                """).rows.map { try $0.decode((String, String, String).self, context: .default) }
            var found: [String] = []
            for (table, column, type) in columns {
                let bytes = type == "text" ? "convert_to(\"\(column)\", 'UTF8')" : "\"\(column)\""
                for row in try connection.query(PostgresQuery(unsafeSQL: "SELECT \(bytes) FROM \"\(table)\" WHERE \(bytes) IS NOT NULL")).rows {
                    var buffer = try row.decode(ByteBuffer.self, context: .default)
                    let value = buffer.readBytes(length: buffer.readableBytes) ?? []
                    found += Leaks.find(names, in: value).map { "\($0) in \(table).\(column)" }
                }
            }
            return found
        }
    }

    @Test func theByteSearchFindsARunOfBytesAnywhereAndNothingElse() {
        func occurs(_ needle: String, in haystack: String) -> Bool {
            Array(haystack.utf8).withUnsafeBytes { Forgetting.occurs(Array(needle.utf8), in: $0) }
        }
        #expect(occurs("alice", in: "alice"))
        #expect(occurs("alice", in: "xxalicexx"))
        #expect(occurs("alice", in: "aalalicx alice"))
        #expect(!occurs("alice", in: "alic"))
        #expect(!occurs("alice", in: "alicalice".replacingOccurrences(of: "alice", with: "alixe")))
        #expect(!occurs("alice", in: ""))
        #expect(occurs("", in: "anything"))
    }

    /// Where `needle`'s bytes occur in the ledger: each file of an LMDB ledger's directory, or
    /// each column of a PostgreSQL ledger's tables.
    static func places(of needle: String, at location: String, on backend: Backend) throws -> [String] {
        switch backend {
        case .lmdb:
            let files = try FileManager.default.contentsOfDirectory(atPath: location)
            #expect(files.contains("data.mdb"))
            return try files.filter { file in
                let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: location + "/" + file)))
                return !occurrences(of: Array(needle.utf8), in: bytes).isEmpty
            }
        case .postgres:
            let connection = try BlockingConnection.connect(try PostgresLocation(url: location), logger: Logger(label: "test"))
            defer { connection.close() }
            let columns = try connection.query("""
                SELECT table_name::text, column_name::text, data_type::text FROM information_schema.columns
                WHERE table_schema = 'public' AND data_type IN ('bytea', 'text')
                """).rows.map { try $0.decode((String, String, String).self, context: .default) }
            #expect(columns.count > 10)
            var found: [String] = []
            for (table, column, type) in columns {
                let bytes = type == "text" ? "convert_to(\"\(column)\", 'UTF8')" : "\"\(column)\""
                let hits = try connection.query(PostgresQuery(unsafeSQL: """
                    SELECT count(*) FROM "\(table)" WHERE position(convert_to($1, 'UTF8') IN \(bytes)) > 0
                    """, binds: try binds(needle))).first?.decode(Int64.self, context: .default) ?? 0
                if hits > 0 { found.append("\(table).\(column)") }
            }
            return found
        }
    }

    private static func binds(_ value: String) throws -> PostgresBindings {
        var binds = PostgresBindings()
        binds.append(value)
        return binds
    }
}
