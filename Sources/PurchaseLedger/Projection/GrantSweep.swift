/// A view's grants at each of a series of instants that never go back, in one pass: what
/// `AccountView.grants(at:)` answers at each, without judging the account's whole history again
/// for each instant. The timeline asks it at every instant where something takes effect, so an
/// account's timeline costs O(n log n) in its records, not O(n²).
///
/// Each kind of grant is a set of intervals, kept as time passes:
/// - an entry of the device's queue that may grant grants until its `expiresAt` (from the
///   start): per product, the first opened of those not expired yet;
/// - a report of a non-consumable or non-renewing product grants from its start until it
///   expires or its revocation takes effect: per product, of those started and not ended, the one
///   that starts latest (then the greater transaction id), from a heap;
/// - a subscription group's transaction in force: of its transactions started, the latest among
///   those not upgraded away from by then (else among those that were), from two heaps, the
///   transactions moving from the first to the second as their upgrades take effect.
struct GrantSweep {
    private let view: AccountView
    private var entries: [UTF8Key: EntryCandidates] = [:]
    private var reports: [UTF8Key: ReportCandidates] = [:]
    private var groups: [GroupCandidates]
    private var time = Timestamp.earliest

    init(view: AccountView) {
        self.view = view
        let reportedOn = view.unscoped.storeTransactions
        for entry in view.unscoped.entries.granting {
            if !reportedOn.isEmpty, let transaction = entry.transaction, reportedOn[UTF8Key(transaction)] != nil { continue }
            guard !view.isTransferredAway(entry) else { continue }
            if let transaction = entry.transaction, view.isRevokedByEvent(UTF8Key(transaction)) { continue }
            if let original = entry.originalTransaction, view.isRevokedByEvent(UTF8Key(original)) { continue }
            entries[UTF8Key(entry.product), default: EntryCandidates()].entries.append(entry)
        }
        var byProduct: [UTF8Key: [StoreTransactionRecord]] = [:]
        for record in view.state.storeTransactions.values where record.productType == .nonConsumable || record.productType == .nonRenewing {
            if view.isRevokedByEvent(UTF8Key(record.fact.transaction)) { continue }
            if let original = record.fact.originalTransaction, view.isRevokedByEvent(UTF8Key(original)) { continue }
            byProduct[UTF8Key(record.fact.product), default: []].append(record)
        }
        for (product, records) in byProduct { reports[product] = ReportCandidates(records: records) }
        groups = view.groups.map(GroupCandidates.init)
    }

    /// The grants at `time` (no earlier than the time asked before), by product, and each
    /// group's transaction in force then (by the group's name: its index in the group's records).
    mutating func grants(at time: Timestamp) -> (grants: [UTF8Key: AccountView.Grant], inForce: [String: Int]) {
        precondition(time >= self.time, "a sweep's instants never go back")
        self.time = time
        var grants: [UTF8Key: AccountView.Grant] = [:]
        for product in entries.keys {
            guard let entry = entries[product]!.first(at: time) else { continue }
            grants[product] = AccountView.Grant(
                kind: .entry(openedAt: entry.openedAt), transaction: entry.transaction, entryExpiresAt: entry.expiresAt)
        }
        for product in reports.keys {
            guard let record = reports[product]!.latest(at: time) else { continue }
            grants[product] = AccountView.Grant(kind: .report, transaction: record.fact.transaction, record: record)
        }
        var inForce: [String: Int] = [:]
        // In the groups' order (by name): of two groups granting a product, the later answers.
        for index in groups.indices {
            guard let found = groups[index].inForce(at: time) else { continue }
            let group = groups[index].group
            inForce[group.name] = found
            let record = group.records[found]
            let renewal = view.renewal(of: record)
            let status = group.status(of: found, at: time, revoked: view.isRevoked(record, at: time), renewal: renewal)
            guard status.grantsAccess else { continue }
            grants[UTF8Key(record.fact.product)] = AccountView.Grant(
                kind: .group(group.name), transaction: record.fact.transaction, status: status, record: record,
                upgradedAt: group.upgradedAt[found], gracePeriodEndsAt: status == .gracePeriod ? renewal?.gracePeriodEndsAt : nil)
        }
        return (grants, inForce)
    }

    /// One product's entries that may grant, the first opened first; each grants until it
    /// expires, so the first not expired grants.
    private struct EntryCandidates {
        var entries: [QueueEntry] = []
        var first = 0
        var sorted = false

        mutating func first(at time: Timestamp) -> QueueEntry? {
            if !sorted {
                entries.sort { $0.openedAt < $1.openedAt }
                sorted = true
            }
            while first < entries.count, let expiresAt = entries[first].expiresAt, expiresAt <= time { first += 1 }
            return first < entries.count ? entries[first] : nil
        }
    }

    /// One product's reports: started ones on a heap by start (then transaction id), ended
    /// ones dropped from its top as time passes their end.
    private struct ReportCandidates {
        let records: [StoreTransactionRecord]
        /// Indexes of `records` by start.
        let byStart: [Int]
        var next = 0
        var started: Heap<Int>

        init(records: [StoreTransactionRecord]) {
            self.records = records
            byStart = records.indices.sorted { records[$0].startsAt < records[$1].startsAt }
            started = Heap { AccountView.startsLater(records[$0], than: records[$1]) }
        }

        mutating func latest(at time: Timestamp) -> StoreTransactionRecord? {
            while next < byStart.count, records[byStart[next]].hasStarted(by: time) {
                started.push(byStart[next])
                next += 1
            }
            while let top = started.top, records[top].hasExpired(by: time) || records[top].isRevokedByStore(by: time) {
                started.pop()
            }
            return started.top.map { records[$0] }
        }
    }

    /// One group's transactions: those started, on two heaps by `SubscriptionGroup`'s order
    /// (start, then expiry, then transaction id), those not upgraded away from yet and those
    /// that were.
    private struct GroupCandidates {
        let group: SubscriptionGroup
        let byStart: [Int]
        /// Indexes of the upgraded transactions by when their upgrade took effect.
        let byUpgrade: [Int]
        var nextStart = 0
        var nextUpgrade = 0
        var upgraded: [Bool]
        var started: [Bool]
        var current: Heap<Int>
        var upgradedAway: Heap<Int>

        init(group: SubscriptionGroup) {
            self.group = group
            let records = group.records
            byStart = records.indices.sorted { records[$0].startsAt < records[$1].startsAt }
            byUpgrade = records.indices.filter { group.upgradedAt[$0] != nil }.sorted { group.upgradedAt[$0]! < group.upgradedAt[$1]! }
            upgraded = Array(repeating: false, count: records.count)
            started = Array(repeating: false, count: records.count)
            let later: @Sendable (Int, Int) -> Bool = { group.isLater($0, than: $1, ignoringUpgrades: true) }
            current = Heap(precedes: later)
            upgradedAway = Heap(precedes: later)
        }

        mutating func inForce(at time: Timestamp) -> Int? {
            while nextUpgrade < byUpgrade.count, let at = group.upgradedAt[byUpgrade[nextUpgrade]], at <= time {
                let index = byUpgrade[nextUpgrade]
                upgraded[index] = true
                if started[index] { upgradedAway.push(index) }
                nextUpgrade += 1
            }
            while nextStart < byStart.count, group.records[byStart[nextStart]].hasStarted(by: time) {
                let index = byStart[nextStart]
                started[index] = true
                if upgraded[index] { upgradedAway.push(index) } else { current.push(index) }
                nextStart += 1
            }
            while let top = current.top, upgraded[top] { current.pop() }
            return current.top ?? upgradedAway.top
        }
    }
}
