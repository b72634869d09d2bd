/// A store report that belongs to one of Apple's environments.
protocol EnvironmentReport: SignedReport {
    /// The report's environment; Production when Apple's payload named none (FORMAT.md,
    /// "Environments").
    var environment: StoreEnvironment { get }
}

extension StoreTransactionRecord: EnvironmentReport {
    var environment: StoreEnvironment { fact.environment ?? .production }
}

extension RenewalRecord: EnvironmentReport {
    var environment: StoreEnvironment { info.environment ?? .production }
}

/// What a new report about one id (a transaction, an original transaction) changes: the report
/// in force over every environment, and, once reports of two environments arrived, the latest
/// report of each, so that a view of some environments picks among its own.
///
/// Kept as two values, each replaced whole, because the writer's session layers changes over
/// a stored state: a change never merges with what it replaces.
struct ReportsUpdate<Report: EnvironmentReport> {
    /// The report in force over every environment, when it changed.
    var inForce: Report?
    /// The latest report of each environment (in `StoreEnvironment.allCases` order), when it
    /// changed; only ever set once two environments reported.
    var byEnvironment: [Report]?

    var changesNothing: Bool { inForce == nil && byEnvironment == nil }

    init(adding new: Report, current: Report?, byEnvironment currentByEnvironment: [Report]) {
        guard let current else {
            inForce = new
            return
        }
        if currentByEnvironment.isEmpty, current.environment == new.environment {
            inForce = new.supersedes(current) ? new : nil
            return
        }
        var reports = currentByEnvironment.isEmpty ? [current] : currentByEnvironment
        if let index = reports.firstIndex(where: { $0.environment == new.environment }) {
            guard new.supersedes(reports[index]) else { return }
            reports[index] = new
        } else {
            reports.append(new)
            reports.sort { Self.order($0.environment) < Self.order($1.environment) }
        }
        byEnvironment = reports
        let latest = Self.latest(of: reports)!
        if latest.eventID != current.eventID { inForce = latest }
    }

    /// The report Apple signed last among `reports`.
    static func latest(of reports: some Sequence<Report>) -> Report? {
        reports.reduce(nil) { latest, report in
            guard let latest else { return report }
            return report.supersedes(latest) ? report : latest
        }
    }

    private static func order(_ environment: StoreEnvironment) -> Int {
        StoreEnvironment.allCases.firstIndex(of: environment) ?? 0
    }
}

extension AccountState {
    /// The report in force about `transaction` among the environments not in `excluded`.
    func storeTransaction(_ transaction: UTF8Key, excluding excluded: Set<StoreEnvironment>) -> StoreTransactionRecord? {
        guard let record = storeTransactions[transaction] else { return nil }
        if excluded.isEmpty { return record }
        guard let reports = environmentReports[transaction] else {
            return excluded.contains(record.environment) ? nil : record
        }
        return ReportsUpdate.latest(of: reports.lazy.filter { !excluded.contains($0.environment) })
    }

    /// The renewal info in force about `originalTransaction` among the environments not in
    /// `excluded`.
    func renewal(_ originalTransaction: UTF8Key, excluding excluded: Set<StoreEnvironment>) -> RenewalRecord? {
        guard let record = renewals[originalTransaction] else { return nil }
        if excluded.isEmpty { return record }
        guard let reports = environmentRenewals[originalTransaction] else {
            return excluded.contains(record.environment) ? nil : record
        }
        return ReportsUpdate.latest(of: reports.lazy.filter { !excluded.contains($0.environment) })
    }

    /// The state as a view of the environments not in `excluded` sees it: the reports in force
    /// among theirs, and no per-environment lists.
    func scoped(excluding excluded: Set<StoreEnvironment>) -> AccountState {
        guard !excluded.isEmpty else { return self }
        var scoped = self
        scoped.storeTransactions = [:]
        scoped.renewals = [:]
        scoped.environmentReports = [:]
        scoped.environmentRenewals = [:]
        for key in storeTransactions.keys {
            scoped.storeTransactions[key] = storeTransaction(key, excluding: excluded)
        }
        for key in renewals.keys {
            scoped.renewals[key] = renewal(key, excluding: excluded)
        }
        return scoped
    }
}
