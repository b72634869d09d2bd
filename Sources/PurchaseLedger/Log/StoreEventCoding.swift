/// The binary form of the store's events, shared by log records and snapshots: the required
/// strings, then a varint presence mask (bit n for the n-th optional field below), then the
/// present fields in that order. Enumerations are the case's index, booleans one byte.
extension ByteWriter {
    mutating func storeTransaction(_ fact: StoreTransaction) {
        string(fact.transaction)
        string(fact.product)
        let present: [Bool] = [
            fact.originalTransaction != nil, fact.quantity != nil, fact.purchasedAt != nil, fact.expiresAt != nil,
            fact.subscriptionGroup != nil, fact.ownership != nil, fact.environment != nil, fact.price != nil,
            fact.currency != nil, fact.storefront != nil, fact.revokedAt != nil, fact.revocationReason != nil,
            fact.revocationType != nil, fact.revocationPercentage != nil, fact.upgraded != nil, fact.source != nil,
            fact.signed != nil,
            fact.originalPurchasedAt != nil, fact.webOrderLineItem != nil, fact.storefrontId != nil,
            fact.transactionReason != nil, fact.offerType != nil, fact.offerIdentifier != nil,
            fact.offerDiscountType != nil, fact.offerPeriod != nil, fact.appTransaction != nil,
            fact.appAccountToken != nil, fact.billingPlanType != nil, fact.commitmentBillingPeriod != nil,
            fact.commitmentBillingPeriods != nil, fact.commitmentExpiresAt != nil, fact.commitmentPrice != nil,
        ]
        varint(Self.mask(present))
        if let value = fact.originalTransaction { string(value) }
        if let value = fact.quantity { signed(Int64(value)) }
        if let value = fact.purchasedAt { timestamp(value) }
        if let value = fact.expiresAt { timestamp(value) }
        if let value = fact.subscriptionGroup { string(value) }
        if let value = fact.ownership { caseIndex(value) }
        if let value = fact.environment { caseIndex(value) }
        if let value = fact.price { signed(value) }
        if let value = fact.currency { string(value) }
        if let value = fact.storefront { string(value) }
        if let value = fact.revokedAt { timestamp(value) }
        if let value = fact.revocationReason { signed(Int64(value)) }
        if let value = fact.revocationType { caseIndex(value) }
        if let value = fact.revocationPercentage { signed(Int64(value)) }
        if let value = fact.upgraded { byte(value ? 1 : 0) }
        if let value = fact.source { string(value) }
        if let value = fact.signed { string(value) }
        if let value = fact.originalPurchasedAt { timestamp(value) }
        if let value = fact.webOrderLineItem { string(value) }
        if let value = fact.storefrontId { string(value) }
        if let value = fact.transactionReason { string(value) }
        if let value = fact.offerType { signed(Int64(value)) }
        if let value = fact.offerIdentifier { string(value) }
        if let value = fact.offerDiscountType { string(value) }
        if let value = fact.offerPeriod { string(value) }
        if let value = fact.appTransaction { string(value) }
        if let value = fact.appAccountToken { string(value) }
        if let value = fact.billingPlanType { string(value) }
        if let value = fact.commitmentBillingPeriod { signed(Int64(value)) }
        if let value = fact.commitmentBillingPeriods { signed(Int64(value)) }
        if let value = fact.commitmentExpiresAt { timestamp(value) }
        if let value = fact.commitmentPrice { signed(value) }
    }

