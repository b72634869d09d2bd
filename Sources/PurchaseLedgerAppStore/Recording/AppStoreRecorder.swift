import Foundation
import PurchaseLedger

/// What recording something Apple said did: the answer's `action`, and the label of
/// `purchaseledger_appstore_notifications_total` (every case has a series).
public enum AppStoreRecordingAction: String, Sendable, Hashable, CaseIterable {
    /// A new, paid transaction: the purchase, its finish and Apple's report.
    case purchase
    /// A refund or revocation.
    case revoke
    /// A refund reversed.
    case restore
    /// Apple's current view of a transaction or subscription, nothing more.
    case record
    /// CONSUMPTION_REQUEST: a customer asked Apple for a refund.
    case refundRequest
    /// No account could be given the payload: kept in the audit file.
    case unattributed
    /// Nothing to record (TEST, SUMMARY, RESCIND_CONSENT…).
    case ignored
    /// The payload did not verify, or says something the ledger cannot take (no `signedDate`).
    case refused
}

/// What a verified notification means for the ledger.
enum AppStoreNotificationAction: Sendable, Equatable {
    /// Append what the notification reports, for one account.
    case record(AppStoreRecording)
    /// A notification about a transaction without an `appAccountToken`, whose transaction (or
    /// original transaction) no account of the ledger holds: no account to give it to.
    case unattributed(String)
    /// A notification that carries no signed transaction or renewal info (TEST, a
    /// RENEWAL_EXTENSION summary, RESCIND_CONSENT, EXTERNAL_PURCHASE_TOKEN…).
    case ignored(String)
    /// A verified payload the ledger cannot date: Apple signs every payload with its
    /// `signedDate`, and a report dated by the server's clock could undo a later one.
    case refused(String)
}

/// The events one payload of Apple's appends, in order.
struct AppStoreRecording: Sendable, Equatable {
    /// For a purchase (a new transaction, paid): the device-side purchase, opening or updating
    /// the transaction's entry, so that the purchase credits and entitles as the app's own
    /// report does; then, once it is in the log, its finish: the server has recorded the
    /// content, and an entry the store opened must not wait among the unfinished ones forever.
    var purchase: (event: Event, finish: Event)?
    /// A transfer of the purchase's chain to its account, or its sharing with it, appended with
    /// the purchase, before it (`RestorePolicy`).
    var transfer: [Event] = []
    /// The store's reports: `storeTransaction`, then `renewalInfo`, as Apple signed them.
    var reports: [Event]
    /// CONSUMPTION_REQUEST: the refund request, after the reports (`ConsumptionResponder`
    /// answers it from the ledger as it stood before it).
    var consumptionRequest: Event? = nil
    var action: AppStoreRecordingAction

    static func == (lhs: AppStoreRecording, rhs: AppStoreRecording) -> Bool {
        lhs.purchase?.event == rhs.purchase?.event && lhs.purchase?.finish == rhs.purchase?.finish && lhs.transfer == rhs.transfer
            && lhs.reports == rhs.reports && lhs.consumptionRequest == rhs.consumptionRequest && lhs.action == rhs.action
    }
}

extension AppStoreRecorder {
    /// Appends what a payload records, in one append and so one commit: a transfer and the
    /// purchase (one fact: both or neither, so a chain never moves without the purchase that
    /// asked for it), the purchase's finish, the store's reports, the refund request. A crash
    /// never leaves half of it. The ids are the recorder's own, so a `duplicate` counts only
    /// when the event under the id is the same fact (`DuplicatePolicy.sameFact`). The outcomes
    /// in that order; the finish's only when the purchase stands (appended, or recorded
    /// before).
    func record(_ recording: AppStoreRecording) async throws -> [AppendResult] {
        var facts: [[Event]] = []
        if let (purchase, finish) = recording.purchase {
            facts += [recording.transfer + [purchase], [finish]]
        } else if !recording.transfer.isEmpty {
            facts.append(recording.transfer)
        }
        facts += recording.reports.map { [$0] }
        if let request = recording.consumptionRequest { facts.append([request]) }
        var outcomes = try await ledger.append(facts: facts, duplicates: .sameFact).flatMap { $0 }
        if recording.purchase != nil, case .failure = outcomes[recording.transfer.count] {
            // The finish answers for the purchase it finishes, not as a fact of its own.
            outcomes.remove(at: recording.transfer.count + 1)
        }
        return outcomes
    }
}

