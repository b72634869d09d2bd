import AppStoreServerAPI
import Logging
import PurchaseLedger
import PurchaseLedgerAppStore
import ServiceLifecycle

/// The calls that close the loop with Apple (`AppStoreCaller`), made inside `ledger-server`
/// while it runs; shutdown stops them between calls (a call's answer is recorded first).
public struct AppStoreCallService: Service {
    public let caller: AppStoreCaller

    public init(caller: AppStoreCaller) {
        self.caller = caller
    }

    /// The caller `appStore.calls` describes, with the clients of `appStore.api`; nil without
    /// the section.
    public static func configured(
        by configuration: ServerConfiguration, clients: [(environment: StoreEnvironment, client: AppStoreServerAPIClient)],
        verifier: AppStoreSignedDataVerifier, ledger: Ledger, logger: Logger
    ) -> AppStoreCallService? {
        guard let settings = settings(configuration.appStore?.calls) else { return nil }
        return AppStoreCallService(caller: AppStoreCaller(settings: settings, clients: clients, verifier: verifier, ledger: ledger, logger: logger))
    }

    /// What `appStore.calls` asks for, with its defaults; nil without the section.
    static func settings(_ calls: ServerConfiguration.Calls?) -> AppStoreCallSettings? {
        calls.map {
            AppStoreCallSettings(
                setAppAccountTokens: $0.setAppAccountTokens ?? true, finishTransactions: $0.finishTransactions ?? false,
                readAppTransactions: $0.readAppTransactions ?? true)
        }
    }

    public func run() async throws {
        await cancelWhenGracefulShutdown {
            await caller.run()
        }
    }
}