    mutating func renewalInfo(_ info: RenewalInfo) {
        string(info.originalTransaction)
        let present: [Bool] = [
            info.product != nil, info.renewsTo != nil, info.willRenew != nil, info.billingRetry != nil,
            info.gracePeriodEndsAt != nil, info.expirationIntent != nil, info.environment != nil, info.source != nil,
            info.signed != nil,
            info.renewalPrice != nil, info.currency != nil, info.renewsAt != nil, info.recentSubscriptionStartedAt != nil,
            info.priceIncreaseStatus != nil, info.offerType != nil, info.offerIdentifier != nil, info.offerDiscountType != nil,
            info.offerPeriod != nil, info.eligibleWinBackOffers != nil, info.appTransaction != nil, info.appAccountToken != nil,
            info.billingPlanType != nil, info.commitmentRenewsTo != nil, info.commitmentWillRenew != nil,
            info.commitmentBillingPlanType != nil, info.commitmentRenewsAt != nil, info.commitmentRenewalPrice != nil,
        ]
        varint(Self.mask(present))
        if let value = info.product { string(value) }
        if let value = info.renewsTo { string(value) }
        if let value = info.willRenew { byte(value ? 1 : 0) }
        if let value = info.billingRetry { byte(value ? 1 : 0) }
        if let value = info.gracePeriodEndsAt { timestamp(value) }
        if let value = info.expirationIntent { signed(Int64(value)) }
        if let value = info.environment { caseIndex(value) }
        if let value = info.source { string(value) }
        if let value = info.signed { string(value) }
        if let value = info.renewalPrice { signed(value) }
        if let value = info.currency { string(value) }
        if let value = info.renewsAt { timestamp(value) }
        if let value = info.recentSubscriptionStartedAt { timestamp(value) }
        if let value = info.priceIncreaseStatus { signed(Int64(value)) }
        if let value = info.offerType { signed(Int64(value)) }
        if let value = info.offerIdentifier { string(value) }
        if let value = info.offerDiscountType { string(value) }
        if let value = info.offerPeriod { string(value) }
        if let values = info.eligibleWinBackOffers {
            varint(UInt64(values.count))
            for value in values { string(value) }
        }
        if let value = info.appTransaction { string(value) }
        if let value = info.appAccountToken { string(value) }
        if let value = info.billingPlanType { string(value) }
        if let value = info.commitmentRenewsTo { string(value) }
        if let value = info.commitmentWillRenew { byte(value ? 1 : 0) }
        if let value = info.commitmentBillingPlanType { string(value) }
        if let value = info.commitmentRenewsAt { timestamp(value) }
        if let value = info.commitmentRenewalPrice { signed(value) }
    }

    mutating func caseIndex<Value: CaseIterable & Equatable>(_ value: Value) {
        // Every value is one of its type's cases.
        byte(UInt8(Array(Value.allCases).firstIndex(of: value)!))
    }

    static func mask(_ present: [Bool]) -> UInt64 {
        present.enumerated().reduce(0) { mask, field in field.element ? mask | 1 << UInt64(field.offset) : mask }
    }
}

extension ByteReader {
    mutating func storeTransaction() throws(Malformed) -> StoreTransaction {
        var fact = StoreTransaction(transaction: try string(), product: try string())
        let mask = try varint()
        guard mask < 1 << 32 else { throw Malformed(reason: "unknown field mask") }
        func has(_ bit: UInt64) -> Bool { mask & 1 << bit != 0 }
        if has(0) { fact.originalTransaction = try string() }
        if has(1) { fact.quantity = try bounded(EventLimits.quantity) }
        if has(2) { fact.purchasedAt = try timestamp() }
        if has(3) { fact.expiresAt = try timestamp() }
        if has(4) { fact.subscriptionGroup = try string() }
        if has(5) { fact.ownership = try caseIndex() }
        if has(6) { fact.environment = try caseIndex() }
        if has(7) { fact.price = try signed() }
        if has(8) { fact.currency = try string() }
        if has(9) { fact.storefront = try string() }
        if has(10) { fact.revokedAt = try timestamp() }
        if has(11) { fact.revocationReason = try bounded(StoreLimits.revocationReason) }
        if has(12) { fact.revocationType = try caseIndex() }
        if has(13) { fact.revocationPercentage = try bounded(StoreLimits.revocationPercentage) }
        if has(14) { fact.upgraded = try flag() }
        if has(15) { fact.source = try string() }
        if has(16) { fact.signed = try string() }
        if has(17) { fact.originalPurchasedAt = try timestamp() }
        if has(18) { fact.webOrderLineItem = try string() }
        if has(19) { fact.storefrontId = try string() }
        if has(20) { fact.transactionReason = try string() }
        if has(21) { fact.offerType = try bounded(StoreLimits.offerType) }
        if has(22) { fact.offerIdentifier = try string() }
        if has(23) { fact.offerDiscountType = try string() }
        if has(24) { fact.offerPeriod = try string() }
        if has(25) { fact.appTransaction = try string() }
        if has(26) { fact.appAccountToken = try string() }
        if has(27) { fact.billingPlanType = try string() }
        if has(28) { fact.commitmentBillingPeriod = try bounded(StoreLimits.billingPeriods) }
        if has(29) { fact.commitmentBillingPeriods = try bounded(StoreLimits.billingPeriods) }
        if has(30) { fact.commitmentExpiresAt = try timestamp() }
        if has(31) { fact.commitmentPrice = try signed() }
        return fact
    }

