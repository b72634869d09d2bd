import CoreMetrics

/// What the writer reports after each commit, through swift-metrics: the factory of
/// `Ledger.Configuration.metricsFactory`, or the process's `MetricsSystem` (a no-op until the
/// application bootstraps one).
///
/// - `purchaseledger_events_total{outcome="appended"|"duplicate"|"rejected"}`
/// - `purchaseledger_rejections_total{code="<spec code>"}`
/// - `purchaseledger_commit_events`: events per write transaction (group commit's batch size)
/// - `purchaseledger_commit_requests`: submissions per write transaction
/// - `purchaseledger_commit_duration_seconds`: from the writer taking the batch to its durable commit
/// - `purchaseledger_commit_failures_total`: write transactions the storage failed
struct LedgerMetrics: Sendable {
    static let commitEventsLabel = "purchaseledger_commit_events"
    static let commitRequestsLabel = "purchaseledger_commit_requests"
    static let commitDurationLabel = "purchaseledger_commit_duration_seconds"

    private let appended: Counter
    private let duplicates: Counter
    private let rejected: Counter
    private let rejections: [LedgerError.Code: Counter]
    private let commitEvents: Recorder
    private let commitRequests: Recorder
    private let commitDuration: Timer
    private let commitFailures: Counter

    init(factory: any MetricsFactory) {
        let events = "purchaseledger_events_total"
        appended = Counter(label: events, dimensions: [("outcome", "appended")], factory: factory)
        duplicates = Counter(label: events, dimensions: [("outcome", "duplicate")], factory: factory)
        rejected = Counter(label: events, dimensions: [("outcome", "rejected")], factory: factory)
        // Every code up front, so that a scrape shows zeros instead of missing series.
        var rejections: [LedgerError.Code: Counter] = [:]
        for code in LedgerError.Code.allCases {
            rejections[code] = Counter(label: "purchaseledger_rejections_total", dimensions: [("code", code.rawValue)], factory: factory)
        }
        self.rejections = rejections
        commitEvents = Recorder(label: Self.commitEventsLabel, factory: factory)
        commitRequests = Recorder(label: Self.commitRequestsLabel, factory: factory)
        commitDuration = Timer(label: Self.commitDurationLabel, factory: factory)
        commitFailures = Counter(label: "purchaseledger_commit_failures_total", factory: factory)
    }

    /// One write transaction's results, reported once it is durable.
    func committed(_ results: [[AppendResult]], nanoseconds: Int64) {
        var appendedCount = 0, duplicateCount = 0, events = 0
        for request in results {
            events += request.count
            for result in request {
                switch result {
                case .success(.appended): appendedCount += 1
                case .success(.duplicate): duplicateCount += 1
                case .failure(let error):
                    rejected.increment()
                    rejections[error.code]?.increment()
                }
            }
        }
        if appendedCount > 0 { appended.increment(by: appendedCount) }
        if duplicateCount > 0 { duplicates.increment(by: duplicateCount) }
        commitEvents.record(events)
        commitRequests.record(results.count)
        commitDuration.recordNanoseconds(nanoseconds)
    }

    func commitFailed() {
        commitFailures.increment()
    }
}
