import AppStoreServerAPI
import Foundation
import HTTPTypes
import HummingbirdTesting
import LedgerTestSupport
import Logging
import PurchaseLedger
import PurchaseLedgerLMDB
@testable import PurchaseLedgerAppStore
@testable import PurchaseLedgerServer
import Testing

/// Apple-shaped input that used to leave an account wrong, each case as it was found.
struct AppStoreFindingsTests {
    typealias Notifications = AppStoreNotificationTests
    static let account = Notifications.account
    static let after = "2023-10-24T12:20:00Z"

    static func reconciliation(_ store: FakeAppStore, _ base: String, _ signer: TestAppStoreSigner, _ ledger: Ledger) async throws -> Reconciliation {
        let api = try await AppStoreServerAPIClient(
            credentials: store.credentials, environment: .custom(baseURL: base), retry: AppStoreServerAPIClientTests.quickRetry)
        return Reconciliation(client: api, verifier: signer.verifier(), ledger: ledger)
    }

    static func revoked(_ client: any TestClientProtocol) async throws -> Bool? {
        let purchases = try await client.account(account, asOf: after)["storeTransactions"] as? [[String: Any]]
        return purchases?.first { $0["transaction"] as? String == "23456" }?["revoked"] as? Bool
    }

    /// A state reconciliation recorded once (not refunded) could never be recorded again: its
    /// id was the report's content without Apple's signing time. Refund, reversal (whose
    /// notification is lost), refund again.
    @Test func aRefundReversedWhileItsNotificationWasLostIsMendedAndARefundAgainCounts() async throws {
        let signer = try TestAppStoreSigner()
        let store = FakeAppStore()
        try await Notifications.run(signer: signer) { harness, client in
            _ = try await client.post(events: [
                Lines.purchased("d1", Self.account, payment: "D1", transaction: "23456", product: "com.example.product", original: "12345"),
            ])
            try await store.run { base in
                let reconciliation = try await Self.reconciliation(store, base, signer, harness.ledger)
                store.setHistory([try signer.sign(Notifications.transaction(["signedDate": 1_698_149_100_000]))], of: "12345")
                #expect(try await reconciliation.run(apply: true).appended == 1)
                #expect(try await Self.revoked(client) == false)

                _ = try await Notifications.post(try Notifications.notification(
                    "REFUND", uuid: "r1", transaction: Notifications.transaction(["signedDate": 1_698_149_200_000], revoked: true),
                    signer: signer), client)
                #expect(try await Self.revoked(client) == true)

                // Apple reversed the refund; its REFUND_REVERSED never arrived.
                store.setHistory([try signer.sign(Notifications.transaction(["signedDate": 1_698_149_300_000]))], of: "12345")
                let mended = try await reconciliation.run(apply: true)
                #expect(mended.differences.map(\.kind) == [.revocationDiffers])
                #expect(mended.appended == 1)
                #expect(try await Self.revoked(client) == false)
                #expect(try await reconciliation.run(apply: true).differences.isEmpty)

                _ = try await Notifications.post(try Notifications.notification(
                    "REFUND", uuid: "r2", transaction: Notifications.transaction(["signedDate": 1_698_149_400_000], revoked: true),
                    signer: signer), client)
                #expect(try await Self.revoked(client) == true)
                store.setHistory([try signer.sign(Notifications.transaction(["signedDate": 1_698_149_500_000], revoked: true))], of: "12345")
                let agreed = try await reconciliation.run(apply: true)
                #expect(agreed.differences.isEmpty)
                #expect(agreed.appended == 0)
            }
        }
    }

