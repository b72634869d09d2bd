@testable import PurchaseLedger

/// A long subscriber: `count` hourly sandbox renewals of one chain ("10000"), each lasting
/// fifty minutes (so an hour's gap after each makes every renewal an interval of its own), from
/// the first of January 2026, events `r0`, `r1`, … of `account`; appended `chunk` at a time.
enum LongSubscriber {
    static func renewals(_ count: Int, of account: String = "long") -> [Event] {
        let start: Int64 = 1_767_225_600
        return (0..<count).map { index in
            let bought = Timestamp(seconds: start + Int64(index) * 3_600)
            return .storeTransaction(id: "r\(index)", account: account, signedAt: bought, StoreTransaction(
                transaction: "\(10_000 + index)", originalTransaction: "10000", product: OrderIndependenceTests.subscription, purchasedAt: bought,
                expiresAt: Timestamp(seconds: bought.seconds + 3_000), environment: .sandbox))
        }
    }

    static func append(_ events: [Event], to ledger: Ledger, chunk: Int) async throws {
        for start in stride(from: 0, to: events.count, by: chunk) {
            for result in try await ledger.append(contentsOf: Array(events[start..<min(start + chunk, events.count)])) { _ = try result.get() }
        }
    }
}
