/// Get Transaction History (v2): one page of a customer's signed transactions.
public struct TransactionHistoryPage: Decodable, Sendable, Hashable {
    /// Where the next page starts; give it back as `revision`.
    public var revision: String?
    public var hasMore: Bool?
    public var bundleId: String?
    public var appAppleId: Int64?
    public var environment: String?
    /// JWS transactions (`JWSTransactionDecodedPayload`), to verify before use.
    public var signedTransactions: [String]?
}

/// Get Refund History (v2): one page of refunded transactions.
public struct RefundHistoryPage: Decodable, Sendable, Hashable {
    public var revision: String?
    public var hasMore: Bool?
    public var signedTransactions: [String]?
}

/// Get All Subscription Statuses: per subscription group, the last transaction of each
/// original transaction, with its status and renewal info.
public struct SubscriptionStatusesResponse: Decodable, Sendable, Hashable {
    public var environment: String?
    public var bundleId: String?
    public var appAppleId: Int64?
    public var data: [SubscriptionGroupStatus]?

    public struct SubscriptionGroupStatus: Decodable, Sendable, Hashable {
        public var subscriptionGroupIdentifier: String?
        public var lastTransactions: [LastTransaction]?
    }

    public struct LastTransaction: Decodable, Sendable, Hashable {
        /// 1 active, 2 expired, 3 billing retry, 4 grace period, 5 revoked.
        public var status: Int?
        public var originalTransactionId: String?
        public var signedTransactionInfo: String?
        public var signedRenewalInfo: String?
    }
}

/// Apple's error body: `{"errorCode": 4040010, "errorMessage": "Transaction id not found."}`.
struct AppStoreServerAPIErrorBody: Decodable {
    var errorCode: Int64?
    var errorMessage: String?
}