/// The mapping from App Store Server Notifications V2 to events (docs/SERVER.md has the table).
///
/// Every notification that carries a signed transaction records it as a `storeTransaction`,
/// and a signed renewal info as a `renewalInfo`: Apple's current view, which the ledger keeps
/// per transaction by signing time, so that refunds, reversals, extensions, upgrades and grace
/// periods all follow from what Apple signed last, in whatever order it arrives. The type adds
/// what the signed objects do not say: a purchase for the types that sell a new transaction, a
/// revocation for REFUND and REVOKE, its removal for REFUND_REVERSED.
///
/// The one place that turns what Apple says (a notification, a StoreKit 2 transaction from the
/// device, an answer of the App Store Server API) into events and their ids: notifications,
/// `POST /v1/transactions` and reconciliation all record through it.
struct AppStoreRecorder: Sendable {
    let ledger: Ledger

    init(ledger: Ledger) {
        self.ledger = ledger
    }

    /// The types (and subtypes) that report a new, paid transaction.
    static func isPurchase(_ type: String, subtype: String?) -> Bool {
        switch type {
        case "ONE_TIME_CHARGE", "SUBSCRIBED", "DID_RENEW", "OFFER_REDEEMED": true
        // An upgrade takes effect at once, with a new transaction paid now.
        case "DID_CHANGE_RENEWAL_PREF": subtype == "UPGRADE"
        default: false
        }
    }

    static let revocationTypes: Set<String> = ["REFUND", "REVOKE"]
    /// The `source` of a StoreKit 2 transaction the device reported.
    static let storeKit2Source = "device StoreKit 2"
    static let reversalTypes: Set<String> = ["REFUND_REVERSED"]

    /// The entry a store transaction opens in its account: `appstore:<transactionId>`.
    static func payment(forTransaction transaction: String) -> String {
        "appstore:" + transaction
    }

    /// The ledger's reading of a notification and its decoded signed objects.
    ///
    /// The notification UUID makes the event ids, so that Apple's retries are duplicates. The
    /// account is the `appAccountToken` (normalized, `account(fromToken:)`); without one, the
    /// account that holds the transaction, or its original transaction (a renewal or a refund
    /// of a purchase the app reported without a token), as `accountHolding` answers; else the
    /// account that first had a report of the same customer (`appTransactionId`), as
    /// `customerAccount` answers. A chain that account transferred goes where the transfer
    /// took it (`chainOwner`, given the account and the original transaction): Apple's token
    /// still names the account it left.
    static func action(
        for notification: AppStoreNotificationPayload, transaction: AppStoreTransactionPayload?,
        renewal: AppStoreRenewalPayload? = nil, accountHolding: (String) throws -> String? = { _ in nil },
        customerAccount: (String) throws -> String? = { _ in nil },
        chainOwner: (_ account: String, _ originalTransaction: String) throws -> String = { account, _ in account }
    ) rethrows -> AppStoreNotificationAction {
        let type = notification.notificationType
        guard transaction != nil || renewal != nil else {
            return .ignored("\(type) carries no signed transaction or renewal info")
        }
        let transactionId = transaction?.transactionId
        let originalId = transaction?.originalTransactionId ?? renewal?.originalTransactionId
        let token = (transaction?.appAccountToken ?? renewal?.appAccountToken).flatMap(account(fromToken:))
        let customer = transaction?.appTransactionId ?? renewal?.appTransactionId
        guard let named = try token
            ?? transactionId.flatMap(accountHolding)
            ?? originalId.flatMap(accountHolding)
            ?? customer.flatMap(customerAccount)
        else {
            let about = transactionId.map { "transaction \($0)" } ?? originalId.map { "original transaction \($0)" } ?? "a transaction"
            return .unattributed("\(type) for \(about) has no appAccountToken, no account holds the transaction, and no account has its customer's appTransactionId")
        }
        let account = try (originalId ?? transactionId).map { try chainOwner(named, $0) } ?? named
        let uuid = notification.notificationUUID
        guard let notified = notification.signedDate.map(timestamp) else {
            return .refused("\(type) has no signedDate")
        }
        var source = "notification \(type)"
        if let subtype = notification.subtype { source += " \(subtype)" }
        var recording = AppStoreRecording(purchase: nil, reports: [], action: .record)

        if let transaction, let transactionId {
            guard let transactionSigned = transaction.signedDate else { return .refused("\(type)'s transaction has no signedDate") }
            var fact = storeTransaction(transaction, id: transactionId, source: source)
            fact.signed = notification.data?.signedTransactionInfo
            if revocationTypes.contains(type) {
                fact.revokedAt = fact.revokedAt ?? notified
                recording.action = .revoke
            } else if reversalTypes.contains(type) {
                // Apple reversed the refund: the transaction stands, whatever the payload kept.
                (fact.revokedAt, fact.revocationReason, fact.revocationType, fact.revocationPercentage) = (nil, nil, nil, nil)
                recording.action = .restore
            }
            if isPurchase(type, subtype: notification.subtype) {
                recording.purchase = purchase(transaction, id: transactionId, account: account, uuid: uuid, at: notified)
                recording.action = .purchase
            }
            recording.reports.append(.storeTransaction(
                id: uuid + "/transaction", account: account, signedAt: timestamp(transactionSigned), fact))
        }
        if let renewal, let original = renewal.originalTransactionId {
            guard let renewalSigned = renewal.signedDate else { return .refused("\(type)'s renewal info has no signedDate") }
            var info = renewalInfo(renewal, original: original, source: source)
            info.signed = notification.data?.signedRenewalInfo
            recording.reports.append(.renewalInfo(id: uuid + "/renewal", account: account, signedAt: timestamp(renewalSigned), info))
        }
        if type == "CONSUMPTION_REQUEST", let transactionId {
            recording.consumptionRequest = .consumptionRequest(
                id: uuid + "/consumption-request", account: account, signedAt: notified,
                ConsumptionRequest(
                    transaction: transactionId, reason: notification.data?.consumptionRequestReason,
                    environment: transaction?.environment.flatMap(StoreEnvironment.init(rawValue:))))
            recording.action = .refundRequest
        }
        guard recording.purchase != nil || !recording.reports.isEmpty else {
            return .unattributed("\(type) carries a signed transaction without a transactionId")
        }
        return .record(recording)
    }

