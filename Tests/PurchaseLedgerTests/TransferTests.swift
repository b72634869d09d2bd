import Foundation
import Testing
@testable import PurchaseLedger
import LedgerTestSupport
import PurchaseLedgerLocation

/// Restores across accounts: a `transferred` pair moves a purchase's chain from one account to
/// another. The account it leaves stops owning it, the one it joins holds its transactions
/// (its device's report of them is accepted, another account's refused), Apple's later
/// reports follow it, a transfer back restores the first account, and a reopened ledger, a
/// replay and `verify` all agree with what appending built.
struct TransferTests {
    static let catalog = try! Catalog(products: [
        .init(id: "pro.monthly", type: .autoRenewable, group: "pro"),
        .init(id: "lifetime", type: .nonConsumable),
        .init(id: "coins", type: .consumable, grants: ["coin": 10]),
    ])

    static let now = Timestamp.now()
    static func days(_ count: Int) -> Timestamp { Timestamp(seconds: now.seconds + Int64(count) * 86_400) }

    /// A StoreKit 2 purchase as the server records one: the purchase on entry `appstore:<id>`,
    /// and Apple's report.
    static func purchase(_ id: String, account: String, transaction: String, original: String, product: String, expires: Int?) -> [Event] {
        [
            .transactionUpdated(id: id, account: account, at: days(-1), TransactionUpdated(
                payment: "appstore:" + transaction, state: .purchased, transaction: transaction, originalTransaction: original,
                expiresAt: expires.map(days), product: product)),
            .storeTransaction(id: id + "/report", account: account, signedAt: days(-1), StoreTransaction(
                transaction: transaction, originalTransaction: original, product: product, purchasedAt: days(-1),
                expiresAt: expires.map(days))),
        ]
    }

    static func appended(_ outcomes: [AppendResult]) throws {
        for outcome in outcomes {
            guard case .success(.appended) = outcome else { throw TestFailure("not appended: \(outcome)") }
        }
    }

    static func refusal(_ outcome: AppendResult?) -> LedgerError.Code? {
        if case .failure(let error)? = outcome { return error.code }
        return nil
    }