    mutating func renewalInfo() throws(Malformed) -> RenewalInfo {
        var info = RenewalInfo(originalTransaction: try string())
        let mask = try varint()
        guard mask < 1 << 27 else { throw Malformed(reason: "unknown field mask") }
        func has(_ bit: UInt64) -> Bool { mask & 1 << bit != 0 }
        if has(0) { info.product = try string() }
        if has(1) { info.renewsTo = try string() }
        if has(2) { info.willRenew = try flag() }
        if has(3) { info.billingRetry = try flag() }
        if has(4) { info.gracePeriodEndsAt = try timestamp() }
        if has(5) { info.expirationIntent = try bounded(StoreLimits.expirationIntent) }
        if has(6) { info.environment = try caseIndex() }
        if has(7) { info.source = try string() }
        if has(8) { info.signed = try string() }
        if has(9) { info.renewalPrice = try signed() }
        if has(10) { info.currency = try string() }
        if has(11) { info.renewsAt = try timestamp() }
        if has(12) { info.recentSubscriptionStartedAt = try timestamp() }
        if has(13) { info.priceIncreaseStatus = try bounded(StoreLimits.priceIncreaseStatus) }
        if has(14) { info.offerType = try bounded(StoreLimits.offerType) }
        if has(15) { info.offerIdentifier = try string() }
        if has(16) { info.offerDiscountType = try string() }
        if has(17) { info.offerPeriod = try string() }
        if has(18) {
            let count = try varint()
            guard count <= UInt64(StoreLimits.eligibleWinBackOffers.upperBound) else { throw Malformed(reason: "too many offers") }
            info.eligibleWinBackOffers = try (0..<count).map { _ throws(Malformed) in try string() }
        }
        if has(19) { info.appTransaction = try string() }
        if has(20) { info.appAccountToken = try string() }
        if has(21) { info.billingPlanType = try string() }
        if has(22) { info.commitmentRenewsTo = try string() }
        if has(23) { info.commitmentWillRenew = try flag() }
        if has(24) { info.commitmentBillingPlanType = try string() }
        if has(25) { info.commitmentRenewsAt = try timestamp() }
        if has(26) { info.commitmentRenewalPrice = try signed() }
        return info
    }

    mutating func caseIndex<Value: CaseIterable>() throws(Malformed) -> Value {
        let index = Int(try byte())
        guard index < Value.allCases.count else { throw Malformed(reason: "unknown enumeration value \(index)") }
        return Array(Value.allCases)[index]
    }

    mutating func flag() throws(Malformed) -> Bool {
        switch try byte() {
        case 0: return false
        case 1: return true
        default: throw Malformed(reason: "a boolean that is neither 0 nor 1")
        }
    }

    /// A signed varint within `range`, as an `Int`.
    mutating func bounded(_ range: ClosedRange<Int64>) throws(Malformed) -> Int {
        let value = try signed()
        guard range.contains(value) else { throw Malformed(reason: "a number out of range") }
        return Int(value)
    }

    mutating func bounded(_ range: ClosedRange<Int>) throws(Malformed) -> Int {
        try bounded(Int64(range.lowerBound)...Int64(range.upperBound))
    }
}
