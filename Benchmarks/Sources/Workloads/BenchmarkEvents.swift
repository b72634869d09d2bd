import PurchaseLedger

/// Event streams for the benchmarks: purchase flows (addPayment → purchasing → purchased →
/// finish, and a consumption after a consumable), about 200 bytes of JSON each, spread over
/// `accounts` accounts. Deterministic: the same arguments give the same events.
public struct BenchmarkEvents: Sendable {
    public static let catalog = try! Catalog(products: [
        .init(id: "com.example.tenhints", type: .consumable, grants: ["hints": 10]),
        .init(id: "com.example.hundredhints", type: .consumable, grants: ["hints": 100]),
        .init(id: "com.example.hardwords", type: .nonConsumable),
        .init(id: "com.example.ioswords", type: .nonConsumable),
        .init(id: "com.example.pro.month", type: .autoRenewable, group: "pro"),
    ])

    public let accounts: Int
    /// Distinguishes streams so that several can go into one ledger (ids stay unique).
    public let prefix: String
    private var flow = 0
    private var emitted = 0
    private var pending: [Event] = []
    /// How event ids are made.
    public enum EventIDs: Sendable, CaseIterable {
        /// The prefix and a counter: each id sorts after the one before (as a counter's or a
        /// time-ordered id's do).
        case inOrder
        /// The prefix and 32 random hex digits, as an app's UUIDs: each id lands anywhere
        /// among the ids before it.
        case inNoOrder
    }

    public let eventIDs: EventIDs
    private var random: SplitMix64

    public init(accounts: Int = 50_000, prefix: String = "e", seed: UInt64 = 1, eventIDs: EventIDs = .inOrder) {
        self.accounts = accounts
        self.prefix = prefix
        self.random = SplitMix64(seed: seed)
        self.eventIDs = eventIDs
    }

    private mutating func nextRandom() -> UInt64 {
        random.next()
    }

    /// The next `count` events.
    public mutating func next(_ count: Int) -> [Event] {
        var events: [Event] = []
        events.reserveCapacity(count)
        while events.count < count {
            if pending.isEmpty { startFlow() }
            events.append(pending.removeFirst())
        }
        return events
    }

    private mutating func startFlow() {
        flow += 1
        let account = "account-\(pad(Int(nextRandom() % UInt64(accounts)), 7))"
        let payment = "\(prefix)-payment-\(pad(flow, 9))"
        let product = Self.catalog.products[Int(nextRandom() % UInt64(Self.catalog.products.count))]
        let transaction = "\(prefix)\(pad(flow, 12))"
        func event(_ payload: Event.Payload) -> Event {
            emitted += 1
            return Event(id: nextEventID(), account: account,
                         at: Timestamp(seconds: 1_767_225_600 + Int64(emitted)), payload: payload)
        }
        pending.append(event(.paymentAdded(PaymentAdded(payment: payment, product: product.id))))
        pending.append(event(.transactionUpdated(TransactionUpdated(payment: payment, state: .purchasing))))
        pending.append(event(.transactionUpdated(TransactionUpdated(payment: payment, state: .purchased, transaction: transaction))))
        pending.append(event(.transactionFinished(TransactionFinished(payment: payment))))
        if product.type == .consumable {
            pending.append(event(.consumed(Consumed(item: "hints", amount: 1))))
        }
    }

    private mutating func nextEventID() -> String {
        switch eventIDs {
        case .inOrder:
            return "\(prefix)-evt-\(pad(emitted, 10))"
        case .inNoOrder:
            let high = String(nextRandom(), radix: 16), low = String(nextRandom(), radix: 16)
            return "\(prefix)-" + String(repeating: "0", count: 16 - high.count) + high + String(repeating: "0", count: 16 - low.count) + low
        }
    }

    private func pad(_ value: Int, _ width: Int) -> String {
        let digits = String(value)
        return String(repeating: "0", count: max(0, width - digits.count)) + digits
    }
}
