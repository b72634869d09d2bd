import CoreMetrics
import PurchaseLedger

/// The ledger's commits as swift-metrics metrics (`Ledger.Configuration.onCommit`):
///
/// - `purchaseledger_events_total{outcome="appended"|"duplicate"|"rejected"}`
/// - `purchaseledger_rejections_total{code="<spec code>"}`
/// - `purchaseledger_commit_events`: events per write transaction (group commit's batch size)
/// - `purchaseledger_commit_requests`: submissions per write transaction
/// - `purchaseledger_commit_duration_seconds`: from the writer taking the batch to its durable commit
/// - `purchaseledger_commit_failures_total`: write transactions the storage failed
public struct LedgerMetrics: Sendable {
    static let commitEventsLabel = "purchaseledger_commit_events"
    static let commitRequestsLabel = "purchaseledger_commit_requests"
    static let commitDurationLabel = "purchaseledger_commit_duration_seconds"

    private let appended: CoreMetrics.Counter
    private let duplicates: CoreMetrics.Counter
    private let rejected: CoreMetrics.Counter
    private let rejections: [LedgerError.Code: CoreMetrics.Counter]
    private let commitEvents: Recorder
    private let commitRequests: Recorder
    private let commitDuration: CoreMetrics.Timer
    private let commitFailures: CoreMetrics.Counter

    public init(factory: any MetricsFactory = MetricsSystem.factory) {
        let events = "purchaseledger_events_total"
        appended = CoreMetrics.Counter(label: events, dimensions: [("outcome", "appended")], factory: factory)
        duplicates = CoreMetrics.Counter(label: events, dimensions: [("outcome", "duplicate")], factory: factory)
        rejected = CoreMetrics.Counter(label: events, dimensions: [("outcome", "rejected")], factory: factory)
        // Every code up front, so that a scrape shows zeros instead of missing series.
        var rejections: [LedgerError.Code: CoreMetrics.Counter] = [:]
        for code in LedgerError.Code.allCases {
            rejections[code] = CoreMetrics.Counter(label: "purchaseledger_rejections_total", dimensions: [("code", code.rawValue)], factory: factory)
        }
        self.rejections = rejections
        commitEvents = Recorder(label: Self.commitEventsLabel, factory: factory)
        commitRequests = Recorder(label: Self.commitRequestsLabel, factory: factory)
        commitDuration = CoreMetrics.Timer(label: Self.commitDurationLabel, factory: factory)
        commitFailures = CoreMetrics.Counter(label: "purchaseledger_commit_failures_total", factory: factory)
    }

    /// For `Ledger.Configuration.onCommit`.
    public func record(_ report: CommitReport) {
        if report.failure != nil {
            commitFailures.increment()
            return
        }
        if report.appended > 0 { appended.increment(by: report.appended) }
        if report.duplicates > 0 { duplicates.increment(by: report.duplicates) }
        for (code, count) in report.rejections {
            rejected.increment(by: count)
            rejections[code]?.increment(by: count)
        }
        commitEvents.record(report.events)
        commitRequests.record(report.requests)
        let (seconds, attoseconds) = report.duration.components
        commitDuration.recordNanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}