    @Test(arguments: Backend.available)
    func aTransferMovesTheChainAndATransferBackReturnsIt(on backend: Backend) async throws {
        try await withLocation(on: backend) { location in
            var positions: [String: UInt64] = [:]
            var answers: [String: [String]] = [:]
            do {
                let ledger = try Ledger.open(location: location, catalog: Self.catalog, configuration: .testing)
                do {
                    try Self.appended(try await ledger.append(contentsOf:
                        Self.purchase("a1", account: "A", transaction: "t1", original: "t1", product: "pro.monthly", expires: 30)
                        + Self.purchase("a2", account: "A", transaction: "L1", original: "L1", product: "lifetime", expires: nil)
                        + Self.purchase("a3", account: "A", transaction: "C1", original: "C1", product: "coins", expires: nil)))
                    #expect(try ledger.entitlements(of: "A") == ["lifetime", "pro.monthly"])
                    positions["before"] = ledger.position

                    // What cannot move: a consumable, a chain the account does not hold, a transfer
                    // naming neither of its accounts or the same account twice.
                    let refused = try await ledger.append(contentsOf:
                        Event.transfer(originalTransaction: "C1", from: "A", to: "B", at: Self.now).prefix(1)
                        + Event.transfer(originalTransaction: "nothing", from: "A", to: "B", at: Self.now).prefix(1)
                        + [Event(id: "x1", account: "C", at: Self.now, payload: .transferred(Transferred(originalTransaction: "t1", from: "A", to: "B"))),
                           Event(id: "x2", account: "A", at: Self.now, payload: .transferred(Transferred(originalTransaction: "t1", from: "A", to: "A")))])
                    #expect(refused.map(Self.refusal) == [.notRestorable, .unknownTransaction, .invalidEvent, .invalidEvent])
                    #expect(ledger.position == positions["before"])

                    // The customer restores on account B: the subscription moves, the lifetime stays.
                    let transfer = Event.transfer(originalTransaction: "t1", from: "A", to: "B", at: Self.now)
                    try Self.appended(try await ledger.append(contentsOf: transfer))
                    positions["transferred"] = ledger.position
                    #expect(try ledger.entitlements(of: "A") == ["lifetime"])
                    #expect(try ledger.projection(of: "A")?.subscriptions.isEmpty == true)
                    #expect(try ledger.entitlements(of: "B") == [])
                    #expect(try ledger.account(holdingTransaction: "t1") == "A", "the index keeps the entry that credited it")
                    #expect(try ledger.owner(ofTransaction: "t1", chain: "t1") == "B")
                    #expect(try ledger.account(owningChain: "t1", namedBy: "A") == "B")
                    #expect(try ledger.account(owningChain: "L1", namedBy: "A") == "A")
                    // The same request again is a duplicate; another from A, which no longer holds it, is refused.
                    #expect(try await ledger.append(contentsOf: transfer).allSatisfy { if case .success(.duplicate) = $0 { true } else { false } })
                    let again = try await ledger.append(contentsOf: Event.transfer(originalTransaction: "t1", from: "A", to: "C", at: Timestamp(seconds: Self.now.seconds + 2)))
                    #expect(Self.refusal(again.first) == .unknownTransaction)

                    // B's device reports it: B holds and is entitled; A's device may no longer claim it.
                    try Self.appended(try await ledger.append(contentsOf:
                        Self.purchase("b1", account: "B", transaction: "t1", original: "t1", product: "pro.monthly", expires: 30)))
                    #expect(try ledger.entitlements(of: "B") == ["pro.monthly"])
                    let claim = try await ledger.append(contentsOf: [.transactionUpdated(id: "a4", account: "A", at: Self.now, TransactionUpdated(
                        payment: "again", state: .purchased, transaction: "t1", originalTransaction: "t1", product: "pro.monthly"))])
                    #expect(Self.refusal(claim.first) == .transactionAlreadyCredited)
                    // A report of the chain's next transaction that still reaches A (its token) is refused:
                    // the chain is B's now, and so are its new transactions.
                    let renewal = StoreTransaction(
                        transaction: "t2", originalTransaction: "t1", product: "pro.monthly", purchasedAt: Self.days(0), expiresAt: Self.days(60))
                    let stale = try await ledger.append(contentsOf: [.storeTransaction(id: "a5", account: "A", signedAt: Self.now, renewal)])
                    #expect(Self.refusal(stale.first) == .transactionAlreadyCredited)
                    #expect(try ledger.entitlements(of: "A") == ["lifetime"])
                    positions["atB"] = ledger.position
                    answers["A@B"] = try ledger.entitlements(of: "A")
                    answers["B@B"] = try ledger.entitlements(of: "B")

                    // And back to A, later: A owns it again (its own entries and reports count), B not.
                    try Self.appended(try await ledger.append(contentsOf: Event.transfer(
                        originalTransaction: "t1", from: "B", to: "A", at: Timestamp(seconds: Self.now.seconds + 1))))
                    try Self.appended(try await ledger.append(contentsOf: [.storeTransaction(id: "a6", account: "A", signedAt: Self.now, renewal)]))
                    #expect(try ledger.entitlements(of: "A") == ["lifetime", "pro.monthly"])
                    #expect(try ledger.projection(of: "A")?.subscriptions.first?.transaction == "t2")
                    #expect(try ledger.entitlements(of: "B") == [])
                    #expect(try ledger.owner(ofTransaction: "t1", chain: "t1") == "A")
                    #expect(try ledger.account(owningChain: "t1", namedBy: "B") == "A")
                    answers["A"] = try ledger.entitlements(of: "A")
                    answers["B"] = try ledger.entitlements(of: "B")

                    // The feed says A lost it by the transfer, and B gained it by its report.
                    let changes = try await ChangeFeedTests.collect(ledger.changes(follow: false)) { _ in false }
                    let leaving = try #require(changes.first { if case .event(transfer[0].id, .transferred) = $0.cause { true } else { false } })
                    #expect(leaving.account == "A")
                    #expect(leaving.differences.contains(.entitlementRevoked(product: "pro.monthly", reason: .transferred)))
                    #expect(changes.contains { $0.account == "B" && $0.differences.contains(.entitlementGranted(product: "pro.monthly")) })
                    _ = try await ledger.writeSnapshot()
                } catch {
                    await ledger.close()
                    throw error
                }
                await ledger.close()
            }

            // Reopened (from the snapshot), replayed from the log, and verified: the same answers.
            let reopened = try Ledger.open(location: location, catalog: Self.catalog, configuration: .testing)
            #expect(try reopened.entitlements(of: "A") == answers["A"])
            #expect(try reopened.entitlements(of: "B") == answers["B"])
            let replayed = try reopened.state(at: reopened.position)
            #expect(replayed.projection(of: "A", asOf: .now())?.entitlements == answers["A"])
            #expect(replayed.projection(of: "B", asOf: .now())?.entitlements == answers["B"])
            // At a position in between, what the accounts had then.
            let atB = try #require(positions["atB"])
            #expect(try reopened.projection(of: "A", atPosition: atB)?.entitlements == answers["A@B"])
            #expect(try reopened.projection(of: "B", atPosition: atB)?.entitlements == answers["B@B"])
            #expect(try reopened.projection(of: "A", atPosition: try #require(positions["before"]))?.entitlements == ["lifetime", "pro.monthly"])
            await reopened.close()
            let log = try LedgerLog.open(location: location)
            defer { log.close() }
            #expect(log.verify().isIntact)
        }
    }

