import Foundation
import Synchronization
import Testing
@testable import PurchaseLedger
import LedgerTestSupport
import PurchaseLedgerLocation

/// The change feed (docs/FEEDS.md) on every backend: what a follower sees live is what the
/// feed derived again from storage says, ids included; time passing is a change; a cursor
/// resumes exactly after itself.
struct ChangeFeedTests {
    /// Events of two accounts: a purchase finished, a consumable refunded by a `revoked` event.
    static func deviceEvents() -> [Event] {
        var ana = Script("ana")
        var ben = Script("ben")
        return [
            ana.add("p1", "com.example.hardwords"),
            ana.purchased("p1", "ana-t1"),
            ana.finish("p1"),
            ben.add("p2", "com.example.tenhints"),
            ben.purchased("p2", "ben-t2"),
            ben.consume("hints", 3),
            ben.revoke("ben-t2", reason: "refund"),
        ]
    }

    /// A subscription the store reports, refunds at once and reverses the refund of, expiring
    /// at `expiry`: one batch, for `account`.
    static func subscriptionEvents(_ account: String, expiringAt expiry: Timestamp, now: Timestamp) -> [Event] {
        let purchased = Timestamp(seconds: now.seconds - 60)
        func report(_ suffix: String, signed: Int64, revoked: Bool) -> Event {
            .storeTransaction(id: "\(account)-\(suffix)", account: account, signedAt: Timestamp(seconds: now.seconds + signed), StoreTransaction(
                transaction: "\(account)-t1", originalTransaction: "\(account)-t1", product: "com.example.pro.month",
                purchasedAt: purchased, expiresAt: expiry, environment: .sandbox,
                revokedAt: revoked ? now : nil, revocationType: revoked ? .refundFull : nil))
        }
        return [report("1", signed: 0, revoked: false), report("2", signed: 1, revoked: true), report("3", signed: 2, revoked: false)]
    }

    static func collect(_ changes: LedgerChanges, until done: @escaping @Sendable ([LedgerChange]) -> Bool) async throws -> [LedgerChange] {
        var seen: [LedgerChange] = []
        for try await change in changes {
            seen.append(change)
            if done(seen) { break }
        }
        return seen
    }

    @Test(arguments: Backend.available)
    func whatAFollowerSeesIsTheFeedDerivedAgainAndTimePassingIsAChange(on backend: Backend) async throws {
        try await withLedger(on: backend) { ledger, location in
            // Until the expiry of the subscription that was committed before its expiry (an
            // earlier one, whose commit a loaded machine ended too late, may expire first).
            let subscribed = ExpiringSubscriber()
            let follower = Task {
                try await Self.collect(ledger.changes(pollInterval: .milliseconds(50))) { seen in
                    let target = subscribed.account.withLock { $0 }
                    return seen.contains { if case .time = $0.cause, $0.account == target { true } else { false } }
                }
            }
            for event in Self.deviceEvents() {
                try await ledger.appendAll([event])
            }
            // A subscription that expires a few seconds after its commit: on a machine so busy
            // that the commit ends after the expiry there is no time change to see, so it is
            // tried again, lasting longer.
            var subscriber = ""
            var expiry = Timestamp.now()
            for (attempt, seconds) in [3, 10, 30].enumerated() {
                let now = Timestamp.now()
                subscriber = "cy\(attempt)"
                expiry = Timestamp(seconds: now.seconds + Int64(seconds), nanoseconds: now.nanoseconds)
                try await ledger.appendAll(Self.subscriptionEvents(subscriber, expiringAt: expiry, now: now))
                if Timestamp.now() < expiry { break }
            }
            subscribed.account.withLock { $0 = subscriber }
            let live = try await withTimeout(.seconds(60), onTimeout: { follower.cancel() }) { try await follower.value }

            // Time passing: the subscription expired at `expiry`, with nothing appended.
            let expired = try #require(live.last)
            #expect(expired.account == subscriber)
            #expect(expired.cause == .time(expiry))
            #expect(expired.differences == [
                .entitlementExpired(product: "com.example.pro.month"),
                .subscriptionStatus(group: "pro", from: .active, to: .expired),
            ])
            #expect(expired.projection.entitlements.isEmpty)

