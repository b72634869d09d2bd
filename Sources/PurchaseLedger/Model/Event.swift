/// One event of the interchange format: the device's payment queue, or the App Store's reports.
///
/// Build events in Swift with the static factories (`Event.paymentAdded(...)` and friends) or
/// decode them from a JSON line with `Event(jsonLine:)`. Either way the ledger checks every
/// field on append: an event that breaks a rule of the format is rejected with `invalidEvent`.
public struct Event: Sendable, Hashable {
    /// Unique id chosen by the producer, 1–128 bytes of UTF-8: the idempotency key.
    public var id: String
    /// The account the event belongs to, 1–128 bytes.
    public var account: String
    /// When it happened at the source.
    public var at: Timestamp
    public var payload: Payload

    public init(id: String, account: String, at: Timestamp, payload: Payload) {
        self.id = id
        self.account = account
        self.at = at
        self.payload = payload
    }

    public enum Payload: Sendable, Hashable {
        case paymentAdded(PaymentAdded)
        case transactionUpdated(TransactionUpdated)
        case downloadUpdated(DownloadUpdated)
        case transactionFinished(TransactionFinished)
        case consumed(Consumed)
        case revoked(Revoked)
        /// The App Store's view of a transaction (format 1.1 store events, `StoreEvents.swift`).
        case storeTransaction(StoreTransaction)
        /// The App Store's view of a subscription's renewal.
        case renewalInfo(RenewalInfo)
        /// The customer's consent to share consumption data (`ConsumptionEvents.swift`).
        case consumptionConsent(ConsumptionConsent)
        /// Apple asked how a purchase was used (a refund request).
        case consumptionRequest(ConsumptionRequest)
        /// What the server answered Apple.
        case consumptionAnswer(ConsumptionAnswer)
        /// A call the server made to the App Store Server API, and Apple's answer (`AppStoreCallEvents.swift`).
        case appStoreCall(AppStoreCall)
        /// The customer's app transaction, as Apple signed it.
        case appTransaction(AppTransactionInfo)
        /// A purchase's chain moved between accounts (`TransferEvents.swift`).
        case transferred(Transferred)
        /// Another account's purchase shared with this one (`to`), its owner keeping it.
        case shared(Transferred)
        /// The customer asked to be forgotten (`ForgottenEvents.swift`).
        case forgotten(Forgotten)
    }

    /// The `type` field of the interchange format.
    public var type: EventType {
        switch payload {
        case .paymentAdded: .paymentAdded
        case .transactionUpdated: .transactionUpdated
        case .downloadUpdated: .downloadUpdated
        case .transactionFinished: .transactionFinished
        case .consumed: .consumed
        case .revoked: .revoked
        case .storeTransaction: .storeTransaction
        case .renewalInfo: .renewalInfo
        case .consumptionConsent: .consumptionConsent
        case .consumptionRequest: .consumptionRequest
        case .consumptionAnswer: .consumptionAnswer
        case .appStoreCall: .appStoreCall
        case .appTransaction: .appTransaction
        case .transferred: .transferred
        case .shared: .shared
        case .forgotten: .forgotten
        }
    }

    /// The queue entry the event is about, for the events that name one.
    public var payment: String? {
        switch payload {
        case .paymentAdded(let p): p.payment
        case .transactionUpdated(let u): u.payment
        case .downloadUpdated(let d): d.payment
        case .transactionFinished(let f): f.payment
        case .consumed, .revoked, .storeTransaction, .renewalInfo, .consumptionConsent, .consumptionRequest, .consumptionAnswer, .appStoreCall, .appTransaction, .transferred, .shared, .forgotten: nil
        }
    }
}

public enum EventType: String, Sendable, Hashable, CaseIterable {
    case paymentAdded, transactionUpdated, downloadUpdated, transactionFinished, consumed, revoked
    // The store's events; new types go at the end: the log's tag is the position here.
    case storeTransaction, renewalInfo
    case consumptionConsent, consumptionRequest, consumptionAnswer
    case appStoreCall, appTransaction
    case transferred, shared
    case forgotten
}

/// The app called `addPayment`: opens a queue entry in state `added`.
public struct PaymentAdded: Sendable, Hashable {
    /// The queue entry's id, unique within the account, 1–128 bytes.
    public var payment: String
    /// A product id of the catalog.
    public var product: String
    /// 1…10; nil means 1. Must be 1 for non-consumable and auto-renewable products.
    public var quantity: Int?

    public init(payment: String, product: String, quantity: Int? = nil) {
        self.payment = payment
        self.product = product
        self.quantity = quantity
    }
}

/// The states StoreKit's payment queue reports for a transaction.
public enum TransactionState: String, Sendable, Hashable, CaseIterable {
    case purchasing, deferred, purchased, failed, restored
}

