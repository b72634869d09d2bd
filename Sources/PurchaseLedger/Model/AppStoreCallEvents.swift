/// What the server asked of the App Store Server API on the ledger's behalf, and Apple's
/// answer: the ledger's side of closing the loop with Apple. Recorded once per call and
/// transaction (the event id says which), so a call Apple accepted or refused for good is not
/// made again, and an audit sees what Apple was told.
public struct AppStoreCall: Sendable, Hashable {
    public var call: AppStoreCallKind
    /// The transaction id the call named: the original transaction for `setAppAccountToken`,
    /// the transaction for `finishTransaction`.
    public var transaction: String
    public var outcome: AppStoreCallOutcome
    /// The token sent with `setAppAccountToken`: the account, as a UUID.
    public var appAccountToken: String?
    /// The environment whose App Store was called.
    public var environment: StoreEnvironment?
    /// The HTTP status Apple answered with.
    public var status: Int?
    /// Apple's error, when it refused.
    public var error: String?

    public init(
        call: AppStoreCallKind, transaction: String, outcome: AppStoreCallOutcome, appAccountToken: String? = nil,
        environment: StoreEnvironment? = nil, status: Int? = nil, error: String? = nil
    ) {
        self.call = call
        self.transaction = transaction
        self.outcome = outcome
        self.appAccountToken = appAccountToken
        self.environment = environment
        self.status = status
        self.error = error
    }

    /// The id of the event recording `call` of `transaction`: one per call and transaction,
    /// and for `setAppAccountToken` per token too (a chain transferred to another account has
    /// its token set again, to the new account's). What names a customer (the token, and for
    /// `getAppTransactionInfo` the customer's `appTransactionId`, which is its `transaction`)
    /// appears as its handle in the account table (`h<handle>`), never itself nor a digest of
    /// it: an id stays in the log after a forget, and a digest would let anyone who knows the
    /// name find the customer's events again.
    public static func eventID(_ call: AppStoreCallKind, transaction: String, personalHandle: UInt64?) -> String {
        switch call {
        case .setAppAccountToken: "appstore-call/setAppAccountToken/\(transaction)" + (personalHandle.map { "/h\($0)" } ?? "")
        case .finishTransaction: "appstore-call/finishTransaction/\(transaction)"
        case .getAppTransactionInfo: "appstore-call/getAppTransactionInfo/h\(personalHandle ?? 0)"
        }
    }
}

/// The App Store Server API calls the ledger makes.
public enum AppStoreCallKind: String, Sendable, Hashable, CaseIterable {
    /// Set App Account Token (API 1.16): later notifications of the subscription carry the
    /// account.
    case setAppAccountToken
    /// Finish Transaction (API 1.20): the content of a StoreKit 2 transaction was delivered.
    case finishTransaction
    /// Get App Transaction Info (API 1.16): the customer's app transaction, named by its
    /// `appTransactionId`. Its answer is an `appTransaction` event; a refusal an `appStoreCall`.
    case getAppTransactionInfo
}

public enum AppStoreCallOutcome: String, Sendable, Hashable, CaseIterable {
    /// Apple accepted the call (2xx).
    case accepted
    /// Apple refused it for good (a 4xx other than 401 and 429): a second try would be refused.
    case refused
}

extension Event {
    /// `personalHandle`: the account table's handle of the call's token, or of the customer's
    /// `appTransactionId` for Get App Transaction Info (`AppStoreCall.eventID`).
    public static func appStoreCall(account: String, at: Timestamp, _ call: AppStoreCall, personalHandle: UInt64?) -> Event {
        Event(
            id: AppStoreCall.eventID(call.call, transaction: call.transaction, personalHandle: personalHandle), account: account, at: at,
            payload: .appStoreCall(call))
    }
}

/// Apple's app transaction of the account's customer (Get App Transaction Info; StoreKit's
/// `AppTransaction`): when, where and in which version the customer first got the app, the
/// answer an app that moved from paid to free needs to honour its first buyers.
/// Recorded under the id of the call that read it (`AppStoreCall.eventID(.getAppTransactionInfo,
/// …)`), `at` = Apple's `receiptCreationDate`.
public struct AppTransactionInfo: Sendable, Hashable {
    /// Apple's `appTransactionId`: one per customer and app.
    public var appTransaction: String
    /// `originalPurchaseDate`: when the customer first got the app.
    public var originalPurchasedAt: Timestamp?
    /// `originalApplicationVersion`: the app's version then (its build number on iOS).
    public var originalApplicationVersion: String?
    /// `applicationVersion`: the version the app transaction was last signed for.
    public var applicationVersion: String?
    /// `originalPlatform`: `iOS`, `macOS`, `tvOS`, `visionOS`, as Apple spells it.
    public var originalPlatform: String?
    /// `preorderDate`, when the customer pre-ordered the app.
    public var preorderedAt: Timestamp?
    /// `receiptType`: the environment.
    public var environment: StoreEnvironment?
    /// Apple's JWS (`signedAppTransactionInfo`), kept as proof in the log only.
    public var signed: String?

    public init(
        appTransaction: String, originalPurchasedAt: Timestamp? = nil, originalApplicationVersion: String? = nil,
        applicationVersion: String? = nil, originalPlatform: String? = nil, preorderedAt: Timestamp? = nil,
        environment: StoreEnvironment? = nil, signed: String? = nil
    ) {
        self.appTransaction = appTransaction
        self.originalPurchasedAt = originalPurchasedAt
        self.originalApplicationVersion = originalApplicationVersion
        self.applicationVersion = applicationVersion
        self.originalPlatform = originalPlatform
        self.preorderedAt = preorderedAt
        self.environment = environment
        self.signed = signed
    }
}

extension Event {
    /// `customerHandle`: the account table's handle of the `appTransactionId`, which names the
    /// call that read it (`AppStoreCall.eventID`).
    public static func appTransaction(account: String, signedAt: Timestamp, _ info: AppTransactionInfo, customerHandle: UInt64) -> Event {
        Event(
            id: AppStoreCall.eventID(.getAppTransactionInfo, transaction: info.appTransaction, personalHandle: customerHandle),
            account: account, at: signedAt, payload: .appTransaction(info))
    }
}
