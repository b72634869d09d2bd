/// What one write transaction of the writer did, handed to `Ledger.Configuration.onCommit`
/// once it is durable (or once it failed): for metrics, without the library depending on a
/// metrics package. `PurchaseLedgerServer` turns these into Prometheus metrics.
public struct CommitReport: Sendable {
    /// Submissions (`append` calls) the transaction held: group commit's batch, in requests.
    public var requests: Int
    /// Events the transaction held, whatever their outcome.
    public var events: Int
    public var appended: Int
    public var duplicates: Int
    /// Rejected events, by the spec's code.
    public var rejections: [LedgerError.Code: Int]
    /// From the writer taking the batch to its commit being durable.
    public var duration: Duration
    /// Why the transaction failed (nothing of it was written), as the error describes itself;
    /// nil when it committed.
    public var failure: String?

    init(requests: Int, results: [[AppendResult]], duration: Duration) {
        self.requests = requests
        self.duration = duration
        var events = 0, appended = 0, duplicates = 0
        var rejections: [LedgerError.Code: Int] = [:]
        for request in results {
            events += request.count
            for result in request {
                switch result {
                case .success(.appended): appended += 1
                case .success(.duplicate): duplicates += 1
                case .failure(let error): rejections[error.code, default: 0] += 1
                }
            }
        }
        self.events = events
        self.appended = appended
        self.duplicates = duplicates
        self.rejections = rejections
    }

    init(failedRequests requests: [Int], failure: any Error, duration: Duration) {
        self.requests = requests.count
        self.events = requests.reduce(0, +)
        self.appended = 0
        self.duplicates = 0
        self.rejections = [:]
        self.duration = duration
        self.failure = "\(failure)"
    }
}
