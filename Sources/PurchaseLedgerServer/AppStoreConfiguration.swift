import Logging
import AppStoreServerAPI
import PurchaseLedger
import PurchaseLedgerAppStore
import PurchaseLedgerLocation

extension ServerConfiguration.AppStore {
    /// The environments taken, in order: `environments`, else `environment`.
    public var acceptedEnvironments: [AppStoreEnvironment] {
        environments ?? environment.map { [$0] } ?? []
    }

    /// What verification needs of this section.
    var verification: AppStoreVerificationSettings {
        AppStoreVerificationSettings(
            bundleId: bundleId, appAppleId: appAppleId, environments: acceptedEnvironments, trustedRoots: trustedRoots,
            unattributedNotifications: unattributedNotifications)
    }
}

extension AppStoreNotificationHandler {
    /// The handler the configuration's `appStore` section describes; nil without one. Throws
    /// when a trusted root cannot be read.
    public static func configured(by configuration: ServerConfiguration, ledger: Ledger) throws -> AppStoreNotificationHandler? {
        guard let appStore = configuration.appStore else { return nil }
        return try configured(by: appStore.verification, ledgerDirectory: LedgerLocation(configuration.ledger).directory, ledger: ledger)
    }
}

extension ConsumptionResponder.Policy {
    /// The policy `appStore.consumption` states (checked by `ServerConfiguration.check`).
    init(_ settings: ServerConfiguration.Consumption) {
        self.init(
            sampleContentProvided: settings.sampleContentProvided ?? false,
            refundPreference: settings.refundPreference.flatMap(ConsumptionInformation.RefundPreference.init(rawValue:)))
    }
}