    /// Sharing: the owner keeps the purchase, and the account it is shared with may report and
    /// hold its transactions too; a third account still may not.
    @Test(arguments: Backend.available)
    func aSharedPurchaseGrantsBothAccounts(on backend: Backend) async throws {
        try await withLocation(on: backend) { location in
            let ledger = try Ledger.open(location: location, catalog: Self.catalog, configuration: .testing)
            defer { Task { await ledger.close() } }
            try Self.appended(try await ledger.append(contentsOf:
                Self.purchase("a1", account: "A", transaction: "t1", original: "t1", product: "pro.monthly", expires: 30)
                + Self.purchase("a3", account: "A", transaction: "C1", original: "C1", product: "coins", expires: nil)))
            let refused = try await ledger.append(contentsOf: [
                Event.share(originalTransaction: "C1", from: "A", to: "B", at: Self.now),
                Event.share(originalTransaction: "t1", from: "D", to: "B", at: Self.now),
                Event(id: "x", account: "A", at: Self.now, payload: .shared(Transferred(originalTransaction: "t1", from: "A", to: "B"))),
            ])
            #expect(refused.map(Self.refusal) == [.notRestorable, .unknownTransaction, .invalidEvent])
            // Before the share, B's device may not report it.
            let early = try await ledger.append(contentsOf: Self.purchase("b0", account: "B", transaction: "t1", original: "t1", product: "pro.monthly", expires: 30))
            #expect(early.map(Self.refusal) == [.transactionAlreadyCredited, .transactionAlreadyCredited])

            let share = Event.share(originalTransaction: "t1", from: "A", to: "B", at: Self.now)
            try Self.appended(try await ledger.append(contentsOf: [share]
                + Self.purchase("b1", account: "B", transaction: "t1", original: "t1", product: "pro.monthly", expires: 30)))
            #expect(try ledger.entitlements(of: "A") == ["pro.monthly"])
            #expect(try ledger.entitlements(of: "B") == ["pro.monthly"])
            #expect(try ledger.account(holdingTransaction: "t1") == "A")
            #expect(try ledger.account("B", sharesChain: "t1", from: "A"))
            #expect(try !ledger.account("C", sharesChain: "t1", from: "A"))
            let again = try await ledger.append(contentsOf: [Event.share(originalTransaction: "t1", from: "A", to: "B", at: Self.days(1))])
            #expect(again.allSatisfy { if case .success(.duplicate) = $0 { true } else { false } })
            let third = try await ledger.append(contentsOf: Self.purchase("c1", account: "C", transaction: "t1", original: "t1", product: "pro.monthly", expires: 30))
            #expect(third.map(Self.refusal) == [.transactionAlreadyCredited, .transactionAlreadyCredited])

            let answers = try ["A", "B"].map { try ledger.entitlements(of: $0) }
            let replayed = try ledger.state(at: ledger.position)
            #expect(["A", "B"].map { replayed.projection(of: $0, asOf: .now())?.entitlements ?? [] } == answers)
            await ledger.close()
            let log = try LedgerLog.open(location: location)
            defer { log.close() }
            #expect(log.verify().isIntact)
        }
    }

