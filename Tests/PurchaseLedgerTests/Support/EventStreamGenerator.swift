import LedgerTestSupport
@testable import PurchaseLedger

/// Generates event streams of every type that exercise every rule: small pools of accounts,
/// payments, store transactions and downloads so that they collide; redeliveries under new ids;
/// repeated ids; refunds; expiries around `newYear`. Most events are plausible StoreKit flows,
/// some are not, so every error code shows up.
struct EventStreamGenerator {
    var random: SeededGenerator
    /// Apple's sale and renewal details (API 1.15–1.21) come from a generator of their own, so
    /// that the streams of `random` stay what they were before the ledger kept them.
    var details: SeededGenerator
    let products = wordGameCatalog.products.map(\.id)
    var emitted: [Event] = []
    var clock = newYear
    var counter = 0

    init(seed: UInt64) {
        random = SeededGenerator(seed: seed)
        details = SeededGenerator(seed: seed ^ 0x5A1E_DE7A)
    }

    private mutating func pick<T>(_ items: [T]) -> T {
        items[Int.random(in: 0..<items.count, using: &random)]
    }

    private mutating func chance(_ percent: Int) -> Bool {
        Int.random(in: 0..<100, using: &random) < percent
    }

    mutating func events(_ count: Int) -> [Event] {
        var result: [Event] = []
        result.reserveCapacity(count)
        for _ in 0..<count {
            var event = next()
            // Now and then a call to Apple recorded in its place, from the details' generator
            // (the other events stay those of `random`).
            if detail(1) {
                let customer = Int.random(in: 100...103, using: &details)
                event = .appTransaction(account: event.account, signedAt: event.at, AppTransactionInfo(
                    appTransaction: "71\(customer)", originalPurchasedAt: detail(70) ? detailDay() : nil,
                    originalApplicationVersion: detail(70) ? "1.\(Int.random(in: 0...3, using: &details))" : nil,
                    applicationVersion: detail(50) ? "2.0" : nil, originalPlatform: detail(50) ? "iOS" : nil,
                    preorderedAt: detail(10) ? detailDay() : nil, environment: detail(60) ? .sandbox : nil), customerHandle: UInt64(customer))
            } else if detail(2) {
                event = .appStoreCall(account: event.account, at: event.at, AppStoreCall(
                    call: detail(50) ? .setAppAccountToken : .finishTransaction, transaction: "\(1_000_000 + Int.random(in: 1...16, using: &details))",
                    outcome: detail(80) ? .accepted : .refused, appAccountToken: detail(50) ? "7e3fb20b-4cdb-47cc-936d-99d65f608138" : nil,
                    environment: detail(50) ? .sandbox : nil, status: detail(70) ? 200 : nil, error: detail(20) ? "refused" : nil),
                    personalHandle: 1)
            }
            var joining: Event?
            // Now and then a purchase moved or shared between accounts, from an account that
            // reported one (it may not hold it any more: then the move is refused, and so is
            // its second half).
            if detail(6), let (owner, chain) = reportedChain() {
                let others = ["ana", "ben", "cleo"].filter { $0 != owner }
                let other = others[Int.random(in: 0..<others.count, using: &details)]
                if detail(30) {
                    event = .share(originalTransaction: chain, from: owner, to: other, at: event.at)
                } else {
                    let pair = Event.transfer(originalTransaction: chain, from: owner, to: other, at: event.at)
                    (event, joining) = (pair[0], pair[1])
                }
            }
            for event in [event] + (joining.map { [$0] } ?? []) {
                emitted.append(event)
                result.append(event)
            }
        }
        return result
    }

    /// An account and chain of a purchase or restore emitted so far, picked by `details`.
    private mutating func reportedChain() -> (account: String, chain: String)? {
        let reported = emitted.compactMap { event -> (String, String)? in
            guard case .transactionUpdated(let update) = event.payload, update.state == .purchased || update.state == .restored,
                  let transaction = update.transaction else { return nil }
            return (event.account, update.originalTransaction ?? transaction)
        }
        guard !reported.isEmpty else { return nil }
        return reported[Int.random(in: 0..<reported.count, using: &details)]
    }

