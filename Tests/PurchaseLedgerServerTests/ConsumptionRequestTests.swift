import AppStoreServerAPI
import Foundation
import HTTPTypes
import HummingbirdTesting
import LedgerTestSupport
import PurchaseLedger
@testable import PurchaseLedgerAppStore
@testable import PurchaseLedgerServer
import Testing

/// Refund requests (`CONSUMPTION_REQUEST`): answered from the ledger as it stood before the
/// request, with Send Consumption Information against the fake App Store (which checks the body
/// as Apple documents it), only with the customer's consent, once, and recorded.
@Suite(.serialized)
struct ConsumptionRequestTests {
    typealias Notifications = AppStoreNotificationTests
    static let account = Notifications.account
    static let uuid = "002e14d5-51f5-4503-b5a8-c3a1af68eb20"
    static let requestID = uuid + "/consumption-request"

    /// Apple's CONSUMPTION_REQUEST sample about consumable transaction 900 of the account.
    static func request(signer: TestAppStoreSigner) throws -> String {
        var notification = try AppleFixtures.model("signedConsumptionRequestNotification")
        var data = try #require(notification["data"] as? [String: Any])
        data["environment"] = "Sandbox"
        data["signedTransactionInfo"] = try signer.sign(Notifications.transaction([
            "transactionId": "900", "originalTransactionId": "900", "productId": "com.example.coins", "type": "Consumable",
            "expiresDate": NSNull(), "subscriptionGroupIdentifier": NSNull(),
        ]))
        data["signedRenewalInfo"] = nil
        notification["data"] = data
        return "{\"signedPayload\": \"\(try signer.sign(notification))\"}"
    }

    /// The account bought 100 coins (transaction 900), the app finished it, and spent `spent`.
    static func purchaseLines(spent: Int, consent: Bool?) -> [String] {
        var lines = [
            Lines.added("app-1", account, payment: "P1", product: "com.example.coins"),
            Lines.purchased("app-2", account, payment: "P1", transaction: "900"),
            Lines.finished("app-3", account, payment: "P1"),
        ]
        if spent > 0 { lines.append(Lines.consumed("app-4", account, item: "coins", amount: spent)) }
        if let consent {
            lines.append(#"{"id":"consent-1","type":"consumptionConsent","account":"\#(account)","at":"2026-03-14T08:00:00Z","consented":\#(consent)}"#)
        }
        return lines
    }

    /// The notification route with a responder that answers through `store`.
    static func run(
        store: FakeAppStore, signer: TestAppStoreSigner, policy: ConsumptionResponder.Policy = .init(refundPreference: .decline),
        _ body: @Sendable @escaping (ServerHarness, any TestClientProtocol) async throws -> Void
    ) async throws {
        let verifier = signer.verifier()
        try await store.run { base in
            let api = try await AppStoreServerAPIClientTests.client(store, base)
            try await ServerHarness.run(notifications: { ledger, directory in
                AppStoreNotificationHandler(
                    verifier: verifier, unattributed: UnattributedNotificationLog(path: directory + "/unattributed.jsonl"), ledger: ledger,
                    consumption: ConsumptionResponder(client: api, policy: policy, ledger: ledger))
            }, body)
        }
    }

    /// An event's line with its `at` (when the answer was recorded) taken out.
    static func withoutTime(_ event: Event) -> String {
        event.jsonLine.replacingOccurrences(of: #","at":"[^"]*""#, with: "", options: .regularExpression)
    }

    @Test func aConsentedRequestIsAnsweredFromTheLedgerOnceAndRecorded() async throws {
        let signer = try TestAppStoreSigner()
        let store = FakeAppStore()
        try await Self.run(store: store, signer: signer) { harness, client in
            _ = try await client.post(events: Self.purchaseLines(spent: 60, consent: true))
            let answer = try await Notifications.post(try Self.request(signer: signer), client)
            #expect(answer.status == .ok)
            #expect(try answer.object["action"] as? String == "refundRequest")

            // Golden: what Apple received, byte for byte.
            #expect(store.consumptionAnswers.map(\.transaction) == ["900"])
            #expect(store.consumptionAnswers.map(\.body) == [
                #"{"consumptionPercentage":60000,"customerConsented":true,"deliveryStatus":"DELIVERED","refundPreference":"DECLINE","sampleContentProvided":false}"#,
            ])
            // Golden: what the log recorded.
            let recorded = try harness.ledger.history(account: Self.account).map(\.event).suffix(2)
            #expect(recorded.map(Self.withoutTime) == [
                #"{"id":"002e14d5-51f5-4503-b5a8-c3a1af68eb20/consumption-request","type":"consumptionRequest","account":"7e3fb20b-4cdb-47cc-936d-99d65f608138","transaction":"900","reason":"UNINTENDED_PURCHASE","environment":"Sandbox"}"#,
                #"{"id":"002e14d5-51f5-4503-b5a8-c3a1af68eb20/consumption-request/answer","type":"consumptionAnswer","account":"7e3fb20b-4cdb-47cc-936d-99d65f608138","request":"002e14d5-51f5-4503-b5a8-c3a1af68eb20/consumption-request","transaction":"900","outcome":"accepted","deliveryStatus":"DELIVERED","consumptionPercentage":60000,"refundPreference":"DECLINE","sampleContentProvided":false,"status":202}"#,
            ])

