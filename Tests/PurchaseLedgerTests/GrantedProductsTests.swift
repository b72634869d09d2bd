import Testing
@testable import PurchaseLedger
import LedgerTestSupport

/// A projection's entitlements come from `AccountView.grantedProducts(at:)`, which finds the
/// products granted without building what grants them (the change feed builds a projection
/// after every event): they must be exactly the timeline's `grants(at:)`, at every instant
/// where something takes effect and just before it.
struct GrantedProductsTests {
    static func states() async throws -> [LedgerState] {
        var streams: [[Event]] = (1...6).map { seed in
            var generator = EventStreamGenerator(seed: UInt64(seed))
            return generator.events(400)
        }
        let now = Timestamp(seconds: 1_800_000_000)
        streams.append(ChangeFeedTests.deviceEvents() + ChangeFeedTests.subscriptionEvents("cy", expiringAt: Timestamp(seconds: now.seconds + 60), now: now))
        let at = ValidTimeTests.report
        streams.append([
            at("r1", "up", "10:00", "u1", nil, "com.example.pro.month", "10:00", "10:30", nil, nil, nil, nil),
            at("r2", "up", "10:20", "u2", "u1", "com.example.pro.year", "10:20", "11:20", nil, nil, nil, nil),
            at("r3", "up", "10:25", "u1", nil, "com.example.pro.month", "10:00", "10:30", nil, "10:25", .refundFull, true),
            at("r4", "nc", "10:00", "n1", nil, "com.example.hardwords", "10:00", nil, .sandbox, nil, nil, nil),
            at("r5", "nc", "10:40", "n1", nil, "com.example.hardwords", "10:00", nil, .sandbox, "10:40", .familyRevoke, nil),
        ])
        var states: [LedgerState] = []
        for events in streams {
            // Through a ledger: a generated stream holds events the rules refuse, in no log.
            states.append(try await withLedger(on: .lmdb) { ledger, _ in
                _ = try await ledger.append(contentsOf: events)
                return try ledger.state(at: ledger.position)
            })
        }
        return states
    }

    @Test func theProductsGrantedAreTheTimelinesGrantsAtEveryInstant() async throws {
        var compared = 0
        for state in try await Self.states() {
            for (account, accountState) in state.accounts.keysAndValues {
                for excluded in [[], [StoreEnvironment.sandbox]] as [Set<StoreEnvironment>] {
                    let view = AccountView(account: account.string, state: accountState, excluding: excluded, catalog: nil) { state.revocations[$0] != nil }
                    for instant in view.instants + [.earliest] {
                        for time in [instant.justBefore, instant] {
                            #expect(view.grantedProducts(at: time) == view.grants(at: time).keys.sorted(), "\(account.string) at \(time)")
                            // Every grant's product is granted; `grants(at:)` keeps one of each.
                            #expect(Set(view.allGrants(at: time).map(\.product)) == Set(view.grants(at: time).keys), "\(account.string) at \(time)")
                            compared += 1
                        }
                    }
                }
            }
        }
        #expect(compared > 500)
    }
}
