import PurchaseLedger

/// What a verified notification means for the ledger.
enum AppStoreNotificationAction: Sendable, Equatable {
    /// Append `purchase` (opening or updating the transaction's entry), then, once it is in the
    /// log, `finish`: the server has recorded the content, and an entry opened by the store must
    /// not wait forever among the account's unfinished transactions.
    case purchase(Event, finish: Event)
    /// Append a `revoked` event.
    case revoke(Event)
    /// A purchase or revocation without an `appAccountToken` whose transaction (or original
    /// transaction) no account of the ledger holds: no account to give it to.
    case unattributed(String)
    /// A type the ledger has nothing to record for (TEST, EXPIRED, DID_CHANGE_RENEWAL_PREF…).
    case ignored(String)
}

enum AppStoreNotificationEvents {
    static let purchaseTypes: Set<String> = ["ONE_TIME_CHARGE", "SUBSCRIBED", "DID_RENEW", "OFFER_REDEEMED"]
    static let revocationTypes: Set<String> = ["REFUND", "REVOKE"]

    /// The entry a store transaction opens in its account: `appstore:<transactionId>`.
    static func payment(forTransaction transaction: String) -> String {
        "appstore:" + transaction
    }

    /// The ledger's reading of a notification and its decoded `signedTransactionInfo`.
    ///
    /// The notification UUID is the event id, so that Apple's retries are duplicates. The
    /// account is the transaction's `appAccountToken`; without one, the account that holds the
    /// transaction, or its original transaction (a renewal or a refund of a purchase the app
    /// reported without a token), as `accountHolding` answers.
    static func action(
        for notification: AppStoreNotificationPayload, transaction: AppStoreTransactionPayload?,
        accountHolding: (String) throws -> String? = { _ in nil }
    ) rethrows -> AppStoreNotificationAction {
        let type = notification.notificationType
        let isPurchase = purchaseTypes.contains(type)
        guard isPurchase || revocationTypes.contains(type) else {
            return .ignored("\(type) changes nothing the ledger records")
        }
        guard let transaction, let transactionId = transaction.transactionId else {
            return .unattributed("\(type) carries no signedTransactionInfo with a transactionId")
        }
        let token = transaction.appAccountToken.flatMap { $0.isEmpty ? nil : $0 }
        guard let account = try token
            ?? accountHolding(transactionId)
            ?? transaction.originalTransactionId.flatMap(accountHolding)
        else {
            return .unattributed("\(type) for transaction \(transactionId) has no appAccountToken, and no account holds the transaction")
        }
        let signed = notification.signedDate.map(timestamp) ?? .now()
        if isPurchase {
            let payment = payment(forTransaction: transactionId)
            let purchase = Event.transactionUpdated(
                id: notification.notificationUUID, account: account,
                at: transaction.purchaseDate.map(timestamp) ?? signed,
                TransactionUpdated(
                    payment: payment, state: .purchased, transaction: transactionId,
                    originalTransaction: transaction.originalTransactionId,
                    expiresAt: transaction.expiresDate.map(timestamp),
                    product: transaction.productId, quantity: transaction.quantity))
            let finish = Event.transactionFinished(
                id: notification.notificationUUID + "/finish", account: account, at: signed, payment: payment)
            return .purchase(purchase, finish: finish)
        }
        var reason = type
        if let code = transaction.revocationReason { reason += " (revocationReason \(code))" }
        return .revoke(.revoked(
            id: notification.notificationUUID, account: account,
            at: transaction.revocationDate.map(timestamp) ?? signed,
            transaction: transactionId, reason: reason))
    }

    /// Apple's milliseconds since 1970 (fractional in Xcode's data) as a timestamp.
    /// A value beyond years 0000–9999 stays beyond them (the ledger then rejects the event as
    /// `invalidEvent`) rather than trapping.
    static func timestamp(_ milliseconds: Double) -> Timestamp {
        let limit = 1e12
        guard milliseconds.isFinite else { return Timestamp(seconds: Int64(limit)) }
        let seconds = min(max(milliseconds / 1000, -limit), limit)
        let whole = seconds.rounded(.down)
        let nanoseconds = ((seconds - whole) * 1e9).rounded(.down)
        return Timestamp(seconds: Int64(whole), nanoseconds: UInt32(max(0, min(nanoseconds, 999_999_999))))
    }
}
