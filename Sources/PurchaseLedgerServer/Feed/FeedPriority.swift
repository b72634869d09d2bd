import NIOPosix
import PurchaseLedger

/// How the server schedules its change feed's derivation and webhook delivery
/// (`feedPriority` in its configuration).
public enum FeedPriority: String, Codable, Sendable {
    /// On threads of their own in Linux's idle class (`BackgroundExecutor`): a busy server
    /// lags its feed rather than its appends.
    case background
    /// On the threads that serve requests and appends.
    case normal

    /// Where its tasks run: nil, the global executor. The server gives it to its ledger as
    /// `Ledger.Configuration.backgroundExecutor`.
    public var executor: (any TaskExecutor)? {
        switch self {
        case .background: BackgroundExecutor.shared
        case .normal: nil
        }
    }

    /// Where the webhook client's connections run.
    var eventLoopGroup: MultiThreadedEventLoopGroup {
        switch self {
        case .background: BackgroundExecutor.eventLoopGroup
        case .normal: .singleton
        }
    }
}
