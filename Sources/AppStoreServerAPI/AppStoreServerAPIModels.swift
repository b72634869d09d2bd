import Foundation

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

/// Look Up Order ID: the order's signed transactions, when the order id is valid.
public struct OrderLookupResponse: Decodable, Sendable, Hashable {
    /// 0 valid, 1 invalid.
    public var status: Int?
    /// JWS transactions, to verify before use.
    public var signedTransactions: [String]?
}

/// The body of Send Consumption Information (Apple's `ConsumptionRequest`, version 2): how the
/// customer who asked for a refund used the purchase. Apple takes it only with
/// `customerConsented` true, within 12 hours of the `CONSUMPTION_REQUEST`.
public struct ConsumptionInformation: Codable, Sendable, Hashable {
    public var customerConsented: Bool
    /// `DELIVERED`, `UNDELIVERED_QUALITY_ISSUE`, `UNDELIVERED_WRONG_ITEM`,
    /// `UNDELIVERED_SERVER_OUTAGE` or `UNDELIVERED_OTHER`.
    public var deliveryStatus: DeliveryStatus
    /// Whether a free sample, trial or description of the content was provided before purchase.
    public var sampleContentProvided: Bool
    /// The share of the purchase the customer consumed, in thousandths of a percent (0…100000).
    public var consumptionPercentage: Int?
    public var refundPreference: RefundPreference?

    public init(
        customerConsented: Bool, deliveryStatus: DeliveryStatus, sampleContentProvided: Bool,
        consumptionPercentage: Int? = nil, refundPreference: RefundPreference? = nil
    ) {
        self.customerConsented = customerConsented
        self.deliveryStatus = deliveryStatus
        self.sampleContentProvided = sampleContentProvided
        self.consumptionPercentage = consumptionPercentage
        self.refundPreference = refundPreference
    }

    public enum DeliveryStatus: String, Codable, Sendable, Hashable, CaseIterable {
        case delivered = "DELIVERED"
        case undeliveredQualityIssue = "UNDELIVERED_QUALITY_ISSUE"
        case undeliveredWrongItem = "UNDELIVERED_WRONG_ITEM"
        case undeliveredServerOutage = "UNDELIVERED_SERVER_OUTAGE"
        case undeliveredOther = "UNDELIVERED_OTHER"
    }

    public enum RefundPreference: String, Codable, Sendable, Hashable, CaseIterable {
        case decline = "DECLINE"
        case grantFull = "GRANT_FULL"
        case grantProrated = "GRANT_PRORATED"
    }

    /// The request body: keys sorted, so the same answer is always the same bytes.
    public func encoded() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return try encoder.encode(self)
    }
}

/// Get App Transaction Info's answer: the customer's app transaction, signed (verify it as any
/// signed data of Apple's before use).
public struct AppTransactionInfoResponse: Decodable, Sendable, Hashable {
    public var signedAppTransactionInfo: String?
}

/// Set App Account Token's body.
struct AppAccountTokenRequest: Encodable {
    /// A UUID, in its lowercase text form.
    var appAccountToken: String
}
