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
    /// The records' indices from the earliest to the latest by start, expiry and transaction
    /// id (`isLater(_:than:ignoringUpgrades:)`), and their starts in that order: the one in
    /// force at an instant is found by a binary search, not a pass over every renewal.
    private let byOrder: [Int]
    private let starts: [Timestamp]

    init(name: String, records: [StoreTransactionRecord]) {
        self.name = name
        self.records = records
        // Ordered once: for the replacement of each upgraded transaction, and for the one in
        // force at any instant (a log of renewals has many transactions).
        var byOrder = Array(records.indices)
        byOrder.sort { Self.isLater(records[$1], than: records[$0]) }
        let starts = byOrder.map { records[$0].startsAt }
        self.byOrder = byOrder
        self.starts = starts
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

    /// The index of the transaction in force at `time`: of those started by then, the latest
    /// by start, expiry (an absent one is earliest) and transaction id bytes not upgraded away
    /// from by then; when every one is, the latest. A total order, so ties never depend on
    /// arrival. O(log n), and a step back per upgraded transaction passed.
    func inForce(at time: Timestamp) -> Int? {
        // How many have started by `time`: the starts are in order.
        var (low, high) = (0, starts.count)
        while low < high {
            let middle = (low + high) / 2
            if starts[middle] <= time { low = middle + 1 } else { high = middle }
        }
        guard low > 0 else { return nil }
        for position in stride(from: low - 1, through: 0, by: -1) where !isUpgraded(byOrder[position], by: time) {
            return byOrder[position]
        }
        return byOrder[low - 1]
    }

    /// The same order without the upgrades: by start, expiry and transaction id bytes.
    func isLater(_ index: Int, than other: Int, ignoringUpgrades: Bool) -> Bool {
        Self.isLater(records[index], than: records[other])
    }

    private static func isLater(_ record: StoreTransactionRecord, than otherRecord: StoreTransactionRecord) -> Bool {
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
