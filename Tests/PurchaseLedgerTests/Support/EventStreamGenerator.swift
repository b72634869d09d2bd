import LedgerTestSupport
@testable import PurchaseLedger

/// Generates event streams of every type that exercise every rule: small pools of accounts,
/// payments, store transactions and downloads so that they collide; redeliveries under new ids;
/// repeated ids; refunds; expiries around `newYear`. Most events are plausible StoreKit flows,
/// some are not, so every error code shows up.
struct EventStreamGenerator {
    var random: SeededGenerator
    let products = wordGameCatalog.products.map(\.id)
    var emitted: [Event] = []
    var clock = newYear
    var counter = 0

    init(seed: UInt64) {
        random = SeededGenerator(seed: seed)
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
            let event = next()
            emitted.append(event)
            result.append(event)
        }
        return result
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
            return .renewalInfo(RenewalInfo(
                originalTransaction: original, product: chance(50) ? pick(products) : nil,
                renewsTo: chance(50) ? pick(products) : nil, willRenew: chance(70) ? chance(50) : nil,
                billingRetry: chance(60) ? chance(50) : nil, gracePeriodEndsAt: chance(40) ? day(&self) : nil,
                expirationIntent: chance(30) ? Int.random(in: 1...5, using: &random) : nil,
                environment: chance(70) ? pick(StoreEnvironment.allCases) : nil))
        }
        let revoked = chance(25)
        return .storeTransaction(StoreTransaction(
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
            upgraded: chance(10) ? true : nil, source: chance(30) ? "notification TEST" : nil))
    }
}
