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
    /// The transaction in force: the group's latest one that was not upgraded away from.
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

extension SubscriptionStatus {
    /// The status of every subscription group the account's store reports name, as of `time`,
    /// by group: from the group's latest transaction purchased by then. `isRevoked` says which transactions `revoked` events revoked (those are final).
    static func groups(
        of state: AccountState, asOf time: Timestamp, isRevoked: (UTF8Key) throws -> Bool
    ) rethrows -> [SubscriptionStatus] {
        var latest: [String: StoreTransactionRecord] = [:]
        // As of `time`: the transactions purchased by then (a renewal bought later was not yet
        // in force).
        for record in state.storeTransactions.values
        where record.productType == .autoRenewable && record.fact.purchasedAt.map({ $0 <= time }) ?? true {
            if let current = latest[record.group], !record.isLater(than: current) { continue }
            latest[record.group] = record
        }
        return try latest.keys.sorted(by: utf8Order).map { group in
            let record = latest[group]!
            let fact = record.fact
            let original = fact.originalTransaction ?? fact.transaction
            let renewal = state.renewals[UTF8Key(original)]?.info
            let status: Status
            if try record.isRevoked(isRevoked: isRevoked) {
                status = .revoked
            } else if fact.upgraded != true, fact.expiresAt.map({ $0 > time }) ?? true {
                status = .active
            } else if fact.upgraded != true, renewal?.billingRetry == true {
                status = renewal?.gracePeriodEndsAt.map { $0 > time } == true ? .gracePeriod : .billingRetry
            } else {
                status = .expired
            }
            return SubscriptionStatus(
                group: group, originalTransaction: original, transaction: fact.transaction, product: fact.product,
                status: status, expiresAt: fact.expiresAt, gracePeriodEndsAt: renewal?.gracePeriodEndsAt,
                willRenew: renewal?.willRenew, renewsTo: renewal?.renewsTo, environment: fact.environment ?? renewal?.environment)
        }
    }
}

extension StoreTransactionRecord {
    /// Revoked by the store's report in force, or by a `revoked` event of it or of its original
    /// transaction.
    func isRevoked(isRevoked: (UTF8Key) throws -> Bool) rethrows -> Bool {
        if isRevokedByStore { return true }
        if try isRevoked(UTF8Key(fact.transaction)) { return true }
        if let original = fact.originalTransaction, try isRevoked(UTF8Key(original)) { return true }
        return false
    }

    /// Orders a group's transactions: one upgraded away from comes before any other; then by
    /// purchase (else signing) time, expiry, and transaction id bytes.
    func isLater(than other: StoreTransactionRecord) -> Bool {
        let (upgraded, otherUpgraded) = (fact.upgraded == true, other.fact.upgraded == true)
        if upgraded != otherUpgraded { return otherUpgraded }
        let (purchased, otherPurchased) = (fact.purchasedAt ?? signedAt, other.fact.purchasedAt ?? other.signedAt)
        if purchased != otherPurchased { return purchased > otherPurchased }
        let (expires, otherExpires) = (fact.expiresAt ?? .earliest, other.fact.expiresAt ?? .earliest)
        if expires != otherExpires { return expires > otherExpires }
        return other.fact.transaction.utf8.lexicographicallyPrecedes(fact.transaction.utf8)
    }
}
