import Foundation
import Testing
@testable import PurchaseLedger
import LedgerTestSupport
import PurchaseLedgerLocation

/// The change feed (docs/FEEDS.md) on every backend: what a follower sees live is what the
/// feed derived again from storage says, ids included; time passing is a change; a cursor
/// resumes exactly after itself.
struct ChangeFeedTests {
    /// Events of three accounts: a purchase finished, a consumable refunded by a `revoked`
    /// event, a subscription the store reports expiring `expiresIn` from now, a reversed refund.
    static func events(expiringAt expiry: Timestamp, now: Timestamp) -> [Event] {
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
            .storeTransaction(id: "cy-1", account: "cy", signedAt: now, StoreTransaction(
                transaction: "cy-t1", originalTransaction: "cy-t1", product: "com.example.pro.month",
                purchasedAt: Timestamp(seconds: now.seconds - 60), expiresAt: expiry, environment: .sandbox)),
            .storeTransaction(id: "cy-2", account: "cy", signedAt: Timestamp(seconds: now.seconds + 1), StoreTransaction(
                transaction: "cy-t1", originalTransaction: "cy-t1", product: "com.example.pro.month",
                purchasedAt: Timestamp(seconds: now.seconds - 60), expiresAt: expiry, environment: .sandbox,
                revokedAt: now, revocationType: .refundFull)),
            .storeTransaction(id: "cy-3", account: "cy", signedAt: Timestamp(seconds: now.seconds + 2), StoreTransaction(
                transaction: "cy-t1", originalTransaction: "cy-t1", product: "com.example.pro.month",
                purchasedAt: Timestamp(seconds: now.seconds - 60), expiresAt: expiry, environment: .sandbox)),
        ]
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
            let now = Timestamp.now()
            let expiry = Timestamp(seconds: now.seconds + 3, nanoseconds: now.nanoseconds)
            let follower = Task {
                try await Self.collect(ledger.changes(pollInterval: .milliseconds(50))) { seen in
                    seen.contains { if case .time = $0.cause { true } else { false } }
                }
            }
            for event in Self.events(expiringAt: expiry, now: now) {
                try await ledger.appendAll([event])
            }
            let live = try await withTimeout(.seconds(30)) { try await follower.value }

            // Time passing: cy's subscription expired at `expiry`, with nothing appended.
            let expired = try #require(live.last)
            #expect(expired.account == "cy")
            #expect(expired.cause == .time(expiry))
            #expect(expired.differences == [
                .entitlementExpired(product: "com.example.pro.month"),
                .subscriptionStatus(group: "pro", from: .active, to: .expired),
            ])
            #expect(expired.projection.entitlements.isEmpty)

            // Each event that changed a projection, once, in order; the refund and its reversal.
            #expect(live.filter { if case .event = $0.cause { true } else { false } }.map(\.position) == Array(1...10))
            let ben = live.filter { $0.account == "ben" }.last
            #expect(ben?.differences == [.balance(item: "hints", delta: -10)])
            #expect(ben?.projection.balances == ["hints": -3])
            let refunded = try #require(live.first { $0.cursor.position == 9 })
            #expect(refunded.differences.contains(.entitlementRevoked(product: "com.example.pro.month", reason: .refund)))
            let reversed = try #require(live.first { $0.cursor.position == 10 })
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
}

/// Runs `body`, failing if it takes longer than `limit`.
func withTimeout<R: Sendable>(_ limit: Duration, _ body: @escaping @Sendable () async throws -> R) async throws -> R {
    try await withThrowingTaskGroup(of: R?.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: limit)
            return nil
        }
        defer { group.cancelAll() }
        guard let result = try await group.next(), let value = result else {
            throw TestFailure("took longer than \(limit)")
        }
        return value
    }
}
