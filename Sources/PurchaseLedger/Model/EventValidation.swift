/// The rules about an event on its own (rule 1 of the spec's order: `invalidEvent`), shared by
/// events decoded from JSON and events built in Swift.
///
/// Limits the spec states: `id`, `account` and `payment` are 1–128 bytes of UTF-8; `quantity`
/// is 1…10; `amount` ≥ 1; `progress` 0…1; `timeRemaining` not below -1; the fields a state
/// requires. Limits the spec leaves open, chosen so that every value fits an index key and no
/// event can grow without bound: other names and ids at most 256 bytes, free text (`error`,
/// `reason`) at most 1,024 bytes, timestamps within years 0000–9999 (UTC).
enum EventLimits {
    static let keyBytes = 1...128
    static let nameBytes = 0...256
    static let textBytes = 0...1024
    static let quantity = 1...10
    /// The longest JSON line the decoder reads; longer lines are `invalidEvent`.
    static let maximumLineBytes = 65_536
}

/// The ranges of the store events' numbers: Apple's own, with room for values Apple may add
/// (an unknown reason or intent is kept, not refused).
public enum StoreLimits {
    public static let revocationReason: ClosedRange<Int64> = 0...99
    public static let revocationPercentage: ClosedRange<Int64> = 0...100_000
    public static let expirationIntent: ClosedRange<Int64> = 1...99
    /// Apple's `consumptionPercentage`, in thousandths of a percent.
    public static let consumptionPercentage: ClosedRange<Int64> = 0...100_000
    /// An HTTP status.
    public static let httpStatus: ClosedRange<Int64> = 100...599
    /// Apple's JWS kept as proof (`signed`): a chain of three certificates and the payload fit
    /// in well under this.
    public static let signedBytes = 1...16_384
    /// Apple's `offerType` (1–4 today) and `priceIncreaseStatus` (0–1).
    public static let offerType: ClosedRange<Int64> = 1...99
    public static let priceIncreaseStatus: ClosedRange<Int64> = 0...99
    /// A commitment's billing periods: Apple's longest is 12 monthly periods.
    public static let billingPeriods: ClosedRange<Int64> = 1...1_000
    /// How many win-back offers a renewal info may name.
    public static let eligibleWinBackOffers = 0...100
}