            // Each event that changed a projection, once, in order; the refund and its reversal.
            let caused = live.filter { if case .event = $0.cause { true } else { false } }
            #expect(caused.map(\.position) == Array(1...ledger.position))
            let ben = live.filter { $0.account == "ben" }.last
            #expect(ben?.differences == [.balance(item: "hints", delta: -10)])
            #expect(ben?.projection.balances == ["hints": -3])
            let refunded = try #require(live.first { $0.cause == .event(id: "\(subscriber)-2", type: .storeTransaction) })
            #expect(refunded.differences.contains(.entitlementRevoked(product: "com.example.pro.month", reason: .refund)))
            let reversed = try #require(live.first { $0.cause == .event(id: "\(subscriber)-3", type: .storeTransaction) })
            #expect(reversed.differences.contains(.entitlementGranted(product: "com.example.pro.month")))

            // Derived again from storage, from the start and after every cursor: the same.
            let derived = try await Self.collect(ledger.changes(follow: false)) { _ in false }
            #expect(derived.map(\.json) == live.map(\.json))
            for (index, change) in live.enumerated() {
                let cursor = try #require(FeedCursor(change.id))
                #expect(cursor == change.cursor)
                let rest = try await Self.collect(ledger.changes(after: cursor, follow: false)) { _ in false }
                #expect(rest.map(\.id) == live.dropFirst(index + 1).map(\.id), "after \(change.id)")
            }
            // From the log alone, as `ledger changes` reads it.
            await ledger.close()
            let log = try LedgerLog.open(location: location)
            defer { log.close() }
            let fromLog = try await Self.collect(log.changes()) { _ in false }
            #expect(fromLog.map(\.json) == live.map(\.json))
        }
    }

    /// `ledger copy`'s feed copy, from every backend to every other: the copy's feed is the
    /// source's, change for change and byte for byte (its commits were made later, at other
    /// instants, but it takes the source's clock), and the feed consumers' state comes along,
    /// so that a webhook endpoint goes on where it was.
    @Test(arguments: Backend.available, Backend.available)
    func aCopyHasTheSourcesFeedAndItsConsumersState(from source: Backend, to destination: Backend) async throws {
        try await withLedger(on: source) { ledger, sourceLocation in
            for event in Self.deviceEvents() { try await ledger.appendAll([event]) }
            try await ledger.recordClock()
            let parked = WebhookState.Parked(id: "5.YmVu", account: "ben", attempts: 3, error: "HTTP 500", parkedAt: "2026-11-26T12:00:00Z", body: "{}")
            try await ledger.updateFeedState { state in
                try state.set(WebhookState.parkedPrefix("hook") + parked.id, WebhookState.encode(parked))
            }
            await ledger.close()
            let log = try LedgerLog.open(location: sourceLocation)
            defer { log.close() }
            let sourceFeed = try await Self.collect(log.changes()) { _ in false }
            #expect(sourceFeed.count >= 7)
            try await withLocation(on: destination) { location in
                var configuration = Ledger.Configuration.testing
                configuration.copying = true
                let copy = try Ledger.open(location: location, catalog: wordGameCatalog, configuration: configuration)
                // Later, one commit: other instants than the source's.
                try await Task.sleep(for: .milliseconds(20))
                _ = try await copy.appendAll(Self.deviceEvents())
                try await copy.copyFeed(from: log, through: try log.lastPosition(), states: try log.feedStates(prefix: ""))
                try copy.markCopyComplete()
                await copy.close()

                let copied = try LedgerLog.open(location: location)
                defer { copied.close() }
                let copyFeed = try await Self.collect(copied.changes()) { _ in false }
                #expect(copyFeed.map(\.json) == sourceFeed.map(\.json))
                let states = try copied.feedStates(prefix: WebhookState.prefix)
                #expect(states.map(\.key) == ["webhooks/hook/parked/5.YmVu"])
                #expect(try WebhookState.decode(WebhookState.Parked.self, states.first?.value, key: "parked") == parked)
            }
        }
    }

    /// A subscription that expires is an expiry, even when an older transaction of the same
    /// product was refunded; a refund of the transaction that granted it is a refund.
    @Test func anExpiryIsNotARefundBecauseAnOlderTransactionWasRefunded() {
        func report(_ transaction: String, revoked: Bool) -> StorePurchase {
            StorePurchase(report: StoreTransaction(transaction: transaction, originalTransaction: "T1", product: "pro",
                                                   revokedAt: revoked ? newYear : nil, revocationType: revoked ? .refundFull : nil),
                          isRevoked: revoked)
        }
        func status(_ status: SubscriptionStatus.Status) -> SubscriptionStatus {
            SubscriptionStatus(group: "g", originalTransaction: "T1", transaction: "T2", product: "pro", status: status)
        }
        var before = AccountProjection(account: "a", entitlements: ["pro"], balances: [:], unfinished: [])
        before.subscriptions = [status(.active)]
        before.storeTransactions = [report("T1", revoked: true), report("T2", revoked: false)]
        var expired = before
        expired.entitlements = []
        expired.subscriptions = [status(.expired)]
        #expect(ChangeDifference.between(before, expired, cause: .time(newYear)) == [
            .entitlementExpired(product: "pro"), .subscriptionStatus(group: "g", from: .active, to: .expired),
        ])
        var refunded = expired
        refunded.subscriptions = [status(.revoked)]
        refunded.storeTransactions = [report("T1", revoked: true), report("T2", revoked: true)]
        #expect(ChangeDifference.between(before, refunded, cause: .time(newYear)) == [
            .entitlementRevoked(product: "pro", reason: .refund), .subscriptionStatus(group: "g", from: .active, to: .revoked),
        ])
    }

    @Test func cursorsReadBackAndOrderAsTheFeedDoes() throws {
        let time = Timestamp(seconds: 1_767_225_600, nanoseconds: 5)
        let cursors = [
            FeedCursor.start,
            FeedCursor(position: 1, account: "ana"),
            FeedCursor(position: 1, account: "ben"),
            FeedCursor(position: 1),
            FeedCursor(position: 1, instant: time, account: "é/\u{0}"),
            FeedCursor(position: 1, instant: time),
            FeedCursor(position: 2, account: "a"),
        ]
        #expect(cursors == cursors.sorted())
        for cursor in cursors {
            #expect(FeedCursor(cursor.description) == cursor, "\(cursor)")
        }
        #expect(FeedCursor(position: 1, instant: time, account: "ana").description == "1@1767225600.000000005.YW5h")
        for bad in ["", "-1", "1.", "1.YW5h=", "1@1.5", "1@x.000000000", "1.!!", "18446744073709551616", "1 "] {
            #expect(FeedCursor(bad) == nil, "\(bad)")
        }
    }

    /// A change's JSON carries its cursor's text as its id and its cursor, written in place:
    /// the text of any cursor (a time change's, before 1970, an account of any bytes) reads
    /// back to that cursor, and a line appended after others, to a buffer held elsewhere too,
    /// leaves what was there and what holds it.
    @Test func aChangesLineCarriesItsCursorAsText() async throws {
        try await withTemporaryDirectory { directory in
            let ledger = try Ledger.open(at: directory + "/ledger", catalog: wordGameCatalog, configuration: .testing)
            try await ledger.appendAll(Self.deviceEvents())
            let changes = try await Self.collect(ledger.changes(follow: false)) { _ in false }
            await ledger.close()
            let time = Timestamp(seconds: -2, nanoseconds: 5)
            let cursors = [
                changes[0].cursor, FeedCursor(position: 7), FeedCursor(position: 1, instant: time),
                FeedCursor(position: 1, instant: time, account: "é/\u{0}\"\\"),
            ]
            for cursor in cursors {
                var change = try #require(changes.last)
                change.cursor = cursor
                guard case .object(let members) = try JSONParser.parse(Array(change.json.utf8)) else {
                    Issue.record("not an object: \(change.json)")
                    continue
                }
                for name in ["id", "cursor"] {
                    guard case .string(let text) = members[UTF8Key(name)] else {
                        Issue.record("no \(name) in \(change.json)")
                        continue
                    }
                    #expect(text == cursor.description)
                    #expect(FeedCursor(text) == cursor, "\(name): \(text)")
                }
                var buffer = Array("x\n".utf8)
                let held = buffer
                change.appendJSONLine(to: &buffer)
                change.appendJSONLine(to: &buffer)
                #expect(buffer == Array("x\n\(change.json)\n\(change.json)\n".utf8))
                #expect(held == Array("x\n".utf8))
            }
        }
    }
}

/// The account whose expiry the follower waits for, once it is known.
private final class ExpiringSubscriber: Sendable {
    let account = Mutex<String?>(nil)
}
