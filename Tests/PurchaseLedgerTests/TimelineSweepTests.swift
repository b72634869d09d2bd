import Foundation
import Testing
@testable import PurchaseLedger
import LedgerTestSupport

/// The timeline found in one pass over an account's instants (`GrantSweep`) is the timeline
/// found by judging the account again at every instant, as it was before (the reference below,
/// kept here), for every account of generated streams (renewals, upgrades, refunds, grace
/// periods, entries that expire, transfers), in every view of environments (issue 42). A
/// timeline read for a client that left stops.
struct TimelineSweepTests {
    @Test(arguments: [1, 7, 42, 1234, 99_999])
    func theSweepIsTheTimelineJudgedAtEveryInstant(seed: Int) async throws {
        try await withLedger(on: .lmdb) { ledger, _ in
            var generator = EventStreamGenerator(seed: UInt64(seed))
            for _ in 0..<8 { _ = try await ledger.append(contentsOf: generator.events(120)) }
            // And subscription histories: renewals, refunds and their reversals, upgrades, grace.
            var random = SeededGenerator(seed: UInt64(seed))
            for scenario in 0..<6 {
                let history = OrderIndependenceTests.history("s\(scenario)", random: &random)
                for report in OrderIndependenceTests.shuffled(history, random: &random) { _ = try await ledger.append(contentsOf: report) }
            }
            let state = try ledger.currentState()
            var compared = 0
            for account in state.accountIDs {
                guard let accountState = state.accounts[UTF8Key(account)] else { continue }
                for excluded: Set<StoreEnvironment> in [[], [.sandbox], [.production, .xcode]] {
                    let view = AccountView(
                        account: account, state: accountState, excluding: excluded, catalog: nil) { state.revocations[$0] != nil }
                    let swept = view.timeline()
                    #expect(swept == Self.referenceTimeline(view), "\(account) excluding \(excluded)")
                    compared += swept.count
                }
            }
            #expect(compared > 10, "the histories grant products at some instants")
        }
    }

    /// A long subscription's timeline is read whole; read in a task that was cancelled (its
    /// client left), it stops with `CancellationError` instead of holding its slot to the end.
    @Test func aCancelledTimelineStops() async throws {
        try await withLedger(on: .lmdb) { ledger, _ in
            let renewals = 1_500
            try await LongSubscriber.append(LongSubscriber.renewals(renewals), to: ledger, chunk: 500)
            let whole = try #require(try ledger.projectionAndPosition(of: "long", timeline: true).projection?.timeline)
            #expect(whole.first?.intervals.count == renewals, "each renewal is an interval: an hour's gap after each")

            let reading = Task { () throws -> [ProductTimeline]? in
                while !Task.isCancelled { await Task.yield() }
                return try ledger.projectionAndPosition(of: "long", timeline: true).projection?.timeline
            }
            reading.cancel()
            var stopped = false
            do { _ = try await reading.value } catch is CancellationError { stopped = true }
            #expect(stopped, "a cancelled timeline stops with CancellationError")
        }
    }

    /// The timeline judged at every instant: `grants(at:)` just before the first instant and at
    /// each, and the causes found by looking each group's transaction in force up again. O(n²)
    /// in an account's records: what `timeline()` did before the sweep.
    static func referenceTimeline(_ view: AccountView) -> [ProductTimeline] {
        typealias Grant = AccountView.Grant
        let instants = view.instants
        var samples: [(instant: Timestamp?, grants: [UTF8Key: Grant])] = [(nil, view.grants(at: instants.first?.justBefore ?? .earliest))]
        for instant in instants { samples.append((instant, view.grants(at: instant))) }
        func wasUpgradedAway(in groupName: String, at instant: Timestamp) -> Bool {
            view.groups.first { $0.name == groupName }?.upgradedAt.contains(instant) ?? false
        }
        func startCause(of grant: Grant, previous: Grant?, at instant: Timestamp) -> OwnershipInterval.Cause {
            guard let record = grant.record else { return .device }
            if let previous, sameBytes(previous.transaction, grant.transaction), previous.status == .active, grant.status == .gracePeriod {
                return .gracePeriod
            }
            if wasUpgradedAway(in: record.group, at: instant) { return .upgrade }
            if record.startsAt == instant, let original = record.fact.originalTransaction, !sameBytes(original, record.fact.transaction) {
                return .renewal
            }
            return .purchase
        }
        func endCause(of grant: Grant, next: Grant?, at instant: Timestamp) -> OwnershipInterval.Cause {
            if let next, sameBytes(next.transaction, grant.transaction), grant.status == .active, next.status == .gracePeriod {
                return .gracePeriod
            }
            if let record = grant.record, record.fact.revokedAt == instant { return AccountView.revocationCause(record) }
            if grant.upgradedAt == instant { return .upgrade }
            if let next, next.record?.startsAt == instant { return startCause(of: next, previous: grant, at: instant) }
            if grant.status == .gracePeriod, grant.gracePeriodEndsAt == instant { return .gracePeriodEnded }
            if let record = grant.record, record.fact.expiresAt != instant,
               let group = view.groups.first(where: { $0.name == record.group }),
               let index = group.inForce(at: instant), !sameBytes(group.records[index].fact.transaction, record.fact.transaction) {
                let successor = group.records[index]
                if successor.fact.revokedAt.map({ $0 <= instant }) == true { return AccountView.revocationCause(successor) }
                if group.isUpgraded(index, by: instant) || wasUpgradedAway(in: group.name, at: instant) { return .upgrade }
                return successor.fact.originalTransaction.map { sameBytes($0, successor.fact.transaction) } == false ? .renewal : .purchase
            }
            return .expiry
        }
        var open: [UTF8Key: (interval: OwnershipInterval, grant: Grant)] = [:]
        var closed: [UTF8Key: [OwnershipInterval]] = [:]
        for (instant, grants) in samples {
            for product in Set(open.keys).union(grants.keys) {
                let previous = open[product]
                let current = grants[product]
                if let previous, let current, current.continues(previous.grant) { continue }
                if let previous, let instant {
                    var interval = previous.interval
                    interval.until = instant
                    interval.untilCause = endCause(of: previous.grant, next: current, at: instant)
                    closed[product, default: []].append(interval)
                    open[product] = nil
                }
                if let current {
                    let cause = instant.map { startCause(of: current, previous: previous?.grant, at: $0) } ?? .device
                    open[product] = (OwnershipInterval(from: instant, fromCause: cause, transaction: current.transaction, status: current.status), current)
                }
            }
        }
        for (product, last) in open { closed[product, default: []].append(last.interval) }
        return closed.keys.sorted().map { ProductTimeline(product: $0.string, intervals: closed[$0]!) }
    }
}
