import Foundation
import Testing
@testable import PurchaseLedger
import LedgerTestSupport

/// Order never matters: for generated subscription and consumable histories, every
/// interleaving the App Store and a device could produce (store first, device first,
/// duplicates, a refund before its purchase, a reversal before its refund) ends with the same
/// entitlements, balances, subscription statuses, store reports and unfinished set.
///
/// Each history is appended in its canonical order (the device, then the store in Apple's
/// order) and in shuffled orders, each under its own account of one ledger per backend; the
/// projections, with the account's prefix taken out of its transaction ids, must be equal.
struct OrderIndependenceTests {
    /// What one source reports at once: the device's one event, or the events the server
    /// appends for one notification, in the server's order.
    typealias Report = [Event]

    /// One account's history: the device's reports (in the device's order) and the store's.
    struct History {
        var device: [Report]
        var store: [Report]
    }

    static let hour: Int64 = 3600
    static let subscription = "com.example.pro.month"

    /// A history under `account`, whose transaction ids start with the account (ids are global).
    static func history(_ account: String, random: inout SeededGenerator) -> History {
        var device: [Report] = []
        var store: [Report] = []
        var counter = 0
        func id() -> String { counter += 1; return "\(account)-\(counter)" }
        func time(_ hours: Int64) -> Timestamp { Timestamp(seconds: newYear.seconds + hours * hour) }
        func storePurchase(_ transaction: String, original: String, product: String, bought: Int64, expires: Int64?) -> Report {
            let notification = id()
            let payment = "appstore:" + transaction
            return [
                .transactionUpdated(id: notification, account: account, at: time(bought), TransactionUpdated(
                    payment: payment, state: .purchased, transaction: transaction, originalTransaction: original,
                    expiresAt: expires.map(time), product: product)),
                .transactionFinished(id: notification + "/finish", account: account, at: time(bought), payment: payment),
                .storeTransaction(id: notification + "/transaction", account: account, signedAt: time(bought), StoreTransaction(
                    transaction: transaction, originalTransaction: original, product: product, purchasedAt: time(bought),
                    expiresAt: expires.map(time), environment: .sandbox)),
            ]
        }
        func storeReport(_ transaction: String, original: String, product: String, bought: Int64, expires: Int64?,
                         signed: Int64, revoked: Bool) -> Report {
            [.storeTransaction(id: id() + "/transaction", account: account, signedAt: time(signed), StoreTransaction(
                transaction: transaction, originalTransaction: original, product: product, purchasedAt: time(bought),
                expiresAt: expires.map(time), environment: .sandbox, revokedAt: revoked ? time(signed) : nil))]
        }
        func devicePurchase(_ transaction: String, original: String, product: String, bought: Int64, expires: Int64?, finish: Bool) {
            let payment = "device-" + transaction
            if product != subscription {
                device.append([.paymentAdded(id: id(), account: account, at: time(bought), payment: payment, product: product)])
            }
            device.append([.transactionUpdated(id: id(), account: account, at: time(bought), TransactionUpdated(
                payment: payment, state: .purchased, transaction: transaction, originalTransaction: original,
                expiresAt: expires.map(time), product: product))])
            if finish {
                device.append([.transactionFinished(id: id(), account: account, at: time(bought), payment: payment)])
            }
        }

        // A subscription: periods of 24 hours, renewed a few times; the store may refund a
        // period (and reverse the refund), extend the last one, and report billing retry.
        let original = "\(account)-s1"
        let periods = Int.random(in: 1...4, using: &random)
        for period in 0..<periods {
            let transaction = "\(account)-s\(period + 1)"
            let bought = Int64(period) * 24
            store.append(storePurchase(transaction, original: original, product: subscription, bought: bought, expires: bought + 24))
            if Bool.random(using: &random) {
                devicePurchase(transaction, original: original, product: subscription, bought: bought, expires: bought + 24,
                               finish: Bool.random(using: &random))
            }
            if Int.random(in: 0..<3, using: &random) == 0 {
                store.append(storeReport(transaction, original: original, product: subscription, bought: bought, expires: bought + 24,
                                         signed: bought + 2, revoked: true))
                if Bool.random(using: &random) {
                    store.append(storeReport(transaction, original: original, product: subscription, bought: bought, expires: bought + 24,
                                             signed: bought + 3, revoked: false))
                }
            }
        }
        let last = Int64(periods - 1) * 24
        if Bool.random(using: &random) {
            store.append(storeReport("\(account)-s\(periods)", original: original, product: subscription, bought: last,
                                     expires: last + 72, signed: last + 4, revoked: false))
        }
        if Bool.random(using: &random) {
            store.append([.renewalInfo(id: id() + "/renewal", account: account, signedAt: time(last + 24), RenewalInfo(
                originalTransaction: original, willRenew: true, billingRetry: true, gracePeriodEndsAt: time(last + 30)))])
            store.append([.renewalInfo(id: id() + "/renewal", account: account, signedAt: time(last + 1), RenewalInfo(
                originalTransaction: original, willRenew: true, billingRetry: false))])
        }

        // Consumables: each bought once, reported by the store and perhaps by the device;
        // perhaps refunded, perhaps with the refund reversed.
        for index in 1...Int.random(in: 1...3, using: &random) {
            let transaction = "\(account)-c\(index)"
            let bought = Int64(index)
            store.append(storePurchase(transaction, original: transaction, product: "com.example.tenhints", bought: bought, expires: nil))
            if Bool.random(using: &random) {
                devicePurchase(transaction, original: transaction, product: "com.example.tenhints", bought: bought, expires: nil,
                               finish: Bool.random(using: &random))
            }
            if Bool.random(using: &random) {
                store.append(storeReport(transaction, original: transaction, product: "com.example.tenhints", bought: bought,
                                         expires: nil, signed: bought + 5, revoked: true))
                if Bool.random(using: &random) {
                    store.append(storeReport(transaction, original: transaction, product: "com.example.tenhints", bought: bought,
                                             expires: nil, signed: bought + 6, revoked: false))
                }
            }
        }
        return History(device: device, store: store)
    }

