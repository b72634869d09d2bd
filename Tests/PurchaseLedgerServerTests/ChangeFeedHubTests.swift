import Logging
import PurchaseLedger
import PurchaseLedgerLMDB
@testable import PurchaseLedgerServer
import LedgerTestSupport
import Synchronization
import Testing

/// The server's one derivation of the feed per scope (`ChangeFeedHub`): a reader following it
/// from any cursor, behind what it keeps or not, gets exactly the feed derived from storage,
/// live commits included.
struct ChangeFeedHubTests {
    static func purchases(_ range: Range<Int>) -> [Event] {
        range.flatMap { index -> [Event] in
            let account = "player-\(index % 7)"
            return [
                .paymentAdded(id: "a\(index)", account: account, at: .now(), payment: "p\(index)", product: "com.example.tenhints"),
                .transactionUpdated(id: "b\(index)", account: account, at: .now(), TransactionUpdated(
                    payment: "p\(index)", state: .purchased, transaction: "t\(index)")),
            ]
        }
    }

    static func collect(_ following: ChangeFeedHub.Following, count: Int) async throws -> [LedgerChange] {
        var seen: [LedgerChange] = []
        for try await change in following {
            seen.append(change)
            if seen.count == count { break }
        }
        return seen
    }

    /// A ledger with 60 changes (30 purchases of 7 accounts) and a hub following it that keeps 5
    /// to 10 changes, so that most of the history is out of its window: `body` runs once the hub
    /// has derived the last change, with the feed derived from storage.
    static func withFollowingHub(
        at priority: FeedPriority = .background, expensiveReads: Int = 2, catchUpEvents: Int = 100_000,
        _ body: (Ledger, ChangeFeedHub, [LedgerChange]) async throws -> Void
    ) async throws {
        try await withTemporaryDirectory { directory in
            let ledger = try Ledger.open(at: directory + "/ledger", catalog: serverTestCatalog)
            var logger = Logger(label: "test")
            logger.logLevel = .error
            let hub = ChangeFeedHub(
                ledger: ledger, priority: priority, capacity: 5, expensiveReads: expensiveReads, catchUpEvents: catchUpEvents, logger: logger)
            let following = Task { try await hub.follow() }
            for batch in 0..<6 {
                _ = try await ledger.append(contentsOf: Self.purchases(batch * 5..<(batch + 1) * 5))
            }
            let derived = try await ChangeFeedTestsSupport.all(ledger.changes(follow: false))
            let beforeLast = derived[derived.count - 2].cursor
            try await withTimeout(.seconds(60)) {
                while await hub.kept(after: beforeLast, limit: 1, wait: .zero)?.isEmpty != false { try await Task.sleep(for: .milliseconds(10)) }
            }
            do {
                try await body(ledger, hub, derived)
            } catch {
                following.cancel()
                _ = await following.result
                await ledger.close()
                throw error
            }
            following.cancel()
            _ = await following.result
            await ledger.close()
        }
    }

    @Test(arguments: [FeedPriority.background, .normal])
    func aReaderBehindWhatTheHubKeepsCatchesUpAndFollowsIt(at priority: FeedPriority) async throws {
        try await Self.withFollowingHub(at: priority) { ledger, hub, derived in
            #expect(derived.count == 60)
            // From the start, from the middle (both behind the window), and from near the end.
            for start in [0, 25, 57] {
                let cursor = start == 0 ? FeedCursor.start : derived[start - 1].cursor
                let caughtUp = try await withTimeout(.seconds(60)) {
                    try await Self.collect(hub.changes(following: cursor), count: 60 - start)
                }
                #expect(caughtUp.map(\.json) == derived[start...].map(\.json), "from \(start)")
            }
            // Following: the next commits come through the hub, in order.
            let reader = Task { try await Self.collect(hub.changes(following: derived[59].cursor), count: 8) }
            _ = try await ledger.append(contentsOf: Self.purchases(30..<34))
            let live = try await withTimeout(.seconds(60), onTimeout: { reader.cancel() }) { try await reader.value }
            let all = try await ChangeFeedTestsSupport.all(ledger.changes(follow: false))
            #expect(live.map(\.json) == all[60...].map(\.json))
        }
    }

