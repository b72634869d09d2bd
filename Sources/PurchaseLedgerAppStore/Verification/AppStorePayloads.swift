import Foundation

/// The decoded payload of an App Store Server Notification V2 (`responseBodyV2DecodedPayload`):
/// the fields the ledger uses; others are ignored.
public struct AppStoreNotificationPayload: Decodable, Sendable, Hashable {
    public var notificationType: String
    public var subtype: String?
    /// Unique per notification, kept across Apple's retries: the ledger event id.
    public var notificationUUID: String
    public var version: String?
    /// Milliseconds since 1970 (Apple's JSON number; fractional in Xcode's data).
    public var signedDate: Double?
    public var data: NotificationData?
    public var summary: AppIdentity?
    public var externalPurchaseToken: ExternalPurchaseToken?
    /// The app of a `RESCIND_CONSENT` notification, which carries no `data`.
    public var appData: AppData?

    public struct NotificationData: Decodable, Sendable, Hashable {
        public var environment: String?
        public var appAppleId: Int64?
        public var bundleId: String?
        public var bundleVersion: String?
        public var signedTransactionInfo: String?
        public var signedRenewalInfo: String?
        public var status: Int?
        /// CONSUMPTION_REQUEST: why the customer asked for a refund.
        public var consumptionRequestReason: String?
    }

    /// `summary` (for SUMMARY notifications) names the app the same way `data` does.
    public struct AppIdentity: Decodable, Sendable, Hashable {
        public var environment: String?
        public var appAppleId: Int64?
        public var bundleId: String?
    }

    /// `appData`: the app, and its signed app transaction.
    public struct AppData: Decodable, Sendable, Hashable {
        public var environment: String?
        public var appAppleId: Int64?
        public var bundleId: String?
        public var signedAppTransactionInfo: String?
    }

    public struct ExternalPurchaseToken: Decodable, Sendable, Hashable {
        public var externalPurchaseId: String?
        public var appAppleId: Int64?
        public var bundleId: String?
    }

    /// The app and environment the notification is about, found as Apple's library finds them:
    /// in `data`, else `summary`, else `externalPurchaseToken` (whose environment is Sandbox
    /// when its id starts with "SANDBOX"), else `appData`.
    var identity: (bundleId: String?, appAppleId: Int64?, environment: String?) {
        if let data { return (data.bundleId, data.appAppleId, data.environment) }
        if let summary { return (summary.bundleId, summary.appAppleId, summary.environment) }
        if let token = externalPurchaseToken {
            let environment = token.externalPurchaseId?.hasPrefix("SANDBOX") == true ? "Sandbox" : "Production"
            return (token.bundleId, token.appAppleId, environment)
        }
        if let appData { return (appData.bundleId, appData.appAppleId, appData.environment) }
        return (nil, nil, nil)
    }
}

/// The decoded `signedTransactionInfo` (`JWSTransactionDecodedPayload`): the fields the ledger
/// uses.
public struct AppStoreTransactionPayload: Decodable, Sendable, Hashable {
    public var transactionId: String?
    public var originalTransactionId: String?
    public var bundleId: String?
    public var productId: String?
    /// Milliseconds since 1970.
    public var purchaseDate: Double?
    public var expiresDate: Double?
    public var quantity: Int?
    /// "Auto-Renewable Subscription", "Non-Consumable", "Consumable", "Non-Renewing Subscription".
    public var type: String?
    /// The UUID the app passed to StoreKit with the purchase: the ledger's account.
    public var appAccountToken: String?
    /// 0: refunded for another reason, 1: for an issue in the app.
    public var revocationReason: Int?
    public var revocationDate: Double?
    /// "REFUND_FULL", "REFUND_PRORATED", "FAMILY_REVOKE".
    public var revocationType: String?
    /// Thousandths of a percent refunded.
    public var revocationPercentage: Int?
    public var isUpgraded: Bool?
    public var subscriptionGroupIdentifier: String?
    /// "PURCHASED" or "FAMILY_SHARED".
    public var inAppOwnershipType: String?
    public var storefront: String?
    /// Milliunits of `currency`.
    public var price: Int64?
    public var currency: String?
    public var environment: String?
    public var signedDate: Double?

    // Apple's additions of API 1.15–1.21. A value of a type Apple's documentation does not
    // give is left out, not a reason to refuse the payload: the rest still counts.
    @Lenient public var originalPurchaseDate: Double?
    @Lenient public var webOrderLineItemId: String?
    @Lenient public var storefrontId: String?
    /// "PURCHASE" or "RENEWAL".
    @Lenient public var transactionReason: String?
    /// 1 introductory, 2 promotional, 3 offer code, 4 win-back.
    @Lenient public var offerType: Int?
    @Lenient public var offerIdentifier: String?
    @Lenient public var offerDiscountType: String?
    @Lenient public var offerPeriod: String?
    @Lenient public var appTransactionId: String?
    @Lenient public var billingPlanType: String?
    @Lenient public var commitmentInfo: Commitment?