    /// An interleaving: the device's reports in their order, the store's in any order, merged
    /// at random, with some reports delivered twice.
    static func shuffled(_ history: History, random: inout SeededGenerator) -> [Report] {
        var store = history.store.shuffled(using: &random)
        var device = history.device[...]
        var merged: [Report] = []
        while !store.isEmpty || !device.isEmpty {
            let fromStore = device.isEmpty || (!store.isEmpty && Bool.random(using: &random))
            merged.append(fromStore ? store.removeLast() : device.removeFirst())
            if Int.random(in: 0..<8, using: &random) == 0, let again = merged.randomElement(using: &random) {
                merged.append(again)
            }
        }
        return merged
    }

    /// A projection with `account-` taken out of ids and the unfinished entries in payment
    /// order (their order of opening follows arrival).
    static func normalized(_ projection: AccountProjection?, _ account: String) -> String {
        guard var projection else { return "none" }
        projection.unfinished.sort { utf8Order($0.payment, $1.payment) }
        projection.account = ""
        return projection.json.replacingOccurrences(of: account + "-", with: "")
    }

    /// Every instant where one of the history's facts takes effect (a purchase, an expiry, a
    /// revocation, a grace period's end, a signing), one millisecond before, at, and after,
    /// with a few round hours: between them every answer is the same.
    static func asOfTimes(_ history: History) -> [Timestamp] {
        var instants: Set<Timestamp> = []
        for event in (history.device + history.store).joined() {
            instants.insert(event.at)
            switch event.payload {
            case .storeTransaction(let fact):
                for case let time? in [fact.purchasedAt, fact.expiresAt, fact.revokedAt] { instants.insert(time) }
            case .renewalInfo(let info):
                if let time = info.gracePeriodEndsAt { instants.insert(time) }
            case .transactionUpdated(let update):
                if let time = update.expiresAt { instants.insert(time) }
            default:
                break
            }
        }
        let millisecond: UInt32 = 1_000_000
        var times: Set<Timestamp> = Set([0, 12, 200].map { Timestamp(seconds: newYear.seconds + $0 * hour) })
        for instant in instants {
            times.insert(instant)
            times.insert(Timestamp(seconds: instant.seconds, nanoseconds: instant.nanoseconds + millisecond))
            times.insert(instant.nanoseconds >= millisecond
                ? Timestamp(seconds: instant.seconds, nanoseconds: instant.nanoseconds - millisecond)
                : Timestamp(seconds: instant.seconds - 1, nanoseconds: instant.nanoseconds + 1_000_000_000 - millisecond))
        }
        return times.sorted()
    }

    /// Each order is read three ways, which must agree: the live projections, the account
    /// rebuilt from its own history, and a replay that starts from a snapshot written in the
    /// middle of that order's reports.
    @Test(arguments: Backend.available)
    func everyInterleavingEndsTheSame(on backend: Backend) async throws {
        try await withLedger(on: backend) { ledger, _ in
            var random = SeededGenerator(seed: 1729)
            for scenario in 0..<12 {
                var answers: [String] = []
                for order in 0..<6 {
                    let account = "h\(scenario)o\(order)"
                    var local = SeededGenerator(seed: UInt64(scenario))
                    let history = Self.history(account, random: &local)
                    let reports = order == 0 ? history.device + history.store : Self.shuffled(history, random: &random)
                    for (index, report) in reports.enumerated() {
                        if index == reports.count / 2 { _ = try await ledger.writeSnapshot() }
                        for outcome in try await ledger.append(contentsOf: report) {
                            guard case .success = outcome else {
                                Issue.record("scenario \(scenario) order \(order): \(outcome)")
                                continue
                            }
                        }
                    }
                    let replayed = try ledger.state(at: ledger.position)
                    var answer = ""
                    for time in Self.asOfTimes(history) {
                        let live = Self.normalized(try ledger.projection(of: account, asOf: time), account)
                        let rebuilt = Self.normalized(try ledger.projection(of: account, atPosition: ledger.position, asOf: time), account)
                        let fromSnapshot = Self.normalized(replayed.projection(of: account, asOf: time), account)
                        #expect(rebuilt == live, "scenario \(scenario) order \(order) at \(time): rebuilt from history")
                        #expect(fromSnapshot == live, "scenario \(scenario) order \(order) at \(time): from a snapshot")
                        answer += "\(time) \(live)\n"
                    }
                    answers.append(answer)
                }
                for (order, answer) in answers.enumerated().dropFirst() where answer != answers[0] {
                    Issue.record("scenario \(scenario): order \(order) ends differently:\n\(answer)\nthan the canonical order:\n\(answers[0])")
                }
            }
        }
    }
}
