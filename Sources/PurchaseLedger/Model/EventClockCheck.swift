/// The check an append makes against the clock, beside `validate()`: what the store reports
/// and what a customer consents to (or the server asked of Apple) has already happened, so a store event or a consent dated
/// more than `allowedClockSkew` past the appending machine's clock is `invalidEvent`. Such a
/// report would otherwise stay in force until its date (a refund after it changing nothing,
/// a consent outliving its withdrawal). Only appends are checked: replay, `verify` and copies
/// take the log as it is, so its projections never depend on when it is read.
extension Event {
    /// How far past this machine's clock a date may be (clock skew, generously): a day.
    public static let allowedClockSkew: Int64 = 86_400

    /// Throws `invalidEvent` when the event is dated, or says something happened, after `latest`.
    public func checkNotAfter(_ latest: Timestamp) throws(LedgerError) {
        func check(_ time: Timestamp?, _ field: String) throws(LedgerError) {
            guard let time, time > latest else { return }
            throw LedgerError(.invalidEvent, "`\(field)` is \(time), more than a day past the clock (\(latest))")
        }
        switch payload {
        case .storeTransaction(let fact):
            try check(at, "at")
            try check(fact.purchasedAt, "purchasedAt")
            try check(fact.revokedAt, "revokedAt")
        case .renewalInfo, .consumptionConsent, .consumptionRequest, .consumptionAnswer, .appStoreCall, .appTransaction, .transferred, .shared, .forgotten:
            try check(at, "at")
        case .paymentAdded, .transactionUpdated, .downloadUpdated, .transactionFinished, .consumed, .revoked:
            // The device's own clock, as version 1 of the format takes it.
            break
        }
    }

    /// The latest time an event appended now may carry.
    static func latestAcceptedTime(now: Timestamp = .now()) -> Timestamp {
        Timestamp(seconds: now.seconds + allowedClockSkew, nanoseconds: now.nanoseconds)
    }
}