    /// The statuses' envelope says which chain a renewal info belongs to, unsigned: a renewal
    /// info signed for 8888 under an envelope saying 12345 was recorded as 12345's.
    @Test func aRenewalInfoIsTakenForTheChainItsSignedPayloadNames() async throws {
        let signer = try TestAppStoreSigner()
        let store = FakeAppStore()
        try await Notifications.run(signer: signer) { harness, client in
            _ = try await Notifications.post(try Notifications.notification(
                "SUBSCRIBED", uuid: "s1", transaction: Notifications.transaction(), signer: signer), client)
            store.setHistory([try signer.sign(Notifications.transaction())], of: "12345")
            store.setRenewal(try signer.sign(Notifications.renewal(["originalTransactionId": "8888", "autoRenewStatus": 0])), of: "12345")
            try await store.run { base in
                let report = try await Self.reconciliation(store, base, signer, harness.ledger).run(apply: true)
                #expect(report.failures.isEmpty)
                #expect(!report.differences.contains { $0.kind == .renewalDiffers })
                let renewals = try harness.ledger.history(account: Self.account).filter { $0.event.type == .renewalInfo }
                #expect(renewals.isEmpty)
            }
        }
    }

    /// Apple's history of one transaction is its customer's whole history: it was read again
    /// for every other chain the customer held (and the statuses with it).
    @Test func applesHistoryIsReadOncePerCustomer() async throws {
        let signer = try TestAppStoreSigner()
        let store = FakeAppStore(pageSize: 10)
        try await Notifications.run(signer: signer) { harness, client in
            let subscription = try Notifications.transaction()
            let lifetime = try Notifications.transaction([
                "transactionId": "500", "originalTransactionId": "500", "productId": "com.example.coins", "type": "Consumable",
                "expiresDate": NSNull(), "subscriptionGroupIdentifier": NSNull(),
            ])
            _ = try await Notifications.post(try Notifications.notification("SUBSCRIBED", uuid: "s1", transaction: subscription, signer: signer), client)
            _ = try await Notifications.post(try Notifications.notification("ONE_TIME_CHARGE", uuid: "o1", transaction: lifetime, signer: signer), client)
            let history = [try signer.sign(subscription), try signer.sign(lifetime)]
            store.setHistory(history, of: "12345")
            store.setHistory(history, of: "500")
            try await store.run { base in
                let api = try await AppStoreServerAPIClient(
                    credentials: store.credentials, environment: .custom(baseURL: base), retry: AppStoreServerAPIClientTests.quickRetry)
                let report = try await Reconciliation(client: api, verifier: signer.verifier(), ledger: harness.ledger).run(apply: true)
                #expect(report.originalTransactions == 2)
                #expect(report.failures.isEmpty)
                #expect(report.differences.isEmpty)
                // One history page and one statuses call for the customer.
                #expect(api.requestCount == 2)
            }
        }
    }

    /// A purchase reconciliation appended, cut short before its finish: the next run finishes it.
    @Test func aPurchaseReconciliationLeftUnfinishedIsFinishedByTheNextRun() async throws {
        let signer = try TestAppStoreSigner()
        let store = FakeAppStore()
        try await Notifications.run(signer: signer) { harness, client in
            let payload = try JSONDecoder().decode(
                AppStoreTransactionPayload.self, from: JSONSerialization.data(withJSONObject: Notifications.transaction()))
            let purchase = AppStoreRecorder.purchase(
                payload, id: "23456", account: Self.account, uuid: Reconciliation.purchaseID(of: "23456"), at: Timestamp(seconds: 1_698_148_900))
            _ = try await harness.ledger.append(contentsOf: [purchase.event])
            #expect((try await client.account(Self.account)["unfinished"] as? [Any])?.count == 1)
            store.setHistory([try signer.sign(Notifications.transaction())], of: "12345")
            try await store.run { base in
                let report = try await Self.reconciliation(store, base, signer, harness.ledger).run(apply: true)
                #expect(Set(report.differences.map(\.kind)) == [.unfinishedPurchase, .missingReport])
                #expect(report.appended == 2)
            }
            #expect((try await client.account(Self.account)["unfinished"] as? [Any])?.isEmpty == true)
        }
    }

