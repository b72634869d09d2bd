import Foundation
import Synchronization
import Testing
@testable import PurchaseLedger
import LedgerTestSupport

/// The ids the ledger's components make belong to them (`OwnEventIDs`), a component's
/// `duplicate` counts only when it is the same fact, and a fact of several events is appended
/// whole or not at all (issue 41, points 1 and 10).
struct OwnEventIDsTests {
    static let catalog = try! Catalog(products: [
        .init(id: "pro.monthly", type: .autoRenewable, group: "pro"),
        .init(id: "coins", type: .consumable, grants: ["coin": 10]),
    ])

    static func purchase(_ id: String, account: String, payment: String, transaction: String) -> Event {
        .transactionUpdated(id: id, account: account, at: .now(), TransactionUpdated(
            payment: payment, state: .purchased, transaction: transaction, product: "coins"))
    }

    static func refusal(_ outcome: AppendResult?) -> LedgerError.Code? {
        if case .failure(let error)? = outcome { return error.code }
        return nil
    }

    /// A client that appends an event under an id of the forgets' namespace, or any other, is
    /// refused: the forget of the account keeps its id, and the account is forgotten. (Before,
    /// `forget/1` as a payment made the forget a "duplicate": the account kept its name.)
    @Test(arguments: Backend.available)
    func aClientCannotTakeTheIdsAForgetOrTheServerMakes(on backend: Backend) async throws {
        try await withLedger(on: backend, catalog: Self.catalog) { ledger, location in
            _ = try await ledger.append(Self.purchase("p1", account: "alice", payment: "p1", transaction: "1000"))
            // Whatever the path (the library, an import), an id of a namespace is refused on an event
            // its maker never writes there (the server refuses a client every id of one).
            let squats = try await ledger.append(contentsOf: (1...5).map { Self.purchase("forget/\($0)", account: "mallory", payment: "f\($0)", transaction: "20\($0)") }
                + [Event.consumed(id: "storekit:3000", account: "mallory", at: .now(), item: "coin", amount: 1),
                   Event.consumed(id: "transfer/x/1/out", account: "mallory", at: .now(), item: "coin", amount: 1),
                   Self.purchase("appstore-call/setAppAccountToken/1", account: "mallory", payment: "c", transaction: "3002"),
                   Event.consumed(id: "appstore-api:3003", account: "mallory", at: .now(), item: "coin", amount: 1),
                   Event(id: "share/x/1", account: "mallory", at: .now(), payload: .consumptionConsent(ConsumptionConsent(consented: true)))])
            #expect(squats.map(Self.refusal) == Array(repeating: .invalidEvent, count: squats.count))
            // A forget's id names its account's handle: another account's forget may not take it.
            let wrongHandle = try await ledger.append(contentsOf: [
                Event(id: "forget/7", account: "alice", at: .now(), payload: .forgotten(Forgotten(requestedBy: "test"))),
            ])
            #expect(Self.refusal(wrongHandle.first) == .invalidEvent)
            let forgotten = try #require(try await ledger.forget("alice", requestedBy: "test"))
            guard case .appended = forgotten.outcome else { throw TestFailure("the forget was not appended: \(forgotten.outcome)") }
            #expect(forgotten.pseudonym == "forgotten/1")
            #expect(try ledger.projection(of: "alice") == nil)
            #expect(try ledger.position(ofEventID: "forget/1") == ledger.position)
            // Asked again: nothing to forget.
            #expect(try await ledger.forget("alice", requestedBy: "test") == nil)
            _ = location
        }
    }

    /// A component's own event whose id the log holds under another fact is refused, never
    /// taken for "already recorded"; the same fact again (a redelivery, read anew) is a
    /// duplicate. A client's events keep the format's rule: a duplicate by id.
    @Test(arguments: Backend.available)
    func aComponentsDuplicateIsTheSameFactOrARefusal(on backend: Backend) async throws {
        try await withLedger(on: backend, catalog: Self.catalog) { ledger, _ in
            _ = try await ledger.append(Self.purchase("x", account: "alice", payment: "p1", transaction: "1000"))
            let other = Self.purchase("x", account: "bob", payment: "p1", transaction: "1000")
            #expect(Self.refusal(try await ledger.append(contentsOf: [other], duplicates: .sameFact).first) == .invalidEvent)
            guard case .success(.duplicate(of: 1)) = try await ledger.append(contentsOf: [other]).first else {
                throw TestFailure("a client's event is a duplicate by id")
            }
            var again = Self.purchase("x", account: "alice", payment: "p1", transaction: "1000")
            again.at = Timestamp(seconds: again.at.seconds + 60)
            guard case .success(.duplicate(of: 1)) = try await ledger.append(contentsOf: [again], duplicates: .sameFact).first else {
                throw TestFailure("the same fact, read again later, is a duplicate")
            }
            #expect(ledger.position == 1)
        }
    }

    /// A fact of several events is appended whole or not at all, in one commit with the rest;
    /// the refused event answers its own error, the others the same code.
    @Test(arguments: Backend.available)
    func aFactIsAppendedWholeOrNotAtAll(on backend: Backend) async throws {
        let commits = Commits()
        var configuration = Ledger.Configuration.testing
        configuration.onCommit = { report in commits.add(report.requests) }
        try await withLedger(on: backend, catalog: Self.catalog, configuration: configuration) { ledger, _ in
            let answers = try await ledger.append(facts: [
                [Self.purchase("a", account: "alice", payment: "p1", transaction: "1000")],
                // The second refused (its transaction is alice's): the first is not appended.
                [Self.purchase("b1", account: "bob", payment: "p1", transaction: "2000"),
                 Self.purchase("b2", account: "bob", payment: "p2", transaction: "1000")],
                [Self.purchase("c", account: "carol", payment: "p1", transaction: "3000")],
            ])
            #expect(answers.count == 3)
            guard case .success(.appended(1)) = answers[0][0], case .success(.appended(2)) = answers[2][0] else {
                throw TestFailure("the facts around a refused one are appended: \(answers)")
            }
            #expect(answers[1].map(Self.refusal) == [.transactionAlreadyCredited, .transactionAlreadyCredited])
            #expect(ledger.position == 2)
            #expect(try ledger.projection(of: "bob") == nil)
            #expect(try ledger.position(ofEventID: "b1") == nil)
            #expect(commits.all == [1], "one commit for the whole submission")
            let replayed = try ledger.state(at: ledger.position)
            #expect(try replayed == ledger.currentState())
        }
    }
}

/// The commits a test's ledger made (`Configuration.onCommit`), by how many requests each held.
final class Commits: Sendable {
    private let reports = Mutex<[Int]>([])

    func add(_ requests: Int) { reports.withLock { $0.append(requests) } }

    var all: [Int] { reports.withLock { $0 } }
}