extension Event {
    /// Checks every field against the format; throws `invalidEvent` naming the first problem.
    public func validate() throws(LedgerError) {
        try Self.checkKey(id, "id")
        if let namespace = OwnEventIDs.namespace(of: id), !namespace.types.contains(type) {
            throw .invalid("ids that start with `\(namespace.prefix)` are made by \(namespace.maker), for other event types than \(type.rawValue)")
        }
        try Self.checkKey(account, "account")
        try Self.checkTime(at, "at")
        switch payload {
        case .paymentAdded(let added):
            try Self.checkKey(added.payment, "payment")
            try Self.checkName(added.product, "product")
            try Self.checkQuantity(added.quantity)
            if OwnEventIDs.isStorePayment(added.payment) {
                throw .invalid("payments that start with `\(OwnEventIDs.storePaymentPrefix)` are opened by the App Store's purchase they name, never added")
            }
        case .transactionUpdated(let update):
            try Self.checkKey(update.payment, "payment")
            try Self.checkName(update.transaction, "transaction")
            try Self.checkName(update.originalTransaction, "originalTransaction")
            try Self.checkText(update.error, "error")
            try Self.checkName(update.product, "product")
            try Self.checkQuantity(update.quantity)
            if let expiresAt = update.expiresAt { try Self.checkTime(expiresAt, "expiresAt") }
            switch update.state {
            case .purchased:
                try Self.require(update.transaction, "transaction", for: update.state)
            case .restored:
                try Self.require(update.transaction, "transaction", for: update.state)
                try Self.require(update.originalTransaction, "originalTransaction", for: update.state)
            case .failed:
                try Self.require(update.error, "error", for: update.state)
            case .purchasing, .deferred:
                break
            }
            // The entry of an App Store purchase is that purchase's, and only its.
            if OwnEventIDs.isStorePayment(update.payment) {
                let named = update.payment.utf8.dropFirst(OwnEventIDs.storePaymentPrefix.utf8.count)
                guard update.state == .purchased, let transaction = update.transaction, transaction.utf8.elementsEqual(named) else {
                    throw .invalid("the entry `\(update.payment)` takes only the App Store's purchase of transaction \(String(decoding: named, as: UTF8.self))")
                }
            }
        case .downloadUpdated(let download):
            try Self.checkKey(download.payment, "payment")
            try Self.checkName(download.download, "download")
            if let progress = download.progress, !(progress >= 0 && progress <= 1) {
                throw .invalid("`progress` must be a number from 0 to 1 (got \(progress))")
            }
            // Between -1 and 0 is not a format error but a download rule violation (`illegalDownload`).
            if let remaining = download.timeRemaining, !(remaining >= -1 && remaining.isFinite) {
                throw .invalid("`timeRemaining` must be seconds ≥ 0, or -1 for unknown (got \(remaining))")
            }
        case .transactionFinished(let finished):
            try Self.checkKey(finished.payment, "payment")
        case .consumed(let consumed):
            try Self.checkName(consumed.item, "item")
            if consumed.amount < 1 {
                throw .invalid("`amount` must be an integer ≥ 1 (got \(consumed.amount))")
            }
        case .shared(let transfer):
            try Self.checkTransfer(transfer)
            guard transfer.side(of: account) == .joining else {
                throw .invalid("a `shared` event belongs to its `to` account")
            }
        case .transferred(let transfer):
            try Self.checkTransfer(transfer)
            guard transfer.side(of: account) != nil else {
                throw .invalid("a `transferred` event belongs to its `from` or its `to` account")
            }
        case .forgotten(let forgotten):
            try Self.checkKey(forgotten.requestedBy, "requestedBy")
        case .revoked(let revoked):
            try Self.checkName(revoked.transaction, "transaction")
            try Self.checkText(revoked.reason, "reason")
        case .storeTransaction(let fact):
            try Self.checkID(fact.transaction, "transaction")
            try Self.checkName(fact.originalTransaction, "originalTransaction")
            try Self.checkName(fact.product, "product")
            try Self.checkQuantity(fact.quantity)
            for (time, field) in [(fact.purchasedAt, "purchasedAt"), (fact.expiresAt, "expiresAt"), (fact.revokedAt, "revokedAt")] {
                if let time { try Self.checkTime(time, field) }
            }
            try Self.checkName(fact.subscriptionGroup, "subscriptionGroup")
            try Self.checkName(fact.currency, "currency")
            try Self.checkName(fact.storefront, "storefront")
            try Self.checkRange(fact.price, 0...Int64.max, "price")
            try Self.checkRange(fact.revocationReason.map(Int64.init), StoreLimits.revocationReason, "revocationReason")
            try Self.checkRange(fact.revocationPercentage.map(Int64.init), StoreLimits.revocationPercentage, "revocationPercentage")
            try Self.checkText(fact.source, "source")
            try Self.checkSigned(fact.signed)
            try Self.checkSaleDetails(of: fact)
        case .renewalInfo(let info):
            try Self.checkID(info.originalTransaction, "originalTransaction")
            try Self.checkName(info.product, "product")
            try Self.checkName(info.renewsTo, "renewsTo")
            if let time = info.gracePeriodEndsAt { try Self.checkTime(time, "gracePeriodEndsAt") }
            try Self.checkRange(info.expirationIntent.map(Int64.init), StoreLimits.expirationIntent, "expirationIntent")
            try Self.checkText(info.source, "source")
            try Self.checkSigned(info.signed)
            try Self.checkRenewalDetails(of: info)
        case .consumptionConsent:
            break
        case .consumptionRequest(let request):
            try Self.checkID(request.transaction, "transaction")
            try Self.checkName(request.reason, "reason")
        case .appTransaction(let info):
            try Self.checkID(info.appTransaction, "appTransaction")
            for (time, field) in [(info.originalPurchasedAt, "originalPurchasedAt"), (info.preorderedAt, "preorderedAt")] {
                if let time { try Self.checkTime(time, field) }
            }
            try Self.checkName(info.originalApplicationVersion, "originalApplicationVersion")
            try Self.checkName(info.applicationVersion, "applicationVersion")
            try Self.checkName(info.originalPlatform, "originalPlatform")
            try Self.checkSigned(info.signed)
        case .appStoreCall(let call):
            try Self.checkID(call.transaction, "transaction")
            try Self.checkName(call.appAccountToken, "appAccountToken")
            try Self.checkRange(call.status.map(Int64.init), StoreLimits.httpStatus, "status")
            try Self.checkText(call.error, "error")
        case .consumptionAnswer(let answer):
            try Self.checkKey(answer.request, "request")
            try Self.checkID(answer.transaction, "transaction")
            try Self.checkName(answer.deliveryStatus, "deliveryStatus")
            try Self.checkRange(answer.consumptionPercentage.map(Int64.init), StoreLimits.consumptionPercentage, "consumptionPercentage")
            try Self.checkName(answer.refundPreference, "refundPreference")
            try Self.checkRange(answer.status.map(Int64.init), StoreLimits.httpStatus, "status")
            try Self.checkText(answer.error, "error")
        }
    }

