import Foundation
import HTTPTypes
import HummingbirdTesting
import PurchaseLedger
@testable import PurchaseLedgerAppStore
@testable import PurchaseLedgerServer
import Testing
import LedgerTestSupport

/// `POST /v1/transactions`: the app sends StoreKit 2's `Transaction.jwsRepresentation`; the
/// server verifies it like a notification's and records it on the same entry a notification
/// of the same transaction uses.
struct SignedTransactionRouteTests {
    typealias Notifications = AppStoreNotificationTests

    static func post(_ body: [String: Any], key: String = TestKeys.writer, _ client: any TestClientProtocol) async throws -> Answer {
        let data = try JSONSerialization.data(withJSONObject: body, options: [.sortedKeys])
        return try await client.send(.post, "/v1/transactions", key: key, body: String(decoding: data, as: UTF8.self))
    }

    @Test func theDevicesTransactionIsRecordedOnceAndMeetsTheNotification() async throws {
        let signer = try TestAppStoreSigner()
        try await Notifications.run(signer: signer) { harness, client in
            let signed = try signer.sign(Notifications.transaction())
            let first = try await Self.post(["signedTransaction": signed], client)
            #expect(first.status == .ok)
            let answer = try first.object
            #expect(answer["account"] as? String == Notifications.account)
            #expect((answer["outcomes"] as? [[String: Any]])?.map { $0["outcome"] as? String } == ["appended", "appended", "appended"])
            let projection = try await client.account(Notifications.account, asOf: Notifications.duringSubscription)
            #expect(projection["entitlements"] as? [String] == ["com.example.product"])
            #expect((projection["unfinished"] as? [[String: Any]])?.isEmpty == true)

            let again = try await Self.post(["signedTransaction": signed], client).object
            #expect((again["outcomes"] as? [[String: Any]])?.map { $0["outcome"] as? String } == ["duplicate", "duplicate", "duplicate"])
            // Apple's notification of the same transaction: the same entry, a redelivery.
            let notified = try await Notifications.post(try Notifications.notification(
                "SUBSCRIBED", uuid: "n1", transaction: Notifications.transaction(), signer: signer), client).object
            let outcomes = try #require(notified["outcomes"] as? [[String: Any]])
            #expect(outcomes.map { $0["outcome"] as? String } == ["duplicate", "duplicate", "appended"])
            let entries = try harness.ledger.history(account: Notifications.account).filter { $0.event.type == .transactionUpdated }
            #expect(entries.count == 1)
        }
    }

    @Test func anAccountGivenTakesTheTransactionWithoutAToken() async throws {
        let signer = try TestAppStoreSigner()
        try await Notifications.run(signer: signer) { _, client in
            let signed = try signer.sign(Notifications.transaction(["appAccountToken": NSNull()]))
            let refused = try await Self.post(["signedTransaction": signed], client)
            #expect(refused.status == .badRequest)
            #expect(try refused.object["error"] as? String == "invalidEvent")
            let taken = try await Self.post(["signedTransaction": signed, "account": "player-1"], client)
            #expect(taken.status == .ok)
            // A transaction Apple bound to a token belongs to that token's account only.
            let bound = try signer.sign(Notifications.transaction(["transactionId": "23999"]))
            let other = try await Self.post(["signedTransaction": bound, "account": "player-1"], client)
            #expect(other.status == .badRequest)
            // The refusal names no account: not the token's, nor where a transfer took its purchase.
            #expect(try other.object["message"] as? String == "the transaction's appAccountToken binds it to another account than `account`")
            #expect(try await client.account("player-1", asOf: Notifications.duringSubscription)["entitlements"] as? [String] == ["com.example.product"])
        }
    }

