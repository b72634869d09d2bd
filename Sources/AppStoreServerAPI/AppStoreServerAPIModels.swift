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

/// Get Notification History: one page of the notifications Apple sent (or tried to).
public struct NotificationHistoryPage: Decodable, Sendable, Hashable {
    public var paginationToken: String?
    public var hasMore: Bool?
    public var notificationHistory: [Item]?

    public struct Item: Decodable, Sendable, Hashable {
        /// The notification as Apple signed it (the body's `signedPayload`).
        public var signedPayload: String?
        public var sendAttempts: [SendAttempt]?
    }

    public struct SendAttempt: Decodable, Sendable, Hashable {
        /// Milliseconds since 1970.
        public var attemptDate: Double?
        /// "SUCCESS", "TIMED_OUT", "NO_RESPONSE", …
        public var sendAttemptResult: String?
    }
}

/// The body of a Get Notification History request.
struct NotificationHistoryRequest: Encodable {
    /// Milliseconds since 1970; Apple keeps 180 days.
    var startDate: Int64
    var endDate: Int64
}