    private mutating func next() -> Event {
        counter += 1
        clock = Timestamp(seconds: clock.seconds + Int64.random(in: 1...600, using: &random), nanoseconds: chance(20) ? 500_000_000 : 0)
        // Some events repeat an earlier id or an earlier content under a new id.
        if !emitted.isEmpty, chance(6) {
            var copy = pick(emitted)
            if chance(50) { copy.id = "e\(counter)" }
            return copy
        }
        let account = pick(["ana", "ben", "cleo"])
        let payment = "p\(Int.random(in: 1...8, using: &random))"
        let transaction = "\(1_000_000 + Int.random(in: 1...16, using: &random))"
        let id = "e\(counter)"
        // The store's reports, signed up to two days before they arrive (Apple's order is not
        // the log's).
        if chance(12) {
            let signedAt = Timestamp(seconds: clock.seconds - Int64.random(in: 0...172_800, using: &random))
            return Event(id: id, account: account, at: signedAt, payload: storeReport(transaction: transaction))
        }
        // Refund requests: consents (in any order of `at`), Apple's requests and the answers.
        if chance(4) {
            let payload: Event.Payload = switch Int.random(in: 0..<3, using: &random) {
            case 0: .consumptionConsent(ConsumptionConsent(consented: chance(60)))
            case 1: .consumptionRequest(ConsumptionRequest(
                transaction: transaction, reason: chance(50) ? "UNINTENDED_PURCHASE" : nil,
                environment: chance(50) ? pick(StoreEnvironment.allCases) : nil))
            default: .consumptionAnswer(ConsumptionAnswer(
                request: "e\(Int.random(in: 1...max(1, counter), using: &random))", transaction: transaction,
                outcome: pick(ConsumptionAnswerOutcome.allCases), deliveryStatus: chance(70) ? "DELIVERED" : nil,
                consumptionPercentage: chance(50) ? Int.random(in: 0...100_000, using: &random) : nil,
                refundPreference: chance(30) ? "DECLINE" : nil, sampleContentProvided: chance(50) ? chance(50) : nil,
                status: chance(60) ? pick([202, 400, 404]) : nil, error: chance(20) ? "Transaction id not found." : nil))
            }
            let at = Timestamp(seconds: clock.seconds - Int64.random(in: 0...86_400, using: &random))
            return Event(id: id, account: account, at: at, payload: payload)
        }
        let payload: Event.Payload
        switch Int.random(in: 0..<100, using: &random) {
        case 0..<18:
            payload = .paymentAdded(PaymentAdded(
                payment: payment, product: chance(5) ? "com.example.unknown" : pick(products),
                quantity: chance(30) ? Int.random(in: 1...3, using: &random) : nil))
        case 18..<55:
            let state = pick(TransactionState.allCases)
            let expires = chance(30) ? Timestamp(seconds: newYear.seconds + Int64.random(in: -3...3, using: &random) * 86_400) : nil
            payload = .transactionUpdated(TransactionUpdated(
                payment: payment, state: state,
                transaction: state == .purchased || state == .restored ? transaction : nil,
                originalTransaction: state == .restored || chance(25) ? "\(1_000_000 + Int.random(in: 1...16, using: &random))" : nil,
                error: state == .failed ? pick(["paymentCancelled", "unknown"]) : nil,
                expiresAt: expires,
                product: chance(40) ? pick(products) : nil))
        case 55..<70:
            payload = .downloadUpdated(DownloadUpdated(
                payment: payment, download: "d\(Int.random(in: 1...2, using: &random))", state: pick(DownloadState.allCases),
                progress: chance(80) ? Double(Int.random(in: 0...4, using: &random)) / 4 : nil,
                timeRemaining: chance(30) ? Double(Int.random(in: -1...30, using: &random)) : nil))
        case 70..<85:
            payload = .transactionFinished(TransactionFinished(payment: payment))
        case 85..<93:
            payload = .consumed(Consumed(item: pick(["hints", "com.example.gem"]), amount: Int64.random(in: 1...40, using: &random)))
        default:
            payload = .revoked(Revoked(transaction: transaction, reason: chance(50) ? "refund" : nil))
        }
        return Event(id: id, account: account, at: clock, payload: payload)
    }

    private mutating func storeReport(transaction: String) -> Event.Payload {
        let original = chance(50) ? transaction : "\(1_000_000 + Int.random(in: 1...16, using: &random))"
        let day = { (generator: inout Self) in
            Timestamp(seconds: newYear.seconds + Int64.random(in: -3...3, using: &generator.random) * 86_400)
        }
        if chance(25) {
            return .renewalInfo(withRenewalDetails(RenewalInfo(
                originalTransaction: original, product: chance(50) ? pick(products) : nil,
                renewsTo: chance(50) ? pick(products) : nil, willRenew: chance(70) ? chance(50) : nil,
                billingRetry: chance(60) ? chance(50) : nil, gracePeriodEndsAt: chance(40) ? day(&self) : nil,
                expirationIntent: chance(30) ? Int.random(in: 1...5, using: &random) : nil,
                environment: chance(70) ? pick(StoreEnvironment.allCases) : nil)))
        }
        let revoked = chance(25)
        return .storeTransaction(withSaleDetails(StoreTransaction(
            transaction: transaction, originalTransaction: chance(80) ? original : nil,
            product: chance(5) ? "com.example.unknown" : pick(products),
            purchasedAt: chance(80) ? day(&self) : nil, expiresAt: chance(50) ? day(&self) : nil,
            subscriptionGroup: chance(30) ? "g\(Int.random(in: 1...2, using: &random))" : nil,
            ownership: chance(70) ? pick(StoreOwnership.allCases) : nil,
            environment: chance(70) ? pick(StoreEnvironment.allCases) : nil,
            price: chance(50) ? Int64.random(in: 0...99_990, using: &random) : nil,
            currency: chance(50) ? pick(["USD", "EUR"]) : nil, storefront: chance(30) ? "USA" : nil,
            revokedAt: revoked ? day(&self) : nil, revocationReason: revoked && chance(50) ? Int.random(in: 0...1, using: &random) : nil,
            revocationType: revoked && chance(50) ? pick(StoreRevocationType.allCases) : nil,
            revocationPercentage: revoked && chance(30) ? Int.random(in: 0...100_000, using: &random) : nil,
            upgraded: chance(10) ? true : nil, source: chance(30) ? "notification TEST" : nil)))
    }