    /// `TransactionCommitmentInfo`.
    public struct Commitment: Decodable, Sendable, Hashable {
        @Lenient public var billingPeriodNumber: Int?
        @Lenient public var totalBillingPeriods: Int?
        @Lenient public var commitmentExpiresDate: Double?
        @Lenient public var commitmentPrice: Int64?
    }
}

/// The decoded `signedRenewalInfo` (`JWSRenewalInfoDecodedPayload`): the fields the ledger uses.
public struct AppStoreRenewalPayload: Decodable, Sendable, Hashable {
    public var originalTransactionId: String?
    public var productId: String?
    public var autoRenewProductId: String?
    /// 1: will renew, 0: will not.
    public var autoRenewStatus: Int?
    public var isInBillingRetryPeriod: Bool?
    public var gracePeriodExpiresDate: Double?
    public var expirationIntent: Int?
    public var appAccountToken: String?
    public var environment: String?
    public var signedDate: Double?

    // Apple's additions of API 1.15–1.21, read as `AppStoreTransactionPayload`'s.
    @Lenient public var renewalPrice: Int64?
    @Lenient public var currency: String?
    @Lenient public var renewalDate: Double?
    @Lenient public var recentSubscriptionStartDate: Double?
    @Lenient public var priceIncreaseStatus: Int?
    @Lenient public var offerType: Int?
    @Lenient public var offerIdentifier: String?
    @Lenient public var offerDiscountType: String?
    @Lenient public var offerPeriod: String?
    @Lenient public var eligibleWinBackOfferIds: [String]?
    @Lenient public var appTransactionId: String?
    @Lenient public var renewalBillingPlanType: String?
    @Lenient public var commitmentInfo: Commitment?

    /// `RenewalCommitmentInfo`.
    public struct Commitment: Decodable, Sendable, Hashable {
        @Lenient public var commitmentAutoRenewProductId: String?
        /// 1: will renew.
        @Lenient public var commitmentAutoRenewStatus: Int?
        @Lenient public var commitmentRenewalBillingPlanType: String?
        @Lenient public var commitmentRenewalDate: Double?
        @Lenient public var commitmentRenewalPrice: Int64?
    }
}

/// A field read if it has the type Apple documents, and left out (nil) otherwise, rather than
/// failing the whole payload: for the fields Apple added lately, whose types could still change.
@propertyWrapper
public struct Lenient<Value: Decodable & Sendable & Hashable>: Decodable, Sendable, Hashable {
    public var wrappedValue: Value?

    public init(wrappedValue: Value?) {
        self.wrappedValue = wrappedValue
    }

    public init(from decoder: any Decoder) throws {
        wrappedValue = try? decoder.singleValueContainer().decode(Value.self)
    }
}

extension KeyedDecodingContainer {
    /// An absent key is nil, as for a plain optional.
    func decode<Value>(_ type: Lenient<Value>.Type, forKey key: Key) throws -> Lenient<Value> {
        try decodeIfPresent(type, forKey: key) ?? Lenient(wrappedValue: nil)
    }
}

/// The decoded `signedAppTransactionInfo` (StoreKit's `AppTransaction`): the fields the ledger
/// keeps. Apple's library checks its chain at `receiptCreationDate` and reads its environment
/// from `receiptType`.
public struct AppStoreAppTransactionPayload: Decodable, Sendable, Hashable {
    public var receiptType: String?
    public var appAppleId: Int64?
    public var bundleId: String?
    @Lenient public var applicationVersion: String?
    /// Milliseconds since 1970.
    public var receiptCreationDate: Double?
    @Lenient public var originalPurchaseDate: Double?
    @Lenient public var originalApplicationVersion: String?
    @Lenient public var preorderDate: Double?
    @Lenient public var appTransactionId: String?
    @Lenient public var originalPlatform: String?
}

/// What carries a `signedDate`, the time a chain is checked at, and names its environment.
protocol AppStoreSignedPayload: Decodable {
    var signedDate: Double? { get }
    /// The environment the payload says it is from (not yet verified).
    var claimedEnvironment: String? { get }
}

extension AppStoreNotificationPayload: AppStoreSignedPayload {
    var claimedEnvironment: String? { identity.environment }
}

extension AppStoreTransactionPayload: AppStoreSignedPayload {
    var claimedEnvironment: String? { environment }
}

extension AppStoreRenewalPayload: AppStoreSignedPayload {
    var claimedEnvironment: String? { environment }
}

extension AppStoreAppTransactionPayload: AppStoreSignedPayload {
    var signedDate: Double? { receiptCreationDate }
    var claimedEnvironment: String? { receiptType }
}

extension AppStoreTransactionPayload {
    /// Whether StoreKit restores it, by Apple's `type`: not a consumable or a non-renewing
    /// subscription (the ledger's rules check the catalog's type again).
    var isRestorable: Bool {
        type != "Consumable" && type != "Non-Renewing Subscription"
    }
}