    /// What a StoreKit 2 transaction the device sent records: its purchase, finish and Apple's
    /// report, under ids from Apple's transaction id (`storekit:<id>`) and, for the report,
    /// its signing time. Nil without a `transactionId` or `signedDate`.
    ///
    /// With an `arrival` (the chain came, or comes now, to this account from the one that
    /// bought it, `RestorePolicy`), the ids name the arrival's instant
    /// (`storekit:<id>/in/<instant>/…`): the account that bought it used the plain ones. They
    /// never name the account (`OwnEventIDs`: the server's ids never contain one).
    static func deviceTransaction(
        _ transaction: AppStoreTransactionPayload, signed: String, account: String, arrival: Arrival? = nil
    ) -> AppStoreRecording? {
        guard let transactionId = transaction.transactionId, let signedAt = transaction.signedDate.map(timestamp) else { return nil }
        let prefix = "storekit:" + transactionId + (arrival.map { "/in/\($0.instant)" } ?? "")
        let report = Event.storeTransaction(
            id: prefix + "/" + signedAt.description, account: account, signedAt: signedAt,
            storeTransaction(transaction, id: transactionId, source: storeKit2Source, signed: signed))
        var recording = AppStoreRecording(
            purchase: purchase(transaction, id: transactionId, account: account, uuid: prefix, at: signedAt), reports: [report],
            action: .purchase)
        let chain = transaction.originalTransactionId ?? transactionId
        switch arrival {
        case .transfer(let from, let at)?:
            recording.transfer = Event.transfer(originalTransaction: chain, from: from, to: account, at: at)
        case .share(let from, let at)?:
            recording.transfer = [Event.share(originalTransaction: chain, from: from, to: account, at: at)]
        case .held?, nil:
            break
        }
        return recording
    }

    /// How a purchase another account bought comes to the account a device reports it for. The
    /// instants are the server's: the same signed transaction may move one way and back.
    enum Arrival: Equatable {
        /// Moved here now (`transferred`).
        case transfer(from: String, at: Timestamp)
        /// Shared with it now (`shared`).
        case share(from: String, at: Timestamp)
        /// Moved here or shared with it before, at this instant (`Ledger.arrival(ofChain:in:)`).
        case held(since: Timestamp)

        /// The instant the ids name.
        var instant: Timestamp {
            switch self {
            case .transfer(_, let at), .share(_, let at), .held(let at): at
            }
        }
    }

