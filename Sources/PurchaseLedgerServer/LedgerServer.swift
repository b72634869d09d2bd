import AppStoreServerAPI
import Foundation
import Hummingbird
import HummingbirdCore
@_exported import PurchaseLedgerAppStore
import Logging
import NIOCore
import Prometheus
import PurchaseLedger
import PurchaseLedgerLocation
import ServiceLifecycle

/// Builds the `ledger-server` application from its configuration: opens the ledger, mounts
/// `LedgerRoutes`, and adds the `LedgerService` that closes the ledger after the server drains.
public enum LedgerServer {
    /// A Prometheus factory whose histograms fit the ledger: commit latencies from 100 µs, batch
    /// sizes in powers of two.
    public static func metricsFactory(registry: PrometheusCollectorRegistry) -> PrometheusMetricsFactory {
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.durationHistogramBuckets[LedgerMetrics.commitDurationLabel] = [
            .microseconds(100), .microseconds(250), .microseconds(500), .milliseconds(1), .milliseconds(2),
            .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
            .milliseconds(250), .seconds(1),
        ]
        let powersOfTwo = (0...12).map { Double(1 << $0) }
        factory.valueHistogramBuckets[LedgerMetrics.commitEventsLabel] = powersOfTwo
        factory.valueHistogramBuckets[LedgerMetrics.commitRequestsLabel] = powersOfTwo
        return factory
    }

    /// What the server logs when it starts serving: where the ledger is as `LedgerLocation`
    /// names it (a URL without its password), where it listens, and the App Store it takes.
    public static func startupMetadata(_ configuration: ServerConfiguration) -> Logger.Metadata {
        [
            "ledger": "\(LedgerLocation(configuration.ledger))", "address": "\(configuration.bind.host):\(configuration.bind.port)",
            "appStore": "\(configuration.appStore.map { "\($0.bundleId) \($0.acceptedEnvironments.map(\.rawValue).joined(separator: "+"))" } ?? "off")",
        ]
    }

    /// The application for `configuration`. The ledger is opened here (errors say why it
    /// cannot be) and closed by the application's service group on shutdown.
    public static func application(
        configuration: ServerConfiguration, logger: Logger,
        registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry(),
        ledgerConfiguration: Ledger.Configuration? = nil,
        onServerRunning: @escaping @Sendable (any Channel) async -> Void = { _ in }
    ) async throws -> some ApplicationProtocol {
        try configuration.check()
        let factory = metricsFactory(registry: registry)
        var ledgerConfiguration = ledgerConfiguration ?? Ledger.Configuration()
        ledgerConfiguration.logger = logger
        let metrics = LedgerMetrics(factory: factory)
        ledgerConfiguration.onCommit = { metrics.record($0) }
        ledgerConfiguration.snapshotInterval = configuration.snapshotEvery
        // The ledger's own background work (the proof tree's leaves) at the feed's priority.
        ledgerConfiguration.backgroundExecutor = (configuration.feedPriority ?? .background).executor
        let catalog = try configuration.catalog.map { try Catalog(contentsOfFile: $0) }
        let ledger = try LedgerLocation(configuration.ledger).openLedger(catalog: catalog, configuration: ledgerConfiguration)

        var notifications: AppStoreNotificationHandler?
        // One count of expensive reads for the whole server: every hub's catch-ups and the routes' timelines.
        let reads = ExpensiveReads(limit: configuration.limits.expensiveReads)
        let changeFeed = ChangeFeedHub(
            ledger: ledger, excluding: [], priority: configuration.feedPriority ?? .background, reads: reads,
            catchUpEvents: configuration.limits.feedCatchUpEvents, logger: logger)
        var services: [any Service] = [LedgerService(ledger: ledger), changeFeed]
        do {
            if let webhooks = try WebhookService.configured(
                by: configuration, ledger: ledger, changeFeed: changeFeed, metricsFactory: factory, logger: logger) {
                services.append(webhooks)
            }
            if let checkpoints = try CheckpointService.configured(by: configuration, ledger: ledger, logger: logger) {
                services.append(checkpoints)
            }
            notifications = try AppStoreNotificationHandler.configured(by: configuration, ledger: ledger)
            if let notifications {
                services.append(ForgetService(ledger: ledger, unattributed: notifications.unattributed, logger: logger))
            }
            // One client per environment (its host, one token cache) for the refund answers and the schedule.
            let clients = try await AppStoreServerAPIClient.configured(by: configuration, logger: logger)
            if !clients.isEmpty {
                if let settings = configuration.appStore?.consumption {
                    notifications?.consumption = ConsumptionResponder(clients: clients, policy: .init(settings), ledger: ledger)
                }
                if let notifications, let schedule = ReconciliationService.configured(
                    by: configuration, clients: clients, verifier: notifications.verifier, ledger: ledger, logger: logger) {
                    services.append(schedule)
                }
                if let notifications, let calls = AppStoreCallService.configured(
                    by: configuration, clients: clients, verifier: notifications.verifier, ledger: ledger, logger: logger) {
                    services.append(calls)
                }
            }
        } catch {
            await ledger.close()
            throw error
        }

        let router = Router(context: LedgerRequestContext.self)
        // Every request at debug (with its id); what handlers log carries the same id at any level.
        router.add(middleware: RequestLogMiddleware(.debug))
        router.addRoutes(LedgerRoutes<LedgerRequestContext>(
            ledger: ledger, keys: APIKeys(configuration.keys), limits: configuration.limits,
            notifications: notifications, restores: configuration.restoresAcrossAccounts,
            metricsRegistry: registry, changeFeed: changeFeed, metricsFactory: factory, dashboard: true
        ).collection)
        let limits = configuration.limits
        return Application(
            router: router,
            server: .http1(configuration: .init(
                additionalChannelHandlers: [RequestDeadlineHandler(timeout: ServerConfiguration.Limits.timeAmount(limits.requestTimeoutSeconds))],
                idleTimeout: ServerConfiguration.Limits.timeAmount(limits.idleTimeoutSeconds))),
            configuration: .init(
                address: .hostname(configuration.bind.host, port: configuration.bind.port), serverName: "ledger-server",
                availableConnectionsDelegate: MaximumAvailableConnections(limits.maxConnections, logger: logger)),
            services: services,
            onServerRunning: onServerRunning,
            logger: logger)
    }
}