    /// `GET /v1/changes` from behind what the hub keeps, page after page: the pages are the feed
    /// derived from storage, and the reader's derivation goes on from page to page (one started
    /// in all) instead of starting from the log's start for each.
    @Test func pagesReadFromBehindTheHubContinueOneDerivation() async throws {
        try await Self.withFollowingHub { _, hub, derived in
            #expect(await hub.kept(after: .start, limit: 1, wait: .zero) == nil)
            var cursor = FeedCursor.start
            var pages: [LedgerChange] = []
            for _ in 0..<8 {
                let (page, next) = try await hub.changes(after: cursor, limit: 7, wait: .zero)
                pages += page
                cursor = next
            }
            #expect(pages.map(\.json) == derived.prefix(56).map(\.json))
            #expect(await hub.catchUpsStarted == 1)
        }
    }
}

extension ChangeFeedHubTests {
    /// A reader behind what the hub keeps derives at most a bounded part of the log per request
    /// (issue 41, point 6): a page then holds what was found, and `next` where the derivation
    /// got to; asking from there continues the one derivation. The pages are the feed derived
    /// from storage, whole.
    @Test func aCatchUpDerivesABoundedPartOfTheLogPerRequestAndContinues() async throws {
        // Each commit holds ten events; a request derives at most fifteen more.
        try await Self.withFollowingHub(catchUpEvents: 15) { _, hub, derived in
            var cursor = FeedCursor.start
            var pages: [LedgerChange] = []
            var requests = 0
            while pages.count < derived.count - 10, requests < 100 {
                let (page, next) = try await hub.changes(after: cursor, limit: 1000, wait: .zero)
                #expect(next >= cursor)
                pages += page
                cursor = next
                requests += 1
            }
            #expect(pages.map(\.json) == derived.prefix(pages.count).map(\.json))
            #expect(pages.count >= derived.count - 10)
            // A request reads a few commits' readings at a time (four): more than the budget here.
            #expect(requests >= 2, "60 events at 15 a request take more than one")
            #expect(await hub.catchUpsStarted == 1)
            #expect(hub.reads.count() == 0)
        }
    }

    /// At most `expensiveReads` derivations at once: a reader behind what is kept while every
    /// slot is taken is told the server is busy, and reads once one is free.
    @Test func aCatchUpWithEverySlotTakenIsRefusedBusy() async throws {
        try await Self.withFollowingHub(expensiveReads: 1) { _, hub, derived in
            let taken = try #require(hub.reads.tryAcquire(key: ""))
            await #expect(throws: ChangeFeedHub.Busy.self) { _ = try await hub.changes(after: .start, limit: 10, wait: .zero) }
            taken.release()
            let (page, _) = try await hub.changes(after: .start, limit: 10, wait: .zero)
            #expect(page.map(\.json) == derived.prefix(10).map(\.json))
        }
    }

