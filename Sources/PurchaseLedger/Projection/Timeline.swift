/// When a product was owned, interval by interval, and what started and ended each: the
/// answer to "I bought it on the 3rd and could not use it" (FORMAT.md, "Timeline").
public struct ProductTimeline: Sendable, Hashable {
    public var product: String
    /// In time order; they never overlap.
    public var intervals: [OwnershipInterval]
}

/// A run of instants during which one transaction granted a product in one status.
public struct OwnershipInterval: Sendable, Hashable {
    /// What started or ended an interval.
    public enum Cause: String, Sendable, Hashable, CaseIterable {
        case purchase, renewal, upgrade, expiry, gracePeriod, gracePeriodEnded, refund, familyRevoke
        /// An entry of the device's queue: it has no start of its own.
        case device
    }

    /// The first instant; nil for an entry of the device's queue.
    public var from: Timestamp?
    public var fromCause: Cause
    /// The first instant after it; nil while it lasts.
    public var until: Timestamp?
    public var untilCause: Cause?
    public var transaction: String?
    /// For an auto-renewable subscription: `active` or `gracePeriod`.
    public var status: SubscriptionStatus.Status?
}

extension Timestamp {
    /// One nanosecond earlier (the earliest instant stays itself).
    var justBefore: Timestamp {
        guard self > .earliest else { return self }
        return nanoseconds > 0
            ? Timestamp(seconds: seconds, nanoseconds: nanoseconds - 1)
            : Timestamp(seconds: seconds - 1, nanoseconds: 999_999_999)
    }
}

extension AccountView {
    /// Every product's intervals, by product bytes. Answers change only at `instants`, so the
    /// grants just before the first and at each of them are the whole story: found in one pass
    /// over the instants (`GrantSweep`), not judged again for each.
    func timeline() -> [ProductTimeline] {
        timeline(checkingEvery: {})
    }

    /// The same, calling `check` every thousand instants: what it throws stops the sweep (a
    /// cancelled task's read, whose client left, frees its slot).
    func timeline<Failure: Error>(checkingEvery check: () throws(Failure) -> Void) throws(Failure) -> [ProductTimeline] {
        let instants = self.instants
        var sweep = GrantSweep(view: self)
        let groupsByName = Dictionary(groups.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        let upgradesByGroup = groupsByName.mapValues { Set($0.upgradedAt.compactMap { $0 }) }
        let causes = Causes(view: self, groups: groupsByName, upgrades: upgradesByGroup)

        var open: [UTF8Key: (interval: OwnershipInterval, grant: Grant)] = [:]
        var closed: [UTF8Key: [OwnershipInterval]] = [:]
        func sample(_ instant: Timestamp?, _ grants: [UTF8Key: Grant], inForce: [String: Int]) {
            for product in Set(open.keys).union(grants.keys) {
                let previous = open[product]
                let current = grants[product]
                if let previous, let current, current.continues(previous.grant) { continue }
                if let previous, let instant {
                    var interval = previous.interval
                    interval.until = instant
                    interval.untilCause = causes.end(of: previous.grant, next: current, at: instant, inForce: inForce)
                    closed[product, default: []].append(interval)
                    open[product] = nil
                }
                if let current {
                    let cause = instant.map { causes.start(of: current, previous: previous?.grant, at: $0) } ?? .device
                    open[product] = (OwnershipInterval(
                        from: instant, fromCause: cause, transaction: current.transaction, status: current.status), current)
                }
            }
        }
        let first = sweep.grants(at: instants.first?.justBefore ?? .earliest)
        sample(nil, first.grants, inForce: first.inForce)
        for (index, instant) in instants.enumerated() {
            if index & 1023 == 1023 { try check() }
            let at = sweep.grants(at: instant)
            sample(instant, at.grants, inForce: at.inForce)
        }
        for (product, last) in open { closed[product, default: []].append(last.interval) }
        return closed.keys.sorted().map { ProductTimeline(product: $0.string, intervals: closed[$0]!) }
    }

    /// What started and ended an interval, from the view and, for a subscription group, its
    /// transaction in force at the instant (the sweep's).
    private struct Causes {
        let view: AccountView
        let groups: [String: SubscriptionGroup]
        /// Each group's instants where an upgrade took effect.
        let upgrades: [String: Set<Timestamp>]

        func start(of grant: Grant, previous: Grant?, at instant: Timestamp) -> OwnershipInterval.Cause {
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

        func end(of grant: Grant, next: Grant?, at instant: Timestamp, inForce: [String: Int]) -> OwnershipInterval.Cause {
            if let next, sameBytes(next.transaction, grant.transaction), grant.status == .active, next.status == .gracePeriod {
                return .gracePeriod
            }
            if let record = grant.record, record.fact.revokedAt == instant {
                return AccountView.revocationCause(record)
            }
            if grant.upgradedAt == instant { return .upgrade }
            if let next, next.record?.startsAt == instant { return start(of: next, previous: grant, at: instant) }
            if grant.status == .gracePeriod, grant.gracePeriodEndsAt == instant { return .gracePeriodEnded }
            if let record = grant.record, record.fact.expiresAt != instant, let group = groups[record.group],
               let index = inForce[group.name], !sameBytes(group.records[index].fact.transaction, record.fact.transaction) {
                // Another transaction of the group took over at this instant and grants nothing.
                let successor = group.records[index]
                if successor.fact.revokedAt.map({ $0 <= instant }) == true { return AccountView.revocationCause(successor) }
                if group.isUpgraded(index, by: instant) || wasUpgradedAway(in: group.name, at: instant) { return .upgrade }
                return successor.fact.originalTransaction.map { sameBytes($0, successor.fact.transaction) } == false ? .renewal : .purchase
            }
            return .expiry
        }

        private func wasUpgradedAway(in groupName: String, at instant: Timestamp) -> Bool {
            upgrades[groupName]?.contains(instant) ?? false
        }
    }

    static func revocationCause(_ record: StoreTransactionRecord) -> OwnershipInterval.Cause {
        record.fact.revocationType == .familyRevoke ? .familyRevoke : .refund
    }
}
