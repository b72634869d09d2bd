/// Apple's status of an auto-renewable subscription group, as the App Store Server API's
/// Get All Subscription Statuses reports it, computed from the store's reports in an account.
public struct SubscriptionStatus: Sendable, Hashable {
    /// Apple's numbers: 1 active, 2 expired, 3 in billing retry, 4 in the grace period, 5 revoked.
    public enum Status: Int, Sendable, Hashable, CaseIterable {
        case active = 1, expired, billingRetry, gracePeriod, revoked

        /// The user is served while the subscription is active or in its grace period.
        public var grantsAccess: Bool { self == .active || self == .gracePeriod }
    }

    /// The catalog's subscription group of the product, else Apple's, else the original transaction.
    public var group: String
    public var originalTransaction: String
    /// The transaction in force: the group's latest started one, not upgraded away from unless
    /// nothing else started (`SubscriptionGroup`).
    public var transaction: String
    /// The product in force.
    public var product: String
    public var status: Status
    public var expiresAt: Timestamp?
    public var gracePeriodEndsAt: Timestamp?
    public var willRenew: Bool?
    public var renewsTo: String?
    public var environment: StoreEnvironment?
}