    private mutating func detail(_ percent: Int) -> Bool {
        Int.random(in: 0..<100, using: &details) < percent
    }

    private mutating func detailDay() -> Timestamp {
        Timestamp(seconds: newYear.seconds + Int64.random(in: -400...400, using: &details) * 86_400)
    }

    /// Some of Apple's newer fields, on a third of the reports, with values Apple may add later.
    private mutating func withSaleDetails(_ fact: StoreTransaction) -> StoreTransaction {
        guard detail(35) else { return fact }
        var fact = fact
        fact.originalPurchasedAt = detail(60) ? detailDay() : nil
        fact.webOrderLineItem = detail(50) ? "\(Int.random(in: 1...99_999, using: &details))" : nil
        fact.storefrontId = detail(50) ? "143441" : nil
        fact.transactionReason = detail(50) ? (detail(50) ? "PURCHASE" : "RENEWAL") : nil
        if detail(40) {
            fact.offerType = Int.random(in: 1...5, using: &details)
            fact.offerIdentifier = detail(70) ? "offer.\(Int.random(in: 1...3, using: &details))" : nil
            fact.offerDiscountType = detail(80) ? (detail(80) ? "ONE_TIME" : "A_TYPE_APPLE_ADDS_LATER") : nil
            fact.offerPeriod = detail(60) ? "P1M" : nil
        }
        fact.appTransaction = detail(60) ? "71\(Int.random(in: 100...103, using: &details))" : nil
        fact.appAccountToken = detail(30) ? (detail(10) ? "" : "7e3fb20b-4cdb-47cc-936d-99d65f608138") : nil
        // Apple's proof, kept apart from the record in format 2.
        fact.signed = detail(25) ? "eyJhbGciOiJFUzI1NiJ9.eyJ0cmFuc2FjdGlvbklkIjoi\(fact.transaction)In0.c2lnbmF0dXJl" : nil
        if detail(30) {
            fact.billingPlanType = "MONTHLY"
            fact.commitmentBillingPeriod = Int.random(in: 1...12, using: &details)
            fact.commitmentBillingPeriods = detail(80) ? 12 : nil
            fact.commitmentExpiresAt = detail(80) ? detailDay() : nil
            fact.commitmentPrice = detail(60) ? Int64.random(in: 0...999_990, using: &details) : nil
        }
        return fact
    }

    private mutating func withRenewalDetails(_ info: RenewalInfo) -> RenewalInfo {
        guard detail(35) else { return info }
        var info = info
        info.renewalPrice = detail(60) ? Int64.random(in: 0...99_990, using: &details) : nil
        info.currency = info.renewalPrice != nil ? "USD" : nil
        info.renewsAt = detail(50) ? detailDay() : nil
        info.recentSubscriptionStartedAt = detail(40) ? detailDay() : nil
        info.priceIncreaseStatus = detail(30) ? Int.random(in: 0...1, using: &details) : nil
        if detail(30) {
            info.offerType = Int.random(in: 1...4, using: &details)
            info.offerIdentifier = "offer.1"
            info.offerDiscountType = "FREE_TRIAL"
            info.offerPeriod = "P1W"
        }
        info.eligibleWinBackOffers = detail(30) ? Array(["wb1", "wb2", "wb3"].prefix(Int.random(in: 0...3, using: &details))) : nil
        info.appTransaction = detail(60) ? "71\(Int.random(in: 100...103, using: &details))" : nil
        info.appAccountToken = detail(30) ? "7e3fb20b-4cdb-47cc-936d-99d65f608138" : nil
        info.signed = detail(20) ? "eyJhbGciOiJFUzI1NiJ9.eyJvcmlnaW5hbFRyYW5zYWN0aW9uSWQiOiI\(info.originalTransaction)In0.c2ln" : nil
        if detail(25) {
            info.billingPlanType = "MONTHLY"
            info.commitmentRenewsTo = "com.example.gold.monthly"
            info.commitmentWillRenew = detail(50)
            info.commitmentBillingPlanType = detail(50) ? "MONTHLY" : "BILLED_UPFRONT"
            info.commitmentRenewsAt = detailDay()
            info.commitmentRenewalPrice = Int64.random(in: 0...999_990, using: &details)
        }
        return info
    }
}