    /// Once a chain moved, its new transactions (a renewal, a restore) are its owner's: the
    /// account it left may not report them, neither by its device nor by a report of Apple's
    /// that still names it, and a third account may not either; the owner's report is appended.
    /// (Issue 41, point 12: before, only transactions an entry already held were checked.)
    @Test(arguments: Backend.available)
    func aMovedChainsNewTransactionsAreItsOwnersOnly(on backend: Backend) async throws {
        try await withLocation(on: backend) { location in
            let ledger = try Ledger.open(location: location, catalog: Self.catalog, configuration: .testing)
            defer { Task { await ledger.close() } }
            try Self.appended(try await ledger.append(contentsOf:
                Self.purchase("a1", account: "A", transaction: "t1", original: "t1", product: "pro.monthly", expires: 30)
                + Event.transfer(originalTransaction: "t1", from: "A", to: "B", at: Self.now)))
            let before = ledger.position
            let renewal = StoreTransaction(
                transaction: "t3", originalTransaction: "t1", product: "pro.monthly", purchasedAt: Self.days(0), expiresAt: Self.days(60))
            let refused = try await ledger.append(contentsOf: [
                .storeTransaction(id: "r-a", account: "A", signedAt: Self.now, renewal),
                .transactionUpdated(id: "d-a", account: "A", at: Self.now, TransactionUpdated(
                    payment: "p3", state: .purchased, transaction: "t3", originalTransaction: "t1", product: "pro.monthly")),
                .transactionUpdated(id: "d-c", account: "C", at: Self.now, TransactionUpdated(
                    payment: "p3", state: .restored, transaction: "t4", originalTransaction: "t1", product: "pro.monthly")),
                .storeTransaction(id: "r-c", account: "C", signedAt: Self.now, renewal),
            ])
            #expect(refused.map(Self.refusal) == Array(repeating: .transactionAlreadyCredited, count: 4))
            #expect(ledger.position == before)
            #expect(try ledger.entitlements(of: "C") == [])
            #expect(try ledger.entitlements(of: "A") == [])
            // No refusal names another account.
            for case .failure(let error) in refused { #expect(!error.message.contains("\"B\"") && !error.message.contains("\"A\"")) }
            try Self.appended(try await ledger.append(contentsOf: [.storeTransaction(id: "r-b", account: "B", signedAt: Self.now, renewal)]))
            #expect(try ledger.entitlements(of: "B") == ["pro.monthly"])
            // A chain that never moved keeps version 1's rule: another account restores it.
            try Self.appended(try await ledger.append(contentsOf:
                Self.purchase("l1", account: "A", transaction: "L1", original: "L1", product: "lifetime", expires: nil)
                + [.transactionUpdated(id: "d-l", account: "C", at: Self.now, TransactionUpdated(
                    payment: "pl", state: .restored, transaction: "L2", originalTransaction: "L1", product: "lifetime"))]))
            #expect(try ledger.entitlements(of: "C") == ["lifetime"])
            await ledger.close()
            let log = try LedgerLog.open(location: location)
            defer { log.close() }
            #expect(log.verify().isIntact)
        }
    }

    /// A transfer by hand (`Ledger.transferFact`, `ledger transfer`) gives the account it joins
    /// the purchase at once, from the store's reports or the device's queue, in one fact; and
    /// the same the other way moves it back. A bare pair (a back office's) can move on too,
    /// though its account holds no record of the chain. (Issue 41, point 5: before, neither
    /// account was entitled and neither way could be done again.)
    @Test(arguments: Backend.available)
    func aTransferByHandGrantsTheNewAccountAndGoesBack(on backend: Backend) async throws {
        try await withLocation(on: backend) { location in
            let ledger = try Ledger.open(location: location, catalog: Self.catalog, configuration: .testing)
            defer { Task { await ledger.close() } }
            try Self.appended(try await ledger.append(contentsOf:
                Self.purchase("a1", account: "A", transaction: "t1", original: "t1", product: "pro.monthly", expires: 30)
                + [.transactionUpdated(id: "a2", account: "A", at: Self.now, TransactionUpdated(
                    payment: "q1", state: .purchased, transaction: "L1", product: "lifetime"))]))
            #expect(try ledger.entitlements(of: "A") == ["lifetime", "pro.monthly"])
            for (product, chain) in [("pro.monthly", "t1"), ("lifetime", "L1")] {
                let there = try ledger.transferFact(originalTransaction: chain, from: "A", to: "B", at: Self.days(-5))
                try Self.appended(try await ledger.append(facts: [there])[0])
                #expect(try !ledger.entitlements(of: "A").contains(product))
                #expect(try ledger.entitlements(of: "B").contains(product))
                let back = try ledger.transferFact(originalTransaction: chain, from: "B", to: "A", at: Self.days(-4))
                try Self.appended(try await ledger.append(facts: [back])[0])
                #expect(try ledger.entitlements(of: "A").contains(product))
                #expect(try !ledger.entitlements(of: "B").contains(product))
            }
            // A bare pair leaves C without a record of the chain, and C may still move it on.
            try Self.appended(try await ledger.append(contentsOf: Event.transfer(originalTransaction: "L1", from: "A", to: "C", at: Self.days(-3))))
            try Self.appended(try await ledger.append(contentsOf: Event.transfer(originalTransaction: "L1", from: "C", to: "A", at: Self.days(-2))))
            #expect(try ledger.entitlements(of: "A") == ["lifetime", "pro.monthly"])
            await ledger.close()
            let log = try LedgerLog.open(location: location)
            defer { log.close() }
            #expect(log.verify().isIntact)
        }
    }
}