    /// The fields Apple added in API 1.15–1.21 (`StoreTransaction.originalPurchasedAt` on).
    private static func checkSaleDetails(of fact: StoreTransaction) throws(LedgerError) {
        for (time, field) in [(fact.originalPurchasedAt, "originalPurchasedAt"), (fact.commitmentExpiresAt, "commitmentExpiresAt")] {
            if let time { try checkTime(time, field) }
        }
        for (name, field) in [
            (fact.webOrderLineItem, "webOrderLineItem"), (fact.storefrontId, "storefrontId"),
            (fact.transactionReason, "transactionReason"), (fact.offerIdentifier, "offerIdentifier"),
            (fact.offerDiscountType, "offerDiscountType"), (fact.offerPeriod, "offerPeriod"),
            (fact.appTransaction, "appTransaction"), (fact.appAccountToken, "appAccountToken"),
            (fact.billingPlanType, "billingPlanType"),
        ] {
            try checkName(name, field)
        }
        try checkRange(fact.offerType.map(Int64.init), StoreLimits.offerType, "offerType")
        try checkRange(fact.commitmentBillingPeriod.map(Int64.init), StoreLimits.billingPeriods, "commitmentBillingPeriod")
        try checkRange(fact.commitmentBillingPeriods.map(Int64.init), StoreLimits.billingPeriods, "commitmentBillingPeriods")
        try checkRange(fact.commitmentPrice, 0...Int64.max, "commitmentPrice")
    }

    /// The renewal info's fields Apple added in API 1.15–1.21 (`RenewalInfo.renewalPrice` on).
    private static func checkRenewalDetails(of info: RenewalInfo) throws(LedgerError) {
        for (time, field) in [
            (info.renewsAt, "renewsAt"), (info.recentSubscriptionStartedAt, "recentSubscriptionStartedAt"),
            (info.commitmentRenewsAt, "commitmentRenewsAt"),
        ] {
            if let time { try checkTime(time, field) }
        }
        for (name, field) in [
            (info.currency, "currency"), (info.offerIdentifier, "offerIdentifier"),
            (info.offerDiscountType, "offerDiscountType"), (info.offerPeriod, "offerPeriod"),
            (info.appTransaction, "appTransaction"), (info.appAccountToken, "appAccountToken"),
            (info.billingPlanType, "billingPlanType"), (info.commitmentRenewsTo, "commitmentRenewsTo"),
            (info.commitmentBillingPlanType, "commitmentBillingPlanType"),
        ] {
            try checkName(name, field)
        }
        try checkRange(info.renewalPrice, 0...Int64.max, "renewalPrice")
        try checkRange(info.commitmentRenewalPrice, 0...Int64.max, "commitmentRenewalPrice")
        try checkRange(info.priceIncreaseStatus.map(Int64.init), StoreLimits.priceIncreaseStatus, "priceIncreaseStatus")
        try checkRange(info.offerType.map(Int64.init), StoreLimits.offerType, "offerType")
        if let offers = info.eligibleWinBackOffers {
            guard StoreLimits.eligibleWinBackOffers.contains(offers.count) else {
                throw .invalid("`eligibleWinBackOffers` must name at most 100 offers (got \(offers.count))")
            }
            for offer in offers { try checkName(offer, "eligibleWinBackOffers") }
        }
    }

