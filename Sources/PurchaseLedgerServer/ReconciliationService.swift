import AppStoreServerAPI
import Foundation
import Logging
import PurchaseLedger
import PurchaseLedgerAppStore
import ServiceLifecycle

/// `ledger reconcile --apply --since <now − lookBack>` on a schedule, inside `ledger-server`:
/// every `interval`, the ledger is compared with Apple's histories and what it lacks is
/// appended. A run that fails is logged and the next one tries again; shutdown stops the loop
/// between runs (a run in progress ends first: its appends are the ledger's own, each durable).
public struct ReconciliationService: Service {
    public let reconciliation: Reconciliation
    public let interval: Duration
    /// How far back each run reads Apple's notification history: at least as long as the server
    /// may be down (Apple retries a notification for about three days).
    public let lookBack: Duration
    let logger: Logger

    public init(reconciliation: Reconciliation, interval: Duration, lookBack: Duration, logger: Logger) {
        self.reconciliation = reconciliation
        self.interval = interval
        self.lookBack = lookBack
        self.logger = logger
    }

    /// The schedule `appStore.reconcile` describes, calling Apple in each environment with its
    /// client (those `appStore.api` describes); nil without a schedule.
    public static func configured(
        by configuration: ServerConfiguration, clients: [(environment: StoreEnvironment, client: AppStoreServerAPIClient)],
        verifier: AppStoreSignedDataVerifier, ledger: Ledger, logger: Logger
    ) -> ReconciliationService? {
        guard let settings = configuration.appStore?.reconcile else { return nil }
        let sides = clients.map { Reconciliation.Side(environment: $0.environment, client: $0.client, verifier: verifier) }
        var reconciliation = Reconciliation(sides: sides, ledger: ledger, logger: logger)
        reconciliation.calls = AppStoreCallService.settings(configuration.appStore?.calls)
        return ReconciliationService(
            reconciliation: reconciliation,
            interval: .seconds(settings.everySeconds ?? 3600), lookBack: .seconds(settings.lookBackSeconds ?? 259_200), logger: logger)
    }

    public func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                await runOnce()
                try? await Task.sleep(for: interval)
            }
        }
    }

    /// One reconciliation, applied; what it found and did is logged.
    @discardableResult
    public func runOnce() async -> Reconciliation.Report? {
        let since = Int64(Date().timeIntervalSince1970 * 1000) - lookBack.components.seconds * 1000
        do {
            let report = try await reconciliation.run(apply: true, since: since)
            let metadata: Logger.Metadata = [
                "originalTransactions": "\(report.originalTransactions)", "differences": "\(report.differences.count)",
                "appended": "\(report.appended)", "failures": "\(report.failures.count)",
            ]
            if report.differences.isEmpty, report.failures.isEmpty {
                logger.info("reconciled with the App Store: the ledger agrees", metadata: metadata)
            } else {
                logger.warning("reconciled with the App Store: differences mended", metadata: metadata)
                for difference in report.differences.prefix(100) {
                    logger.notice("difference", metadata: ["difference": .string(difference.json)])
                }
            }
            return report
        } catch {
            logger.error("reconciliation with the App Store failed; the next run tries again", metadata: ["error": "\(error)"])
            return nil
        }
    }
}

extension AppStoreServerAPIClient {
    /// The clients `appStore.api` describes, one per signed environment the server takes (in
    /// its order: Apple's production host for Production, the sandbox host for Sandbox), shared
    /// by reconciliation and refund answers; none without `api`. Throws when the key cannot be
    /// read: a server that was asked to call Apple does not start without.
    static func configured(
        by configuration: ServerConfiguration, logger: Logger
    ) async throws -> [(environment: StoreEnvironment, client: AppStoreServerAPIClient)] {
        guard let appStore = configuration.appStore, let api = appStore.api else { return [] }
        let pem: String
        do {
            pem = try String(contentsOfFile: api.keyFile, encoding: .utf8)
        } catch {
            throw ServerConfigurationError("\"appStore.api.keyFile\": cannot read \(api.keyFile)")
        }
        let credentials = AppStoreServerAPICredentials(
            privateKeyPEM: pem, keyID: api.keyId, issuerID: api.issuerId, bundleID: appStore.bundleId)
        var clients: [(environment: StoreEnvironment, client: AppStoreServerAPIClient)] = []
        for environment in appStore.acceptedEnvironments where environment.isSigned {
            let host: AppStoreServerAPIEnvironment = api.apiBase.map { .custom(baseURL: $0) }
                ?? (environment == .production ? .production : .sandbox)
            clients.append((environment, try await AppStoreServerAPIClient(credentials: credentials, environment: host, logger: logger)))
        }
        return clients
    }
}
