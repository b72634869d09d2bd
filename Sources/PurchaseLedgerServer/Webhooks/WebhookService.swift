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
    let client: HTTPClient
    let logger: Logger

    /// Nil without webhooks in the configuration. Each endpoint's metrics go to `metricsFactory`
    /// (the one `GET /metrics` renders).
    public static func configured(
        by configuration: ServerConfiguration, ledger: Ledger, metricsFactory: any MetricsFactory, logger: Logger
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
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: clientConfiguration)
        do {
            let dispatchers = try endpoints.map {
                try WebhookDispatcher(
                    endpoint: $0, ledger: ledger, client: client, timing: timing, metricsFactory: metricsFactory, logger: logger)
            }
            return WebhookService(dispatchers: dispatchers, client: client, logger: logger)
        } catch {
            try? client.syncShutdown()
            throw error
        }
    }

    public func run() async throws {
        do {
            try await cancelWhenGracefulShutdown {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for dispatcher in dispatchers {
                        group.addTask { try await dispatcher.run() }
                    }
                    try await group.waitForAll()
                }
            }
        } catch is CancellationError {
        } catch {
            logger.error("webhook delivery stopped", metadata: ["error": "\(error)"])
        }
        try? await client.shutdown()
    }
}
