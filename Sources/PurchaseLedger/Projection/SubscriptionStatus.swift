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
    /// Apple's `billingPlanType` of the transaction in force: `BILLED_UPFRONT`, or `MONTHLY` for
    /// a plan paid monthly over a commitment.
    public var billingPlanType: String? = nil
    /// The commitment the transaction in force pays a period of, when Apple says it is one.
    public var commitment: Commitment? = nil
    /// The renewal info in force for the subscription (`shown(_:)`): the next renewal's price,
    /// date and offer, the customer's answer to a price increase, the win-back offers it may
    /// take, why it expired. Nil when the store sent none.
    public var renewal: RenewalInfo? = nil

    /// A renewal info as an account's answer shows it: without `source` and `signed` (the
    /// proof stays in the log), and without `appTransaction` and `appAccountToken`, which
    /// identify the customer rather than the subscription.
    static func shown(_ info: RenewalInfo) -> RenewalInfo {
        var shown = info
        shown.source = nil
        shown.signed = nil
        shown.appTransaction = nil
        shown.appAccountToken = nil
        return shown
    }

    /// A plan that commits the customer to several billing periods (a monthly plan with a
    /// 12-month commitment), from the transaction in force and the renewal info in force.
    public struct Commitment: Sendable, Hashable {
        /// The period this transaction pays, 1-based, of `periods`.
        public var period: Int?
        public var periods: Int?
        /// When the commitment ends.
        public var expiresAt: Timestamp?
        /// The commitment's total price, in milliunits of the transaction's currency.
        public var price: Int64?
        /// What the commitment renews to at its end, and whether it will.
        public var renewsTo: String?
        public var willRenew: Bool?

        /// The commitment the reports name, nil when they name none.
        init?(transaction fact: StoreTransaction, renewal: RenewalInfo?) {
            period = fact.commitmentBillingPeriod
            periods = fact.commitmentBillingPeriods
            expiresAt = fact.commitmentExpiresAt
            price = fact.commitmentPrice
            renewsTo = renewal?.commitmentRenewsTo
            willRenew = renewal?.commitmentWillRenew
            if period == nil, periods == nil, expiresAt == nil, price == nil, renewsTo == nil, willRenew == nil { return nil }
        }
    }
}