    /// A payload without `signedDate` was dated "now": an old transaction sent again after a
    /// refund undid the refund. Such payloads record nothing, on every route.
    @Test func payloadsWithoutASignedDateAreRefusedEverywhere() async throws {
        let signer = try TestAppStoreSigner()
        try await Notifications.run(signer: signer) { harness, client in
            _ = try await Notifications.post(try Notifications.notification(
                "REFUND", uuid: "r1", transaction: Notifications.transaction(revoked: true), signer: signer), client)
            #expect(try await Self.revoked(client) == true)
            let position = harness.ledger.position
            for transaction in [try Notifications.transaction(["signedDate": NSNull()])] {
                let answer = try await Notifications.post(try Notifications.notification(
                    "ONE_TIME_CHARGE", uuid: "n2", transaction: transaction, signer: signer), client)
                #expect(answer.status == .ok)
                #expect(try answer.object["action"] as? String == "refused")
                let device = try await SignedTransactionRouteTests.post(["signedTransaction": try signer.sign(transaction)], client)
                #expect(device.status == .badRequest)
            }
            #expect(harness.ledger.position == position)
            #expect(try await Self.revoked(client) == true)
        }
    }

    /// The same StoreKit 2 transaction from a second account was answered `duplicate`, with
    /// the first account's positions.
    @Test func anotherAccountsTransactionIsTransactionAlreadyCredited() async throws {
        let signer = try TestAppStoreSigner()
        try await Notifications.run(signer: signer) { harness, client in
            let signed = try signer.sign(Notifications.transaction(["appAccountToken": NSNull()]))
            #expect(try await SignedTransactionRouteTests.post(["signedTransaction": signed, "account": "player-1"], client).status == .ok)
            let position = harness.ledger.position
            let second = try await SignedTransactionRouteTests.post(["signedTransaction": signed, "account": "player-2"], client).object
            let outcomes = try #require(second["outcomes"] as? [[String: Any]])
            #expect(outcomes.map { $0["outcome"] as? String } == ["rejected"])
            #expect(outcomes.first?["error"] as? String == "transactionAlreadyCredited")
            #expect(outcomes.first?["position"] == nil)
            #expect(harness.ledger.position == position)
            #expect(try await client.account("player-2", asOf: Notifications.duringSubscription)["entitlements"] as? [String] == [])
        }
    }

    /// CONSUMPTION_REQUEST had no series in the notification metric.
    @Test func everyRecordingActionIsCounted() async throws {
        let signer = try TestAppStoreSigner()
        try await Notifications.run(signer: signer) { _, client in
            _ = try await Notifications.post(try ConsumptionRequestTests.request(signer: signer), client)
            let scrape = try await client.send(.get, "/metrics", key: TestKeys.metrics).body
            #expect(scrape.contains(#"purchaseledger_appstore_notifications_total{action="refundRequest"} 1"#))
            for action in AppStoreRecordingAction.allCases {
                #expect(scrape.contains(#"purchaseledger_appstore_notifications_total{action="\#(action.rawValue)"}"#))
            }
        }
    }

    /// The server's startup log showed `postgres://user:secret@…`.
    @Test func theStartupLogNamesTheLedgerWithoutItsPassword() throws {
        let configuration = ServerConfiguration(ledger: "postgres://ledger:s3cret-pass@db.internal:5432/ledger", keys: [])
        let metadata = LedgerServer.startupMetadata(configuration)
        let ledger = "\(metadata["ledger"] ?? "")"
        #expect(!ledger.contains("s3cret-pass"))
        #expect(ledger.contains("db.internal"))
    }

    /// A redelivered refund request answered after the customer withdrew consent sent
    /// `customerConsented: true`: consent was read at the request's position only.
    @Test func aConsentWithdrawnBeforeTheAnswerIsSentSharesNothing() async throws {
        let signer = try TestAppStoreSigner()
        let store = FakeAppStore()
        try await store.run { base in
            let api = try await AppStoreServerAPIClientTests.client(store, base)
            try await Notifications.run(signer: signer) { harness, client in
                _ = try await client.post(events: ConsumptionRequestTests.purchaseLines(spent: 10, consent: true))
                // Recorded while no responder ran (or Apple could not be reached)...
                _ = try await Notifications.post(try ConsumptionRequestTests.request(signer: signer), client)
                let request = try #require(try harness.ledger.history(account: Self.account).last { $0.event.type == .consumptionRequest }?.event)
                // ...then the customer withdrew consent, before the answer went out.
                _ = try await client.post(events: [
                    #"{"id":"consent-2","type":"consumptionConsent","account":"\#(Self.account)","at":"2026-03-14T09:00:00Z","consented":false}"#,
                ])
                let responder = ConsumptionResponder(client: api, policy: .init(), ledger: harness.ledger)
                let outcome = try await responder.answer(request, logger: Logger(label: "test"))
                #expect(outcome.map { if case .success(.appended) = $0 { true } else { false } } == true)
                #expect(store.consumptionAnswers.isEmpty)
                let answer = try #require(try harness.ledger.history(account: Self.account).last?.event)
                #expect(ConsumptionRequestTests.withoutTime(answer).contains(#""outcome":"noConsent""#))
            }
        }
    }