    /// A name the event cannot do without: 1 to 256 bytes.
    private static func checkTransfer(_ transfer: Transferred) throws(LedgerError) {
        try checkName(transfer.originalTransaction, "originalTransaction")
        try checkKey(transfer.from, "from")
        try checkKey(transfer.to, "to")
        guard !sameBytes(transfer.from, transfer.to) else {
            throw .invalid("`from` and `to` must be different accounts")
        }
    }

    private static func checkID(_ value: String, _ field: String) throws(LedgerError) {
        let count = value.utf8.count
        guard count >= 1, EventLimits.nameBytes.contains(count) else {
            throw .invalid("`\(field)` must be 1 to 256 bytes of UTF-8 (got \(count))")
        }
    }

    private static func checkRange(_ value: Int64?, _ range: ClosedRange<Int64>, _ field: String) throws(LedgerError) {
        guard let value, !range.contains(value) else { return }
        let bounds = range.upperBound == .max ? "≥ \(range.lowerBound)" : "from \(range.lowerBound) to \(range.upperBound)"
        throw .invalid("`\(field)` must be an integer \(bounds) (got \(value))")
    }

    private static func checkKey(_ value: String, _ field: String) throws(LedgerError) {
        let count = value.utf8.count
        guard EventLimits.keyBytes.contains(count) else {
            throw .invalid("`\(field)` must be 1 to 128 bytes of UTF-8 (got \(count))")
        }
    }

    private static func checkName(_ value: String?, _ field: String) throws(LedgerError) {
        guard let count = value?.utf8.count else { return }
        guard EventLimits.nameBytes.contains(count) else {
            throw .invalid("`\(field)` must be at most 256 bytes of UTF-8 (got \(count))")
        }
    }

    private static func checkText(_ value: String?, _ field: String) throws(LedgerError) {
        guard let count = value?.utf8.count else { return }
        guard EventLimits.textBytes.contains(count) else {
            throw .invalid("`\(field)` must be at most 1,024 bytes of UTF-8 (got \(count))")
        }
    }

    private static func checkSigned(_ value: String?) throws(LedgerError) {
        guard let count = value?.utf8.count else { return }
        guard StoreLimits.signedBytes.contains(count) else {
            throw .invalid("`signed` must be 1 to 16,384 bytes of UTF-8 (got \(count))")
        }
    }

    private static func checkQuantity(_ quantity: Int?) throws(LedgerError) {
        guard let quantity else { return }
        guard EventLimits.quantity.contains(quantity) else {
            throw .invalid("`quantity` must be an integer from 1 to 10 (got \(quantity))")
        }
    }

    private static func checkTime(_ time: Timestamp, _ field: String) throws(LedgerError) {
        guard time.isRepresentable else {
            throw .invalid("`\(field)` must lie between years 0000 and 9999 (UTC)")
        }
    }

    private static func require(_ value: String?, _ field: String, for state: TransactionState) throws(LedgerError) {
        guard value != nil else {
            throw .invalid("`\(field)` is required when `state` is \(state.rawValue)")
        }
    }
}