    /// The device-side purchase of a store transaction, and its finish.
    static func purchase(
        _ transaction: AppStoreTransactionPayload, id transactionId: String, account: String, uuid: String, at notified: Timestamp
    ) -> (event: Event, finish: Event) {
        let payment = payment(forTransaction: transactionId)
        let purchase = Event.transactionUpdated(
            id: uuid, account: account, at: transaction.purchaseDate.map(timestamp) ?? notified,
            TransactionUpdated(
                payment: payment, state: .purchased, transaction: transactionId,
                originalTransaction: transaction.originalTransactionId,
                expiresAt: transaction.expiresDate.map(timestamp),
                product: transaction.productId, quantity: transaction.quantity))
        let finish = Event.transactionFinished(id: uuid + "/finish", account: account, at: notified, payment: payment)
        return (purchase, finish)
    }

    /// Apple's transaction as the ledger's `storeTransaction`. Values the format does not know
    /// (an enumeration Apple adds later) are left out rather than refused: the rest still counts.
    static func storeTransaction(_ transaction: AppStoreTransactionPayload, id: String, source: String, signed: String? = nil) -> StoreTransaction {
        StoreTransaction(
            transaction: id, originalTransaction: transaction.originalTransactionId,
            product: transaction.productId ?? "", quantity: transaction.quantity,
            purchasedAt: transaction.purchaseDate.map(timestamp), expiresAt: transaction.expiresDate.map(timestamp),
            subscriptionGroup: transaction.subscriptionGroupIdentifier,
            ownership: transaction.inAppOwnershipType.flatMap(StoreOwnership.init(rawValue:)),
            environment: transaction.environment.flatMap(StoreEnvironment.init(rawValue:)),
            price: transaction.price, currency: transaction.currency, storefront: transaction.storefront,
            revokedAt: transaction.revocationDate.map(timestamp),
            revocationReason: transaction.revocationReason?.filter(StoreLimits.revocationReason),
            revocationType: transaction.revocationType.flatMap(StoreRevocationType.init(rawValue:)),
            revocationPercentage: transaction.revocationPercentage?.filter(StoreLimits.revocationPercentage), upgraded: transaction.isUpgraded, source: source,
            signed: signed)
        .withSaleDetails(of: transaction)
    }

    static func renewalInfo(_ renewal: AppStoreRenewalPayload, original: String, source: String) -> RenewalInfo {
        RenewalInfo(
            originalTransaction: original, product: renewal.productId, renewsTo: renewal.autoRenewProductId,
            willRenew: renewal.autoRenewStatus.map { $0 == 1 }, billingRetry: renewal.isInBillingRetryPeriod,
            gracePeriodEndsAt: renewal.gracePeriodExpiresDate.map(timestamp), expirationIntent: renewal.expirationIntent?.filter(StoreLimits.expirationIntent),
            environment: renewal.environment.flatMap(StoreEnvironment.init(rawValue:)), source: source)
        .withRenewalDetails(of: renewal)
    }

    /// The account an `appAccountToken` names. Apple sends the token as a lowercase UUID, while
    /// Swift's `UUID().uuidString` is uppercase: a UUID is taken in its lowercase form, so that
    /// one customer is one account whichever way the app wrote it. A token that is not a UUID
    /// (Apple only accepts UUIDs, so it never sends one) is taken as it is; an empty one is none.
    static func account(fromToken token: String) -> String? {
        guard !token.isEmpty else { return nil }
        return UUID(uuidString: token).map { $0.uuidString.lowercased() } ?? token
    }

    /// A timestamp of Apple's that no rule reads, nil beyond years 0000–9999: left out rather
    /// than refusing the report for it.
    static func representableTimestamp(_ milliseconds: Double) -> Timestamp? {
        let time = timestamp(milliseconds)
        return time.isRepresentable ? time : nil
    }

    /// Apple's milliseconds since 1970 (fractional in Xcode's data) as a timestamp.
    /// Whole milliseconds are split with integer arithmetic, so that `…56.682` is read as
    /// 682 ms exactly (a `Double` division made it 681.999921 ms); only a fraction of a
    /// millisecond goes through floating point. A value beyond years 0000–9999 stays beyond
    /// them (the ledger then rejects the event as `invalidEvent`) rather than trapping.
    static func timestamp(_ milliseconds: Double) -> Timestamp {
        let limit = 1e15
        guard milliseconds.isFinite else { return Timestamp(seconds: Int64(limit / 1000)) }
        let clamped = min(max(milliseconds, -limit), limit)
        let wholeMilliseconds = clamped.rounded(.down)
        let whole = Int64(wholeMilliseconds)
        var seconds = whole / 1000
        var millisecond = whole % 1000
        if millisecond < 0 {
            millisecond += 1000
            seconds -= 1
        }
        let fraction = Int64(((clamped - wholeMilliseconds) * 1_000_000).rounded(.down))
        return Timestamp(seconds: seconds, nanoseconds: UInt32(millisecond * 1_000_000 + min(max(fraction, 0), 999_999)))
    }
}