    /// Restores across accounts: the customer signs in to another account and StoreKit 2 sends
    /// the same transaction. `keep` refuses it there; `transfer` moves the subscription (the
    /// old account loses it, Apple's later notifications, which still carry the old account's
    /// token, go to the new one), and the old account restoring takes it back; `share` gives
    /// it to both, once.
    @Test(arguments: RestorePolicy.allCases)
    func aTransactionAnotherAccountOwnsFollowsThePolicy(_ policy: RestorePolicy) async throws {
        let signer = try TestAppStoreSigner()
        let (first, second) = (Notifications.account, "player-2")
        try await Notifications.run(signer: signer, restores: policy) { harness, client in
            let signed = try signer.sign(Notifications.transaction())
            #expect(try await Self.post(["signedTransaction": signed], client).status == .ok)
            let restored = try await Self.post(["signedTransaction": signed, "account": second], client)
            func entitlements(_ account: String) async throws -> [String]? {
                try await client.account(account, asOf: Notifications.duringSubscription)["entitlements"] as? [String]
            }
            switch policy {
            case .keep:
                #expect(restored.status == .badRequest)
                #expect(try await entitlements(first) == ["com.example.product"])
                #expect(try await entitlements(second)?.isEmpty ?? true)
                // Without Apple's token the transaction stays with the account holding it.
                let unbound = try signer.sign(Notifications.transaction(["appAccountToken": NSNull(), "transactionId": "23999", "originalTransactionId": "23999"]))
                #expect(try await Self.post(["signedTransaction": unbound, "account": "player-3"], client).status == .ok)
                let refused = try await Self.post(["signedTransaction": unbound, "account": second], client).object
                #expect((refused["outcomes"] as? [[String: Any]])?.first?["error"] as? String == "transactionAlreadyCredited")
                #expect(try harness.ledger.account(holdingTransaction: "23999") == "player-3")
            case .transfer:
                #expect(restored.status == .ok)
                let outcomes = try #require(try restored.object["outcomes"] as? [[String: Any]])
                #expect(outcomes.map { $0["outcome"] as? String } == ["appended", "appended", "appended", "appended", "appended"])
                #expect(try await entitlements(first) == [])
                #expect(try await entitlements(second) == ["com.example.product"])
                let transaction = try Notifications.transaction()
                let original = try #require(transaction["originalTransactionId"] as? String)
                #expect(try harness.ledger.account(owningChain: original, namedBy: first) == second)
                // Apple renews it, naming the first account's token: the report goes to the second.
                let renewed = try Notifications.transaction(["transactionId": "23457"])
                let notified = try await Notifications.post(try Notifications.notification(
                    "DID_RENEW", uuid: "renewal-1", transaction: renewed, signer: signer), client)
                #expect(notified.status == .ok)
                #expect(try harness.ledger.history(account: second).contains { $0.event.id.hasPrefix("renewal-1") })
                #expect(try harness.ledger.history(account: first).allSatisfy { !$0.event.id.hasPrefix("renewal-1") })
                // The first account restores: it is its own again.
                let back = try await Self.post(["signedTransaction": signed, "account": first], client)
                #expect(back.status == .ok)
                #expect(try await entitlements(first) == ["com.example.product"])
                #expect(try await entitlements(second) == [])
                #expect(try harness.ledger.history(account: first).filter { $0.event.type == .transferred }.count == 2)
            case .share:
                #expect(restored.status == .ok)
                let outcomes = try #require(try restored.object["outcomes"] as? [[String: Any]])
                #expect(outcomes.map { $0["outcome"] as? String } == ["appended", "appended", "appended", "appended"])
                #expect(try await entitlements(first) == ["com.example.product"])
                #expect(try await entitlements(second) == ["com.example.product"])
                // Sent again: nothing new, and the purchase is shared once.
                let again = try await Self.post(["signedTransaction": signed, "account": second], client).object
                #expect((again["outcomes"] as? [[String: Any]])?.map { $0["outcome"] as? String } == ["duplicate", "duplicate", "duplicate"])
                #expect(try harness.ledger.history(account: second).filter { $0.event.type == .shared }.count == 1)
                // Apple's renewal goes to the owner, whose token it carries.
                let renewed = try Notifications.transaction(["transactionId": "23457"])
                #expect(try await Notifications.post(try Notifications.notification(
                    "DID_RENEW", uuid: "renewal-1", transaction: renewed, signer: signer), client).status == .ok)
                #expect(try harness.ledger.history(account: first).contains { $0.event.id.hasPrefix("renewal-1") })
            }
        }
    }

    /// StoreKit 1 restores a purchase under a new transaction id of the same original
    /// transaction, which the format appends in any account: unset and `share` leave it so
    /// (both accounts have it), `keep` refuses it, `transfer` moves the purchase with it, in one
    /// fact, but only for a key that may record the store's word (`events:store`): a StoreKit 1
    /// restore carries no proof of Apple's, so any write key could otherwise take any account's
    /// purchase (issue 41, point 4). No refusal names the account that owns it.
    @Test(arguments: [nil] + RestorePolicy.allCases.map(Optional.some))
    func aStoreKit1RestoreOnAnotherAccountFollowsThePolicy(_ policy: RestorePolicy?) async throws {
        try await ServerHarness.run(restores: policy) { harness, client in
            let at = Timestamp(seconds: 1_767_225_600)
            let bought = [
                Event.transactionUpdated(id: "a1", account: "ana", at: at, TransactionUpdated(
                    payment: "p1", state: .purchased, transaction: "1000", product: "com.example.hardwords")),
                Event.transactionFinished(id: "a2", account: "ana", at: at, payment: "p1"),
            ]
            #expect(try await client.post(events: bought.map(\.jsonLine)).map { $0["outcome"] as? String } == ["appended", "appended"])
            let restore = Event.transactionUpdated(id: "b1", account: "bo", at: at, TransactionUpdated(
                payment: "r1", state: .restored, transaction: "2000", originalTransaction: "1000", product: "com.example.hardwords"))
            let outcome = try #require(try await client.post(events: [restore.jsonLine]).first)
            let (ana, bo) = (try await client.account("ana")["entitlements"] as? [String], try await client.account("bo")["entitlements"] as? [String])
            switch policy {
            case nil, .share?:
                #expect(outcome["outcome"] as? String == "appended")
                #expect(ana == ["com.example.hardwords"] && bo == ["com.example.hardwords"])
            case .keep?:
                #expect(outcome["error"] as? String == "transactionAlreadyCredited")
                #expect((outcome["message"] as? String)?.contains("ana") == false)
                #expect(ana == ["com.example.hardwords"] && bo?.isEmpty != false)
            case .transfer?:
                // The device's key: refused, naming no one; nothing moves.
                #expect(outcome["error"] as? String == "transactionAlreadyCredited")
                #expect((outcome["message"] as? String)?.contains("ana") == false)
                #expect(ana == ["com.example.hardwords"] && bo?.isEmpty != false)
                // A back office's: the pair and the restore, one fact in one commit, the pair first.
                let before = harness.ledger.position
                let moved = try #require(try await client.post(events: [restore.jsonLine], key: TestKeys.backOffice).first)
                #expect(moved["outcome"] as? String == "appended")
                #expect(moved["position"] as? Int == Int(before) + 3)
                #expect(try await client.account("ana")["entitlements"] as? [String] == [])
                #expect(try await client.account("bo")["entitlements"] as? [String] == ["com.example.hardwords"])
                #expect(try harness.ledger.account(owningChain: "1000", namedBy: "ana") == "bo")
                #expect(try harness.ledger.history(account: "bo").map(\.event.type) == [.transferred, .transactionUpdated])
                // The device sending the restore again moves nothing more.
                let position = harness.ledger.position
                _ = try await client.post(events: [restore.jsonLine], key: TestKeys.backOffice)
                #expect(harness.ledger.position == position)
            }
        }
    }

    @Test func aForgedOrUnauthorizedTransactionChangesNothing() async throws {
        let signer = try TestAppStoreSigner()
        let stranger = try TestAppStoreSigner()
        try await Notifications.run(signer: signer) { harness, client in
            let forged = try await Self.post(["signedTransaction": try stranger.sign(Notifications.transaction())], client)
            #expect(forged.status == .badRequest)
            #expect(try forged.object["error"] as? String == "VERIFICATION_FAILURE")
            let reader = try await Self.post(["signedTransaction": try signer.sign(Notifications.transaction())], key: TestKeys.reader, client)
            #expect(reader.status == .forbidden)
            let garbage = try await client.send(.post, "/v1/transactions", key: TestKeys.writer, body: "{\"signedTransaction\": 7}")
            #expect(garbage.status == .badRequest)
            #expect(harness.ledger.position == 0)
        }
    }
}
