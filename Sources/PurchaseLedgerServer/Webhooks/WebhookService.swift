import AsyncHTTPClient
import CoreMetrics
import Logging
import NIOCore
import PurchaseLedger
import ServiceLifecycle

/// Runs the delivery of every configured webhook endpoint for the life of the server; stops
/// at graceful shutdown, before the ledger closes (progress is stored as deliveries are done,
/// so nothing is lost at any moment it stops).
public struct WebhookService: Service {
    let dispatchers: [WebhookDispatcher]
    let priority: FeedPriority
    /// The hubs of the endpoints' scopes that this service runs (not the server's own).
    let hubs: [ChangeFeedHub]
    let client: HTTPClient
    let logger: Logger

    /// Nil without webhooks in the configuration. Each endpoint's metrics go to `metricsFactory`
    /// (the one `GET /metrics` renders). The endpoints of one scope read one derivation of the
    /// feed: `changeFeed` (which the server runs) for the unscoped ones when given, else a hub
    /// per scope that this service runs.
    public static func configured(
        by configuration: ServerConfiguration, ledger: Ledger, changeFeed: ChangeFeedHub? = nil,
        metricsFactory: any MetricsFactory, logger: Logger
    ) throws -> WebhookService? {
        guard let endpoints = configuration.webhooks, !endpoints.isEmpty else { return nil }
        let timing = WebhookDispatcher.Timing(
            firstRetry: .milliseconds(Int64((configuration.webhookFirstRetrySeconds ?? 2) * 1000)),
            attemptTimeout: .milliseconds(Int64((configuration.webhookTimeoutSeconds ?? 10) * 1000)),
            leaseSeconds: Int64(configuration.webhookLeaseSeconds ?? 30))
        var clientConfiguration = HTTPClient.Configuration()
        // A redirect is not followed: the endpoint configured is the one that gets the data.
        clientConfiguration.redirectConfiguration = .disallow
        clientConfiguration.timeout = .init(connect: .seconds(5), read: timing.attemptTimeout)
        let priority = configuration.feedPriority ?? .background
        let client = HTTPClient(eventLoopGroupProvider: .shared(priority.eventLoopGroup), configuration: clientConfiguration)
        do {
            var hubs: [Set<StoreEnvironment>: ChangeFeedHub] = [:]
            if let changeFeed { hubs[changeFeed.excluded] = changeFeed }
            var ownHubs: [ChangeFeedHub] = []
            let dispatchers = try endpoints.map { endpoint in
                let hub = hubs[endpoint.excluded] ?? {
                    let hub = ChangeFeedHub(
                        ledger: ledger, excluding: endpoint.excluded, priority: priority, reads: changeFeed?.reads ?? ExpensiveReads(limit: 2),
                        catchUpEvents: configuration.limits.feedCatchUpEvents, logger: logger)
                    hubs[endpoint.excluded] = hub
                    ownHubs.append(hub)
                    return hub
                }()
                return try WebhookDispatcher(
                    endpoint: endpoint, ledger: ledger, hub: hub, client: client, timing: timing, metricsFactory: metricsFactory,
                    logger: logger)
            }
            return WebhookService(dispatchers: dispatchers, priority: priority, hubs: ownHubs, client: client, logger: logger)
        } catch {
            try? client.syncShutdown()
            throw error
        }
    }

    public func run() async throws {
        do {
            try await cancelWhenGracefulShutdown {
                // By default below the appends' priority (`FeedPriority`): a busy server lags
                // its webhooks rather than its writes.
                try await withTaskExecutorPreference(priority.executor) {
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        for hub in hubs {
                            group.addTask { try await hub.follow() }
                        }
                        for dispatcher in dispatchers {
                            group.addTask { try await dispatcher.run() }
                        }
                        try await group.waitForAll()
                    }
                }
            }
        } catch is CancellationError {
        } catch {
            logger.error("webhook delivery stopped", metadata: ["error": "\(error)"])
        }
        try? await client.shutdown()
    }
}
