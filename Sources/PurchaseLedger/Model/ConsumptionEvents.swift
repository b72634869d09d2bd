/// Refund requests: when a customer asks Apple for a refund of a consumable (or any in-app
/// purchase), Apple sends `CONSUMPTION_REQUEST` and asks the app's server how the purchase was
/// used. Apple takes the answer only when the customer consented to share that data, so the
/// consent is an event too; the request and the answer sent are recorded so that an audit sees
/// what Apple was told, and why.

/// The customer's answer to "may we share how you used your purchases with Apple?", recorded by
/// the app or its server. Of an account's consents, the one with the latest `at` is in force
/// (ties: the greater event id), whatever order they arrive in.
public struct ConsumptionConsent: Sendable, Hashable {
    /// True: the customer agreed; false: the customer declined or withdrew consent.
    public var consented: Bool

    public init(consented: Bool) {
        self.consented = consented
    }
}

/// Apple asked how a purchase was used (`CONSUMPTION_REQUEST`). `at` is when Apple signed the
/// request. The answer is computed from the ledger as it stood just before this event.
public struct ConsumptionRequest: Sendable, Hashable {
    /// Apple's `transactionId` of the purchase the customer wants refunded.
    public var transaction: String
    /// Apple's `consumptionRequestReason` (`UNINTENDED_PURCHASE`, `FULFILLMENT_ISSUE`, …).
    public var reason: String?
    public var environment: StoreEnvironment?

    public init(transaction: String, reason: String? = nil, environment: StoreEnvironment? = nil) {
        self.transaction = transaction
        self.reason = reason
        self.environment = environment
    }
}

/// What the server did about a `consumptionRequest`: what it sent Apple, and Apple's answer.
public struct ConsumptionAnswer: Sendable, Hashable {
    /// The event id of the `consumptionRequest` answered.
    public var request: String
    public var transaction: String
    public var outcome: ConsumptionAnswerOutcome
    /// Apple's `deliveryStatus` sent (absent when nothing was sent).
    public var deliveryStatus: String?
    /// Apple's `consumptionPercentage` sent: the share of the purchase used, in thousandths of a
    /// percent (0…100000); consumables only.
    public var consumptionPercentage: Int?
    /// Apple's `refundPreference` sent, if the configuration states one.
    public var refundPreference: String?
    public var sampleContentProvided: Bool?
    /// The HTTP status Apple answered with.
    public var status: Int?
    /// Apple's error message, when Apple refused the answer.
    public var error: String?

    public init(
        request: String, transaction: String, outcome: ConsumptionAnswerOutcome, deliveryStatus: String? = nil,
        consumptionPercentage: Int? = nil, refundPreference: String? = nil, sampleContentProvided: Bool? = nil,
        status: Int? = nil, error: String? = nil
    ) {
        self.request = request
        self.transaction = transaction
        self.outcome = outcome
        self.deliveryStatus = deliveryStatus
        self.consumptionPercentage = consumptionPercentage
        self.refundPreference = refundPreference
        self.sampleContentProvided = sampleContentProvided
        self.status = status
        self.error = error
    }
}

public enum ConsumptionAnswerOutcome: String, Sendable, Hashable, CaseIterable {
    /// Sent, and Apple accepted it.
    case accepted
    /// Sent, and Apple refused it (an error a second try would not change).
    case refused
    /// Not sent: the account has no consent in force (Apple takes no answer without).
    case noConsent
}

extension Event {
    public static func consumptionConsent(id: String, account: String, at: Timestamp, consented: Bool) -> Event {
        Event(id: id, account: account, at: at, payload: .consumptionConsent(ConsumptionConsent(consented: consented)))
    }

    public static func consumptionRequest(id: String, account: String, signedAt: Timestamp, _ request: ConsumptionRequest) -> Event {
        Event(id: id, account: account, at: signedAt, payload: .consumptionRequest(request))
    }

    public static func consumptionAnswer(id: String, account: String, at: Timestamp, _ answer: ConsumptionAnswer) -> Event {
        Event(id: id, account: account, at: at, payload: .consumptionAnswer(answer))
    }
}
