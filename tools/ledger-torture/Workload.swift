import PurchaseLedger

/// The events a torture child appends: purchase flows of every kind (consumables with a
/// consumption, word packs with a download, subscriptions, refunds), all valid, so that every
/// one of them is appended exactly once. Each appender (`lane`) has accounts of its own, so
/// concurrent lanes never depend on each other's order.
struct Workload {
    static let catalog = try! Catalog(products: [
        .init(id: "com.example.tenhints", type: .consumable, grants: ["hints": 10]),
        .init(id: "com.example.hundredhints", type: .consumable, grants: ["hints": 100]),
        .init(id: "com.example.hardwords", type: .nonConsumable),
        .init(id: "com.example.pro.month", type: .autoRenewable),
    ])

    let run: Int
    let lane: Int
    private var random: UInt64
    private var flow = 0
    private var count = 0

    init(run: Int, lane: Int, seed: UInt64) {
        self.run = run
        self.lane = lane
        random = seed &+ UInt64(run) &* 1_000_003 &+ UInt64(lane) &* 7919
    }

    mutating func next() -> UInt64 {
        random &+= 0x9E37_79B9_7F4A_7C15
        var z = random
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D2_49D1_33B8_11EB
        return z ^ (z >> 31)
    }

    /// One purchase flow, in order.
    mutating func flowEvents() -> [Event] {
        flow += 1
        let account = "r\(run)-l\(lane)-a\(next() % 40)"
        let payment = "r\(run)-l\(lane)-p\(flow)"
        let transaction = "t-r\(run)-l\(lane)-\(flow)"
        let at = Timestamp(seconds: 1_767_225_600 + Int64(run * 100_000 + flow))
        var events: [Event] = []
        func event(_ payload: Event.Payload) {
            count += 1
            events.append(Event(id: "e-r\(run)-l\(lane)-\(count)", account: account, at: at, payload: payload))
        }
        switch next() % 4 {
        case 0, 1:
            let product = next() % 2 == 0 ? "com.example.tenhints" : "com.example.hundredhints"
            event(.paymentAdded(PaymentAdded(payment: payment, product: product)))
            event(.transactionUpdated(TransactionUpdated(payment: payment, state: .purchasing)))
            event(.transactionUpdated(TransactionUpdated(payment: payment, state: .purchased, transaction: transaction)))
            event(.transactionFinished(TransactionFinished(payment: payment)))
            // Spend some of the credit, or refund it: never both, so a balance never falls short.
            if next() % 5 == 0 {
                event(.revoked(Revoked(transaction: transaction, reason: "refund")))
            } else {
                event(.consumed(Consumed(item: "hints", amount: 3)))
            }
        case 2:
            event(.paymentAdded(PaymentAdded(payment: payment, product: "com.example.hardwords")))
            event(.transactionUpdated(TransactionUpdated(payment: payment, state: .purchased, transaction: transaction)))
            event(.downloadUpdated(DownloadUpdated(payment: payment, download: "d", state: .active, progress: 0.5)))
            event(.downloadUpdated(DownloadUpdated(payment: payment, download: "d", state: .finished, progress: 1)))
            event(.transactionFinished(TransactionFinished(payment: payment)))
        default:
            event(.transactionUpdated(TransactionUpdated(
                payment: payment, state: .purchased, transaction: transaction,
                expiresAt: Timestamp(seconds: at.seconds + 86_400), product: "com.example.pro.month")))
            event(.transactionFinished(TransactionFinished(payment: payment)))
        }
        return events
    }
}