private extension FixedWidthInteger {
    /// Self when within `range`.
    func filter(_ range: ClosedRange<Int64>) -> Self? {
        Int64(exactly: self).map(range.contains) == true ? self : nil
    }
}

private extension String {
    /// Self when it fits a name of the format (at most 256 bytes): a longer value Apple never
    /// sends is left out, not a reason to refuse the report.
    var fittingName: String? {
        utf8.count <= 256 ? self : nil
    }
}

private extension StoreTransaction {
    /// Apple's additions of API 1.15–1.21, each kept when it fits the format.
    func withSaleDetails(of transaction: AppStoreTransactionPayload) -> StoreTransaction {
        var fact = self
        fact.originalPurchasedAt = transaction.originalPurchaseDate.flatMap(AppStoreRecorder.representableTimestamp)
        fact.webOrderLineItem = transaction.webOrderLineItemId?.fittingName
        fact.storefrontId = transaction.storefrontId?.fittingName
        fact.transactionReason = transaction.transactionReason?.fittingName
        fact.offerType = transaction.offerType?.filter(StoreLimits.offerType)
        fact.offerIdentifier = transaction.offerIdentifier?.fittingName
        fact.offerDiscountType = transaction.offerDiscountType?.fittingName
        fact.offerPeriod = transaction.offerPeriod?.fittingName
        fact.appTransaction = transaction.appTransactionId?.fittingName
        fact.appAccountToken = transaction.appAccountToken?.fittingName
        fact.billingPlanType = transaction.billingPlanType?.fittingName
        if let commitment = transaction.commitmentInfo {
            fact.commitmentBillingPeriod = commitment.billingPeriodNumber?.filter(StoreLimits.billingPeriods)
            fact.commitmentBillingPeriods = commitment.totalBillingPeriods?.filter(StoreLimits.billingPeriods)
            fact.commitmentExpiresAt = commitment.commitmentExpiresDate.flatMap(AppStoreRecorder.representableTimestamp)
            fact.commitmentPrice = commitment.commitmentPrice?.filter(0...Int64.max)
        }
        return fact
    }
}

private extension RenewalInfo {
    /// Apple's additions of API 1.15–1.21, each kept when it fits the format.
    func withRenewalDetails(of renewal: AppStoreRenewalPayload) -> RenewalInfo {
        var info = self
        info.renewalPrice = renewal.renewalPrice?.filter(0...Int64.max)
        info.currency = renewal.currency?.fittingName
        info.renewsAt = renewal.renewalDate.flatMap(AppStoreRecorder.representableTimestamp)
        info.recentSubscriptionStartedAt = renewal.recentSubscriptionStartDate.flatMap(AppStoreRecorder.representableTimestamp)
        info.priceIncreaseStatus = renewal.priceIncreaseStatus?.filter(StoreLimits.priceIncreaseStatus)
        info.offerType = renewal.offerType?.filter(StoreLimits.offerType)
        info.offerIdentifier = renewal.offerIdentifier?.fittingName
        info.offerDiscountType = renewal.offerDiscountType?.fittingName
        info.offerPeriod = renewal.offerPeriod?.fittingName
        info.eligibleWinBackOffers = renewal.eligibleWinBackOfferIds.flatMap { offers in
            let kept = offers.compactMap(\.fittingName)
            return kept.count <= StoreLimits.eligibleWinBackOffers.upperBound ? kept : nil
        }
        info.appTransaction = renewal.appTransactionId?.fittingName
        info.appAccountToken = renewal.appAccountToken?.fittingName
        info.billingPlanType = renewal.renewalBillingPlanType?.fittingName
        if let commitment = renewal.commitmentInfo {
            info.commitmentRenewsTo = commitment.commitmentAutoRenewProductId?.fittingName
            info.commitmentWillRenew = commitment.commitmentAutoRenewStatus.map { $0 == 1 }
            info.commitmentBillingPlanType = commitment.commitmentRenewalBillingPlanType?.fittingName
            info.commitmentRenewsAt = commitment.commitmentRenewalDate.flatMap(AppStoreRecorder.representableTimestamp)
            info.commitmentRenewalPrice = commitment.commitmentRenewalPrice?.filter(0...Int64.max)
        }
        return info
    }
}