    /// A forged `expiresAt` beside a genuine proof counted "proven", and a true report dated
    /// to the millisecond was "disproven" (milliseconds went through a `Double`).
    @Test func storeProofsCompareEveryFieldToTheNanosecond() async throws {
        let signer = try TestAppStoreSigner()
        let signed = try signer.sign(Notifications.transaction(["signedDate": 1_698_148_956_682]))
        let proofs = StoreProofs(trustedRoots: [signer.root], bundleId: FakeAppStore.bundleID, appAppleId: 41234)
        let payload = try JSONDecoder().decode(
            AppStoreTransactionPayload.self, from: JSONSerialization.data(withJSONObject: Notifications.transaction()))
        var fact = AppStoreRecorder.storeTransaction(payload, id: "23456", source: "reconcile", signed: signed)
        fact.environment = .sandbox
        let at = try Event(jsonLine: #"{"id":"x","type":"consumptionConsent","account":"a","at":"2023-10-24T12:02:36.682Z","consented":true}"#).at
        var report = StoreProofs.Report()
        await proofs.check(LogRecord(position: 1, event: .storeTransaction(id: "true", account: "a", signedAt: at, fact)), into: &report)
        var forged = fact
        forged.expiresAt = Timestamp(seconds: 4_000_000_000)
        await proofs.check(LogRecord(position: 2, event: .storeTransaction(id: "forged", account: "a", signedAt: at, forged)), into: &report)
        #expect(report.proven == 1)
        #expect(report.disproven.map(\.eventID) == ["forged"])
        #expect(report.disproven.first?.reason.contains("expiresAt") == true)
    }
}

#if canImport(Glibc)
import Glibc
#endif
import Synchronization

extension AppStoreFindingsTests {
    /// `ledger attribute` beside a running server could move the audit file aside between the
    /// server's open and its write, and then delete the line with the file. Each step now holds
    /// the file's lock: a line waits while the file is being moved.
    @Test func aLineWaitsWhileAttributionHoldsTheFile() async throws {
        try await withTemporaryDirectory { directory in
            let log = UnattributedNotificationLog(path: directory + "/unattributed.jsonl")
            let notification = try JSONDecoder().decode(
                AppStoreNotificationPayload.self, from: Data(#"{"notificationType": "REFUND", "notificationUUID": "u1"}"#.utf8))
            // Held as `ledger attribute` holds it while it renames the file.
            let descriptor = open(log.lockPath, O_RDWR | O_CREAT, 0o600)
            #expect(descriptor >= 0)
            #expect(flock(descriptor, LOCK_EX) == 0)
            let written = Atomic<Bool>(false)
            let writer = Task.detached {
                try log.record(notification, transaction: nil, reason: "test", signedPayload: "x")
                written.store(true, ordering: .sequentiallyConsistent)
            }
            try await Task.sleep(for: .milliseconds(300))
            let writtenWhileHeld = written.load(ordering: .sequentiallyConsistent)
            #expect(!writtenWhileHeld)
            #expect(access(log.path, F_OK) != 0)
            flock(descriptor, LOCK_UN)
            close(descriptor)
            try await writer.value
            #expect(try String(contentsOfFile: log.path, encoding: .utf8).split(separator: "\n").count == 1)
        }
    }
}