/// The payment queue reported a transaction state.
public struct TransactionUpdated: Sendable, Hashable {
    public var payment: String
    public var state: TransactionState
    /// The store transaction id; required for `purchased` and `restored`.
    public var transaction: String?
    /// Required for `restored`; optional for `purchased` (renewals).
    public var originalTransaction: String?
    /// Required for `failed`: an SKError name such as `paymentCancelled`.
    public var error: String?
    /// For subscriptions, on `purchased` and `restored`.
    public var expiresAt: Timestamp?
    /// Used only when `payment` is not yet known in the account: then the event opens a new
    /// queue entry for this product (renewals, Ask to Buy approvals, interrupted purchases,
    /// promoted purchases, restores).
    public var product: String?
    /// As `product`: the quantity of a newly opened entry, 1…10 (nil means 1).
    public var quantity: Int?

    public init(
        payment: String, state: TransactionState, transaction: String? = nil,
        originalTransaction: String? = nil, error: String? = nil, expiresAt: Timestamp? = nil,
        product: String? = nil, quantity: Int? = nil
    ) {
        self.payment = payment
        self.state = state
        self.transaction = transaction
        self.originalTransaction = originalTransaction
        self.error = error
        self.expiresAt = expiresAt
        self.product = product
        self.quantity = quantity
    }
}

/// The states of a hosted-content download.
public enum DownloadState: String, Sendable, Hashable, CaseIterable {
    case waiting, active, paused, finished, failed, cancelled

    /// A download in these states blocks `finishTransaction`.
    public var isPending: Bool { self == .waiting || self == .active || self == .paused }
    /// A download in these states accepts no further update.
    public var isTerminal: Bool { !isPending }
}

/// Hosted-content download progress.
public struct DownloadUpdated: Sendable, Hashable {
    public var payment: String
    public var download: String
    public var state: DownloadState
    /// 0…1; nil means 0. Never decreases for a download.
    public var progress: Double?
    /// Seconds ≥ 0, or -1 for unknown; nil means -1.
    public var timeRemaining: Double?

    public init(payment: String, download: String, state: DownloadState, progress: Double? = nil, timeRemaining: Double? = nil) {
        self.payment = payment
        self.download = download
        self.state = state
        self.progress = progress
        self.timeRemaining = timeRemaining
    }
}

/// The app called `finishTransaction`.
public struct TransactionFinished: Sendable, Hashable {
    public var payment: String

    public init(payment: String) {
        self.payment = payment
    }
}

/// The account spent part of a consumable balance.
public struct Consumed: Sendable, Hashable {
    /// The balance's name (a key of a consumable's `grants`).
    public var item: String
    /// ≥ 1.
    public var amount: Int64

    public init(item: String, amount: Int64) {
        self.item = item
        self.amount = amount
    }
}

/// The store refunded or revoked a transaction.
public struct Revoked: Sendable, Hashable {
    /// A store transaction id held by one of the account's entries, as its `transaction` or
    /// its `originalTransaction`.
    public var transaction: String
    public var reason: String?

    public init(transaction: String, reason: String? = nil) {
        self.transaction = transaction
        self.reason = reason
    }
}

// MARK: Factories

extension Event {
    public static func paymentAdded(
        id: String, account: String, at: Timestamp, payment: String, product: String, quantity: Int? = nil
    ) -> Event {
        Event(id: id, account: account, at: at,
              payload: .paymentAdded(PaymentAdded(payment: payment, product: product, quantity: quantity)))
    }

    public static func transactionUpdated(
        id: String, account: String, at: Timestamp, _ update: TransactionUpdated
    ) -> Event {
        Event(id: id, account: account, at: at, payload: .transactionUpdated(update))
    }

    public static func downloadUpdated(
        id: String, account: String, at: Timestamp, _ update: DownloadUpdated
    ) -> Event {
        Event(id: id, account: account, at: at, payload: .downloadUpdated(update))
    }

    public static func transactionFinished(id: String, account: String, at: Timestamp, payment: String) -> Event {
        Event(id: id, account: account, at: at, payload: .transactionFinished(TransactionFinished(payment: payment)))
    }

    public static func consumed(id: String, account: String, at: Timestamp, item: String, amount: Int64) -> Event {
        Event(id: id, account: account, at: at, payload: .consumed(Consumed(item: item, amount: amount)))
    }

    public static func revoked(
        id: String, account: String, at: Timestamp, transaction: String, reason: String? = nil
    ) -> Event {
        Event(id: id, account: account, at: at, payload: .revoked(Revoked(transaction: transaction, reason: reason)))
    }
}

extension Event {
    /// The ids the event's record names by handle, in the order it stores them: its account,
    /// a transfer's `from` and `to`, an `appAccountToken`, an `appTransactionId`
    /// (`LogRecordCodec`, `PersonalFields`).
    var accountsNamed: [String] {
        switch payload {
        case .transferred(let transfer), .shared(let transfer): return [account, transfer.from, transfer.to]
        default:
            // Only the types that carry personal fields are copied to find them.
            guard PersonalFields.apply(to: type) else { return [account] }
            var payload = payload
            guard let personal = PersonalFields.separate(&payload) else { return [account] }
            var named = [account]
            if let token = personal.token, !token.isEmpty { named.append(token) }
            if let appTransaction = personal.appTransaction { named.append(appTransaction) }
            return named
        }
    }
}
