/// The store's dates as valid time (FORMAT.md, "Valid time"): a report about a transaction
/// says when it started and when a revocation took effect, and an answer as of T reads them.
/// (The device's entries keep version 1's rules: `QueueEntry.entitles(at:isRevoked:)`.)
extension StoreTransactionRecord {
    /// When the transaction starts to count: Apple's purchase date, else when Apple signed
    /// the report.
    var startsAt: Timestamp { fact.purchasedAt ?? signedAt }

    func hasStarted(by time: Timestamp) -> Bool { startsAt <= time }

    /// Whether Apple's revocation (a refund, a family revoke) has taken effect by `time`.
    func isRevokedByStore(by time: Timestamp) -> Bool {
        fact.revokedAt.map { $0 <= time } ?? false
    }

    func hasExpired(by time: Timestamp) -> Bool {
        fact.expiresAt.map { $0 <= time } ?? false
    }
}

/// One subscription group's transactions, as a view sees them, with when each upgrade took
/// effect: which transaction is in force at any instant, and its status.
struct SubscriptionGroup {
    let name: String
    let records: [StoreTransactionRecord]
    /// For each record, when it stopped being in force by an upgrade (nil: not upgraded).
    let upgradedAt: [Timestamp?]

    init(name: String, records: [StoreTransactionRecord]) {
        self.name = name
        self.records = records
        // The starts in order, for the replacement of each upgraded transaction (a log of
        // renewals has many transactions: one pass, not one per transaction).
        let starts = records.map(\.startsAt).sorted()
        func firstIndex(where after: (Timestamp) -> Bool) -> Int {
            var (low, high) = (0, starts.count)
            while low < high {
                let middle = (low + high) / 2
                if after(starts[middle]) { high = middle } else { low = middle + 1 }
            }
            return low
        }
        upgradedAt = records.map { record in
            guard record.fact.upgraded == true else { return nil }
            // The transaction that replaced it starts no earlier than it: another that starts
            // at the same instant, else the next start after it. Without one known yet, the
            // upgrade took effect by the time Apple signed the report saying so.
            let from = firstIndex { $0 >= record.startsAt }
            let after = firstIndex { $0 > record.startsAt }
            let replacement = after - from >= 2 ? record.startsAt : (after < starts.count ? starts[after] : nil)
            return replacement ?? max(record.signedAt, record.startsAt)
        }
    }

    func isUpgraded(_ index: Int, by time: Timestamp) -> Bool {
        upgradedAt[index].map { $0 <= time } ?? false
    }

    /// The index of the transaction in force at `time`: the latest started by then (one
    /// upgraded away from only when nothing else started); nil before any started.
    func inForce(at time: Timestamp) -> Int? {
        var best: Int?
        for index in records.indices where records[index].hasStarted(by: time) {
            if let current = best, !isLater(index, than: current, at: time) { continue }
            best = index
        }
        return best
    }

    /// Upgraded-away-from first, then by start, expiry (an absent one is earliest) and
    /// transaction id bytes: a total order, so ties never depend on arrival.
    private func isLater(_ index: Int, than other: Int, at time: Timestamp) -> Bool {
        let (upgraded, otherUpgraded) = (isUpgraded(index, by: time), isUpgraded(other, by: time))
        if upgraded != otherUpgraded { return otherUpgraded }
        return isLater(index, than: other, ignoringUpgrades: true)
    }

    /// The same order without the upgrades: by start, expiry and transaction id bytes.
    func isLater(_ index: Int, than other: Int, ignoringUpgrades: Bool) -> Bool {
        let (record, otherRecord) = (records[index], records[other])
        if record.startsAt != otherRecord.startsAt { return record.startsAt > otherRecord.startsAt }
        let (expires, otherExpires) = (record.fact.expiresAt ?? .earliest, otherRecord.fact.expiresAt ?? .earliest)
        if expires != otherExpires { return expires > otherExpires }
        return otherRecord.fact.transaction.utf8.lexicographicallyPrecedes(record.fact.transaction.utf8)
    }

    /// Apple's status of the transaction at `index` at `time`, given whether it stands revoked
    /// then and the renewal info in force for its original transaction.
    func status(of index: Int, at time: Timestamp, revoked: Bool, renewal: RenewalInfo?) -> SubscriptionStatus.Status {
        let record = records[index]
        if revoked { return .revoked }
        if !isUpgraded(index, by: time), !record.hasExpired(by: time) { return .active }
        // Billing retry and grace apply to the transaction in force, upgraded or not.
        if renewal?.billingRetry == true {
            return renewal?.gracePeriodEndsAt.map { $0 > time } == true ? .gracePeriod : .billingRetry
        }
        return .expired
    }
}

extension SubscriptionGroup {
    /// The group ordered once for answers at many instants (the books' period boundaries):
    /// each then by a binary search, where `inForce(at:)` passes over every transaction. Not
    /// for one answer: ordering costs more than the pass.
    struct Ordered {
        let group: SubscriptionGroup
        /// The records' indices from the earliest to the latest by start, expiry and
        /// transaction id, and their starts in that order.
        private let byOrder: [Int]
        private let starts: [Timestamp]

        init(_ group: SubscriptionGroup) {
            self.group = group
            let records = group.records
            let keys = records.map { (start: $0.startsAt, expires: $0.fact.expiresAt ?? .earliest) }
            var byOrder = Array(records.indices)
            byOrder.sort { first, second in
                let (one, other) = (keys[first], keys[second])
                if one.start != other.start { return one.start < other.start }
                if one.expires != other.expires { return one.expires < other.expires }
                return group.isLater(second, than: first, ignoringUpgrades: true)
            }
            self.byOrder = byOrder
            starts = byOrder.map { keys[$0].start }
        }

        /// `group.inForce(at: time)`: of those started by then, the latest not upgraded away
        /// from by then; when every one is, the latest.
        func inForce(at time: Timestamp) -> Int? {
            var (low, high) = (0, starts.count)
            while low < high {
                let middle = (low + high) / 2
                if starts[middle] <= time { low = middle + 1 } else { high = middle }
            }
            guard low > 0 else { return nil }
            for position in stride(from: low - 1, through: 0, by: -1) where !group.isUpgraded(byOrder[position], by: time) {
                return byOrder[position]
            }
            return byOrder[low - 1]
        }
    }
}