    /// One key's readers far behind, paging as fast as they are answered, take all slots but
    /// one: another key's reader behind still finds its slot, and so does its timeline (or
    /// proof, or books) while the slots last.
    @Test func oneKeysReadersBehindLeaveAnotherKeyASlot() async throws {
        try await Self.withFollowingHub(expensiveReads: 2) { _, hub, derived in
            let mirror = try #require(hub.reads.tryAcquire(key: "mirror"))
            await #expect(throws: ChangeFeedHub.Busy.self) {
                _ = try await hub.changes(after: .start, limit: 10, wait: .zero, key: "mirror")
            }
            let (page, _) = try await hub.changes(after: .start, limit: 10, wait: .zero, key: "auditor")
            #expect(page.map(\.json) == derived.prefix(10).map(\.json))
            let timeline = try #require(hub.reads.tryAcquire(key: "auditor"))
            #expect(hub.reads.tryAcquire(key: "other") == nil, "every slot is taken")
            mirror.release()
            timeline.release()
            #expect(hub.reads.count() == 0)
        }
        for limit in 1...4 {
            let reads = ExpensiveReads(limit: limit)
            var slots: [ExpensiveReads.Slot] = []
            while let slot = reads.tryAcquire(key: "mirror") { slots.append(slot) }
            #expect(slots.count == max(1, limit - 1))
            while let slot = reads.tryAcquire(key: "auditor") { slots.append(slot) }
            #expect(slots.count == limit)
            #expect(reads.count(of: "mirror") == max(1, limit - 1))
            for slot in slots { slot.release() }
            #expect(reads.count() == 0)
        }
    }

    /// A reader's derivation waits between its pages for that reader's key: a client asking
    /// from many cursors gives up its own parked derivations, not another key's, and cannot
    /// continue another key's from its cursor.
    @Test func oneKeyAskingFromManyCursorsLeavesAnotherKeysDerivationParked() async throws {
        try await Self.withFollowingHub(catchUpEvents: 15) { _, hub, derived in
            let (first, next) = try await hub.changes(after: .start, limit: 1000, wait: .zero, key: "auditor")
            #expect(await hub.parkedCount(of: "auditor") == 1)
            // Another key asks from the auditor's cursor, then from many others.
            _ = try await hub.changes(after: next, limit: 1000, wait: .zero, key: "mirror")
            for index in stride(from: 1, to: 20, by: 3) {
                _ = try await hub.changes(after: derived[index].cursor, limit: 1000, wait: .zero, key: "mirror")
            }
            #expect(await hub.parkedCount(of: "mirror") == ChangeFeedHub.parkedCatchUpsPerKey)
            #expect(await hub.parkedCount(of: "auditor") == 1)
            // The auditor's next page continues its own derivation.
            let started = await hub.catchUpsStarted
            let (second, _) = try await hub.changes(after: next, limit: 1000, wait: .zero, key: "auditor")
            #expect(await hub.catchUpsStarted == started)
            #expect((first + second).map(\.json) == derived.prefix(first.count + second.count).map(\.json))
        }
    }

    /// A reader who knows of a forget (the ledger's forget generation moved) is never answered
    /// from a window that still names the forgotten account, however late the hub's own
    /// follower of forgets runs: here it never runs (a hub that is only followed, as a webhook
    /// scope's is), and the window is renamed at the request. (A webhook session that restarted
    /// at a forget read her old name from the window in a CI run.)
    @Test func aReaderWhoKnowsOfAForgetGetsNoOldNameFromTheWindow() async throws {
        try await Self.withFollowingHub { ledger, hub, derived in
            // The window's last changes are purchases 25 to 29: player-0 made purchase 28.
            let start = derived[53].cursor
            let before = try #require(await hub.kept(after: start, limit: 100, wait: .zero))
            #expect(before.contains { $0.account == "player-0" })
            let generation = ledger.forgetGeneration
            let pseudonym = try #require(try await ledger.forget("player-0", requestedBy: "test")).pseudonym
            #expect(ledger.forgetGeneration > generation)
            let (page, _) = try await hub.changes(after: start, limit: 100, wait: .zero)
            let following = try await withTimeout(.seconds(60)) { try await Self.collect(hub.changes(following: start), count: before.count) }
            for answer in [page, following] {
                #expect(answer.count >= before.count)
                #expect(!answer.contains { $0.account == "player-0" || $0.json.contains("player-0") || $0.cursor.account == "player-0" })
                #expect(answer.contains { $0.account == pseudonym })
            }
        }
    }

    /// An expensive read whose client left stops: its work is cancelled within a poll of the
    /// client, and its slot is free again.
    @Test func anExpensiveReadStopsWhenItsClientLeaves() async throws {
        let reads = ExpensiveReads(limit: 1)
        let polls = Mutex(0)
        let slot = try #require(reads.tryAcquire(key: ""))
        await #expect(throws: CancellationError.self) {
            try await ExpensiveReads.run(in: slot, until: { polls.withLock { $0 += 1; return $0 > 3 } }) {
                // Work that would go on for a minute: it ends when cancelled.
                try await Task.sleep(for: .seconds(60))
                return 0
            }
        }
        #expect(polls.withLock { $0 } > 3)
        #expect(reads.count() == 0)
    }
}

enum ChangeFeedTestsSupport {
    static func all(_ changes: LedgerChanges) async throws -> [LedgerChange] {
        var seen: [LedgerChange] = []
        for try await change in changes { seen.append(change) }
        return seen
    }
}