            // Apple delivers the notification again: nothing is sent or appended twice.
            let position = harness.ledger.position
            let again = try await Notifications.post(try Self.request(signer: signer), client)
            #expect(again.status == .ok)
            #expect(store.consumptionAnswers.count == 1)
            #expect(harness.ledger.position == position)
        }
    }

    @Test func withoutConsentNothingIsSentAndThatIsRecorded() async throws {
        for consent in [nil, false] as [Bool?] {
            let signer = try TestAppStoreSigner()
            let store = FakeAppStore()
            try await Self.run(store: store, signer: signer) { harness, client in
                _ = try await client.post(events: Self.purchaseLines(spent: 10, consent: consent))
                #expect(try await Notifications.post(try Self.request(signer: signer), client).status == .ok)
                #expect(store.consumptionAnswers.isEmpty)
                #expect(store.requests == 0)
                let last = try #require(try harness.ledger.history(account: Self.account).last?.event)
                #expect(Self.withoutTime(last) == #"{"id":"002e14d5-51f5-4503-b5a8-c3a1af68eb20/consumption-request/answer","type":"consumptionAnswer","account":"7e3fb20b-4cdb-47cc-936d-99d65f608138","request":"002e14d5-51f5-4503-b5a8-c3a1af68eb20/consumption-request","transaction":"900","outcome":"noConsent"}"#)
            }
        }
    }

    /// Apple was unreachable when the request came: the request is in the log, the notification
    /// is answered with an error, and the account keeps spending. Apple's redelivery sends the
    /// answer as it stood at the request, not as it stands now.
    @Test func anAnswerSentLaterIsTheOneTheRequestsPositionGives() async throws {
        let signer = try TestAppStoreSigner()
        let store = FakeAppStore()
        try await Self.run(store: store, signer: signer, policy: .init(sampleContentProvided: true)) { harness, client in
            _ = try await client.post(events: Self.purchaseLines(spent: 25, consent: true))
            store.queue(Array(repeating: FakeAppStore.Fault(status: 503), count: AppStoreServerAPIClientTests.quickRetry.maximumAttempts))
            let failed = try await Notifications.post(try Self.request(signer: signer), client)
            #expect(failed.status == .internalServerError)
            #expect(try harness.ledger.position(ofEventID: Self.requestID) != nil)
            #expect(try harness.ledger.position(ofEventID: Self.requestID + "/answer") == nil)

            _ = try await client.post(events: [Lines.consumed("app-5", Self.account, item: "coins", amount: 75)])
            #expect(try await Notifications.post(try Self.request(signer: signer), client).status == .ok)
            #expect(store.consumptionAnswers.map(\.body) == [
                #"{"consumptionPercentage":25000,"customerConsented":true,"deliveryStatus":"DELIVERED","sampleContentProvided":true}"#,
            ])
        }
    }

    /// Apple refuses the answer for good (it does not know the transaction): the refusal is
    /// recorded as the answer, and a redelivery does not ask again.
    @Test func aRefusalIsRecordedAndNotRetried() async throws {
        let signer = try TestAppStoreSigner()
        let store = FakeAppStore()
        store.knowTransactions([])
        try await Self.run(store: store, signer: signer) { harness, client in
            _ = try await client.post(events: Self.purchaseLines(spent: 0, consent: true))
            #expect(try await Notifications.post(try Self.request(signer: signer), client).status == .ok)
            let last = try #require(try harness.ledger.history(account: Self.account).last?.event)
            guard case .consumptionAnswer(let answer) = last.payload else { throw TestFailure("no answer recorded: \(last.jsonLine)") }
            #expect(answer.outcome == .refused)
            #expect(answer.status == 404)
            #expect(answer.error?.contains("4040010") == true)
            #expect(answer.consumptionPercentage == 0)
            let requests = store.requests
            #expect(try await Notifications.post(try Self.request(signer: signer), client).status == .ok)
            #expect(store.requests == requests)
        }
    }

    /// The facts become Apple's vocabulary: delivered or not, the share spent for consumables
    /// only, the configuration's policy; no consent, no answer.
    @Test func theAnswerFollowsTheFacts() {
        let facts = ConsumptionFacts(
            account: "a", transaction: "1", position: 9, consented: true, delivery: .notFinished, productType: .nonConsumable, consumedShare: nil)
        let policy = ConsumptionResponder.Policy(sampleContentProvided: true, refundPreference: .grantProrated)
        #expect(ConsumptionResponder.information(from: facts, policy: policy) == ConsumptionInformation(
            customerConsented: true, deliveryStatus: .undeliveredOther, sampleContentProvided: true, refundPreference: .grantProrated))
        for delivery in ConsumptionFacts.Delivery.allCases {
            var fact = facts
            fact.delivery = delivery
            #expect(ConsumptionResponder.information(from: fact, policy: policy)?.deliveryStatus == (delivery == .delivered ? .delivered : .undeliveredOther))
        }
        var declined = facts
        declined.consented = false
        #expect(ConsumptionResponder.information(from: declined, policy: policy) == nil)
        #expect(AppStoreServerAPIError(.notFound, status: 404, "x").isFinalRefusal)
        #expect(!AppStoreServerAPIError(.unauthorized, status: 401, "x").isFinalRefusal)
        #expect(!AppStoreServerAPIError(.serverError, status: 503, "x").isFinalRefusal)
        #expect(!AppStoreServerAPIError(.transport, "x").isFinalRefusal)
    }
}
