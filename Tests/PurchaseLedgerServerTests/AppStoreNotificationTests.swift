import Foundation
import HTTPTypes
import HummingbirdTesting
import PurchaseLedger
@testable import PurchaseLedgerAppStore
@testable import PurchaseLedgerServer
import Testing
import LedgerTestSupport

/// `POST /v1/appstore/notifications` end to end: Apple's decoded models signed with a
/// throwaway chain, verified, mapped to events, appended, and the account's projection.
struct AppStoreNotificationTests {
    static let account = "7e3fb20b-4cdb-47cc-936d-99d65f608138"
    /// Between the fixture's purchase (1698148900000) and its expiry (1698149000000).
    static let duringSubscription = "2023-10-24T12:02:30Z"
    static let afterSubscription = "2023-10-24T12:05:00Z"

    /// The harness with notifications signed by `signer`'s root, in the sandbox.
    static func run(
        signer: TestAppStoreSigner, restores: RestorePolicy? = nil,
        _ body: @Sendable (ServerHarness, any TestClientProtocol) async throws -> Void
    ) async throws {
        let verifier = signer.verifier()
        try await ServerHarness.run(notifications: { ledger, directory in
            AppStoreNotificationHandler(
                verifier: verifier, unattributed: UnattributedNotificationLog(path: directory + "/unattributed.jsonl"), ledger: ledger)
        }, restores: restores, body)
    }

    /// Apple's `signedTransaction.json`, for the sandbox, without its revocation unless asked
    /// and not upgraded (the fixture is both).
    static func transaction(_ changes: [String: Any] = [:], revoked: Bool = false) throws -> [String: Any] {
        var transaction = try AppleFixtures.model(revoked ? "signedTransactionWithRevocation" : "signedTransaction")
        transaction["environment"] = "Sandbox"
        transaction["isUpgraded"] = nil
        if !revoked {
            transaction["revocationReason"] = nil
            transaction["revocationDate"] = nil
        }
        for (key, value) in changes { transaction[key] = value is NSNull ? nil : value }
        return transaction
    }

    /// Apple's `signedRenewalInfo.json`, for the sandbox, with `changes`.
    static func renewal(_ changes: [String: Any] = [:]) throws -> [String: Any] {
        var renewal = try AppleFixtures.model("signedRenewalInfo")
        renewal["environment"] = "Sandbox"
        for (key, value) in changes { renewal[key] = value is NSNull ? nil : value }
        return renewal
    }

    /// Apple's `signedNotification.json` as `type` (and `subtype`), for the sandbox, carrying
    /// `transaction` and `renewal`.
    static func notification(
        _ type: String, subtype: String? = nil, uuid: String, transaction: [String: Any]?, renewal: [String: Any]? = nil,
        signer: TestAppStoreSigner
    ) throws -> String {
        var notification = try AppleFixtures.model("signedNotification")
        notification["notificationType"] = type
        notification["subtype"] = subtype
        notification["notificationUUID"] = uuid
        var data = try #require(notification["data"] as? [String: Any])
        data["environment"] = "Sandbox"
        data["signedRenewalInfo"] = try renewal.map { try signer.sign($0) }
        data["signedTransactionInfo"] = try transaction.map { try signer.sign($0) }
        notification["data"] = data
        let payload = try signer.sign(notification)
        return "{\"signedPayload\": \"\(payload)\"}"
    }

    static func post(_ body: String, _ client: any TestClientProtocol) async throws -> Answer {
        try await client.send(.post, "/v1/appstore/notifications", body: body)
    }

    @Test func aSubscriptionPurchaseOpensAFinishedEntryAndEntitles() async throws {
        let signer = try TestAppStoreSigner()
        try await Self.run(signer: signer) { harness, client in
            let body = try Self.notification("SUBSCRIBED", uuid: "00000000-0000-0000-0000-000000000001", transaction: Self.transaction(), signer: signer)
            let answer = try await Self.post(body, client)
            #expect(answer.status == .ok)
            let handled = try answer.object
            #expect(handled["action"] as? String == "purchase")
            let outcomes = try #require(handled["outcomes"] as? [[String: Any]])
            #expect(outcomes.map { $0["outcome"] as? String } == ["appended", "appended", "appended"])

            let records = try harness.ledger.history(account: Self.account)
            #expect(records.map(\.event.id) == ["00000000-0000-0000-0000-000000000001", "00000000-0000-0000-0000-000000000001/finish", "00000000-0000-0000-0000-000000000001/transaction"])
            guard case .transactionUpdated(let update) = records[0].event.payload else { throw TestFailure("not an update: \(records[0])") }
            #expect(update == TransactionUpdated(
                payment: "appstore:23456", state: .purchased, transaction: "23456", originalTransaction: "12345",
                expiresAt: Timestamp(seconds: 1_698_149_000), product: "com.example.product", quantity: 1))
            #expect(records[0].event.at == Timestamp(seconds: 1_698_148_900))

            let during = try await client.account(Self.account, asOf: Self.duringSubscription)
            #expect(during["entitlements"] as? [String] == ["com.example.product"])
            #expect((during["unfinished"] as? [Any])?.isEmpty == true)
            let projection1 = try await client.account(Self.account, asOf: Self.afterSubscription)
            #expect(projection1["entitlements"] as? [String] == [])
        }
    }

    @Test func applesRetriesAreDuplicates() async throws {
        let signer = try TestAppStoreSigner()
        try await Self.run(signer: signer) { harness, client in
            let body = try Self.notification("DID_RENEW", uuid: "00000000-0000-0000-0000-000000000002", transaction: Self.transaction(), signer: signer)
            _ = try await Self.post(body, client)
            let position = harness.ledger.position
            let retry = try await Self.post(body, client).object
            #expect((retry["outcomes"] as? [[String: Any]])?.map { $0["outcome"] as? String } == ["duplicate", "duplicate", "duplicate"])
            #expect(harness.ledger.position == position)
        }
    }

    @Test func aRenewalExtendsAndARefundTakesBack() async throws {
        let signer = try TestAppStoreSigner()
        try await Self.run(signer: signer) { _, client in
            _ = try await Self.post(try Self.notification("SUBSCRIBED", uuid: "u1", transaction: Self.transaction(), signer: signer), client)
            let renewal = try Self.transaction(["transactionId": "23457", "purchaseDate": 1_698_149_000_000, "expiresDate": 1_698_150_000_000])
            _ = try await Self.post(try Self.notification("DID_RENEW", uuid: "u2", transaction: renewal, signer: signer), client)
            let projection2 = try await client.account(Self.account, asOf: Self.afterSubscription)
            #expect(projection2["entitlements"] as? [String] == ["com.example.product"])

            let refund = try Self.transaction([
                "transactionId": "23457", "purchaseDate": 1_698_149_000_000, "expiresDate": 1_698_150_000_000,
                "signedDate": 1_698_149_500_000,
            ], revoked: true)
            let answer = try await Self.post(try Self.notification("REFUND", uuid: "u3", transaction: refund, signer: signer), client).object
            #expect(answer["action"] as? String == "revoke")
            #expect((answer["outcomes"] as? [[String: Any]])?.first?["outcome"] as? String == "appended")
            let projection3 = try await client.account(Self.account, asOf: Self.afterSubscription)
            #expect(projection3["entitlements"] as? [String] == [])
            // The first period was not refunded.
            let projection4 = try await client.account(Self.account, asOf: Self.duringSubscription)
            #expect(projection4["entitlements"] as? [String] == ["com.example.product"])
        }
    }

    /// REVOKE names the transaction that stops granting (Family Sharing withdrawn): its report,
    /// with Apple's revocation, ends the subscription at once.
    @Test func aRevokeEndsTheSubscriptionAtOnce() async throws {
        let signer = try TestAppStoreSigner()
        try await Self.run(signer: signer) { harness, client in
            _ = try await Self.post(try Self.notification("SUBSCRIBED", uuid: "u1", transaction: Self.transaction(), signer: signer), client)
            let revoke = try Self.transaction(["signedDate": 1_698_148_950_000], revoked: true)
            _ = try await Self.post(try Self.notification("REVOKE", uuid: "u2", transaction: revoke, signer: signer), client)
            let last = try #require(try harness.ledger.history(account: Self.account).last)
            guard case .storeTransaction(let report) = last.event.payload else { throw TestFailure("not a store report: \(last)") }
            #expect(report.transaction == "23456")
            #expect(report.revokedAt == AppStoreRecorder.timestamp(1_698_148_950_000))
            #expect(report.revocationReason == 1)
            #expect(report.source == "notification REVOKE")
            let projection = try await client.account(Self.account, asOf: Self.duringSubscription)
            #expect(projection["entitlements"] as? [String] == [])
            let subscriptions = try #require(projection["subscriptions"] as? [[String: Any]])
            #expect(subscriptions.map { $0["status"] as? Int } == [5])
        }
    }

    @Test func aConsumableIsCreditedOnceEvenWhenTheAppReportedItFirst() async throws {
        let signer = try TestAppStoreSigner()
        try await Self.run(signer: signer) { _, client in
            let account = Self.account
            _ = try await client.post(events: [
                Lines.added("app-1", account, payment: "P1", product: "com.example.coins"),
                Lines.purchased("app-2", account, payment: "P1", transaction: "900"),
            ])
            let coins = try Self.transaction([
                "transactionId": "900", "originalTransactionId": "900", "productId": "com.example.coins",
                "type": "Consumable", "expiresDate": NSNull(), "quantity": 2,
            ])
            let answer = try await Self.post(try Self.notification("ONE_TIME_CHARGE", uuid: "u1", transaction: coins, signer: signer), client).object
            // The store's entry takes the transaction without a second credit, and the server
            // finishes it (1.1); the app's entry is the app's to finish.
            let outcomes = try #require(answer["outcomes"] as? [[String: Any]])
            #expect(outcomes.map { $0["outcome"] as? String } == ["appended", "appended", "appended"])
            let projection6 = try await client.account(account)
            #expect(projection6["balances"] as? [String: Int] == ["coins": 100])
            #expect((projection6["unfinished"] as? [[String: Any]])?.map { $0["payment"] as? String } == ["P1"])

            // A purchase the app never reported is credited from the notification alone.
            let second = try Self.transaction([
                "transactionId": "901", "originalTransactionId": "901", "productId": "com.example.coins",
                "type": "Consumable", "expiresDate": NSNull(), "quantity": 2,
            ])
            _ = try await Self.post(try Self.notification("ONE_TIME_CHARGE", uuid: "u2", transaction: second, signer: signer), client)
            let projection7 = try await client.account(account)
            #expect(projection7["balances"] as? [String: Int] == ["coins": 300])
        }
    }

    @Test func aNotificationWithoutAnAccountIsRecordedForAudit() async throws {
        let signer = try TestAppStoreSigner()
        try await Self.run(signer: signer) { harness, client in
            let body = try Self.notification("ONE_TIME_CHARGE", uuid: "u-anonymous", transaction: Self.transaction(["appAccountToken": NSNull()]), signer: signer)
            let answer = try await Self.post(body, client)
            #expect(answer.status == .ok)
            #expect(try answer.object["action"] as? String == "unattributed")
            #expect(harness.ledger.position == 0)
            let audit = try String(contentsOfFile: harness.directory + "/unattributed.jsonl", encoding: .utf8)
            let line = try #require(try JSONSerialization.jsonObject(with: Data(audit.utf8)) as? [String: Any])
            #expect(line["notificationUUID"] as? String == "u-anonymous")
            #expect(line["transactionId"] as? String == "23456")
            #expect((line["signedPayload"] as? String)?.split(separator: ".").count == 3)
        }
    }

    /// Without `appAccountToken`, a refund goes to the account that holds its transaction, and
    /// a renewal to the account that holds its original transaction: the ledger knows them.
    @Test func aNotificationWithoutATokenGoesToTheAccountHoldingItsTransaction() async throws {
        let signer = try TestAppStoreSigner()
        try await Self.run(signer: signer) { harness, client in
            _ = try await client.post(events: [
                Lines.added("app-1", "player-9", payment: "P1", product: "com.example.coins"),
                Lines.purchased("app-2", "player-9", payment: "P1", transaction: "900"),
            ])
            #expect(try await client.account("player-9")["balances"] as? [String: Int] == ["coins": 100])
            let refund = try Self.transaction([
                "transactionId": "900", "originalTransactionId": "900", "productId": "com.example.coins",
                "type": "Consumable", "expiresDate": NSNull(), "appAccountToken": NSNull(),
            ], revoked: true)
            let refunded = try await Self.post(try Self.notification("REFUND", uuid: "r1", transaction: refund, signer: signer), client).object
            #expect(refunded["action"] as? String == "revoke")
            #expect((refunded["outcomes"] as? [[String: Any]])?.map { $0["outcome"] as? String } == ["appended"])
            #expect(try await client.account("player-9")["balances"] as? [String: Int] == ["coins": 0])

            let first = try Self.transaction(["transactionId": "12345", "originalTransactionId": "12345"])
            _ = try await Self.post(try Self.notification("SUBSCRIBED", uuid: "s1", transaction: first, signer: signer), client)
            let renewal = try Self.transaction([
                "transactionId": "23457", "originalTransactionId": "12345", "appAccountToken": NSNull(),
                "purchaseDate": 1_698_149_000_000, "expiresDate": 1_698_150_000_000,
            ])
            let renewed = try await Self.post(try Self.notification("DID_RENEW", uuid: "s2", transaction: renewal, signer: signer), client).object
            #expect(renewed["action"] as? String == "purchase")
            let last = try #require(try harness.ledger.history(account: Self.account).last)
            #expect(last.event.id == "s2/transaction")
            #expect(FileManager.default.fileExists(atPath: harness.directory + "/unattributed.jsonl") == false)

            // An id no event could carry (4,000 bytes) is held by no one: answered, not a failure.
            // (Without its customer's appTransactionId, which this account has by now.)
            let long = String(repeating: "9", count: 4000)
            let strange = try Self.transaction(
                ["transactionId": long, "originalTransactionId": long, "appAccountToken": NSNull(), "appTransactionId": NSNull()], revoked: true)
            let answer = try await Self.post(try Self.notification("REFUND", uuid: "r-long", transaction: strange, signer: signer), client)
            #expect(answer.status == .ok)
            #expect(try answer.object["action"] as? String == "unattributed")
        }
    }

    /// A refund that arrives before its purchase is kept, and takes the purchase's credit back
    /// as soon as the purchase arrives: the balance is what it would be in Apple's order.
    @Test func aRefundBeforeItsPurchaseIsKeptAndAppliedWhenThePurchaseArrives() async throws {
        let signer = try TestAppStoreSigner()
        try await Self.run(signer: signer) { harness, client in
            let coins: [String: Any] = [
                "transactionId": "777", "originalTransactionId": "777", "productId": "com.example.coins",
                "type": "Consumable", "expiresDate": NSNull(), "subscriptionGroupIdentifier": NSNull(),
            ]
            let refund = try Self.transaction(coins, revoked: true)
            let answer = try await Self.post(try Self.notification("REFUND", uuid: "r-early", transaction: refund, signer: signer), client)
            #expect(answer.status == .ok)
            #expect(try answer.object["action"] as? String == "revoke")
            #expect(harness.ledger.position == 1)
            #expect(try await client.account(Self.account)["balances"] as? [String: Int] == [:])

            let purchase = try Self.transaction(coins.merging(["signedDate": 1_698_148_800_000]) { $1 })
            _ = try await Self.post(try Self.notification("ONE_TIME_CHARGE", uuid: "p-late", transaction: purchase, signer: signer), client)
            let projection = try await client.account(Self.account)
            #expect(projection["balances"] as? [String: Int] == ["coins": 0])
            // The refund was signed after the purchase: it stays in force.
            let purchases = try #require(projection["storeTransactions"] as? [[String: Any]])
            #expect(purchases.map { $0["revoked"] as? Bool } == [true])
        }
    }

    @Test func aProductOutsideTheCatalogIsRejectedButAcknowledged() async throws {
        let signer = try TestAppStoreSigner()
        try await Self.run(signer: signer) { harness, client in
            let body = try Self.notification("SUBSCRIBED", uuid: "u1", transaction: Self.transaction(["productId": "com.example.unknown"]), signer: signer)
            let answer = try await Self.post(body, client)
            #expect(answer.status == .ok)
            #expect((try answer.object["outcomes"] as? [[String: Any]])?.map { $0["error"] as? String } == ["unknownProduct", "unknownProduct"])
            #expect(harness.ledger.position == 0)
            // Apple will not send it again: it is kept for audit.
            let audit = try String(contentsOfFile: harness.directory + "/unattributed.jsonl", encoding: .utf8)
            #expect(audit.contains("com.example.unknown"))
        }
    }

    @Test func forgedOrForeignNotificationsAreRefusedAndChangeNothing() async throws {
        let signer = try TestAppStoreSigner()
        let stranger = try TestAppStoreSigner()
        try await Self.run(signer: signer) { harness, client in
            // Signed by a chain this server does not trust.
            let forged = try await Self.post(try Self.notification("SUBSCRIBED", uuid: "u1", transaction: Self.transaction(), signer: stranger), client)
            #expect(forged.status == .badRequest)
            #expect(forged.errorCode == "VERIFICATION_FAILURE")
            // A transaction of another app inside a genuine notification.
            let foreign = try await Self.post(try Self.notification("SUBSCRIBED", uuid: "u2", transaction: Self.transaction(["bundleId": "com.other"]), signer: signer), client)
            #expect(foreign.errorCode == "INVALID_APP_IDENTIFIER")
            // Not the body Apple sends.
            let garbage = try await Self.post("{\"payload\": 1}", client)
            #expect(garbage.status == .badRequest)
            #expect(harness.ledger.position == 0)
        }
    }

    /// Apple's signed samples get Apple's verdicts: its verifier's strict X.509 checks refuse
    /// the samples' test chain (the leaf has no authority key identifier), and so does the
    /// server (AppleVerifierParityTests asks Apple's verifier itself).
    @Test func applesSignedSamplesAreRefusedAsApplesStrictVerifierRefusesThem() async throws {
        let root = try AppleFixtures.testCA
        try await ServerHarness.run(notifications: { ledger, directory in
            AppStoreNotificationHandler(
                verifier: AppStoreSignedDataVerifier(trustedRoots: [root], bundleId: "com.example", appAppleId: 1234, environment: .sandbox),
                unattributed: UnattributedNotificationLog(path: directory + "/unattributed.jsonl"), ledger: ledger)
        }) { harness, client in
            for (sample, code) in [("testNotification", "VERIFICATION_FAILURE"), ("wrongBundleId", "VERIFICATION_FAILURE"), ("missingX5CHeaderClaim", "INVALID_JWT_FORMAT")] {
                let answer = try await Self.post("{\"signedPayload\": \"\(try AppleFixtures.signedData(sample))\"}", client)
                #expect(answer.status == .badRequest, "\(sample)")
                #expect(answer.errorCode == code, "\(sample): \(answer.body)")
            }
            #expect(harness.ledger.position == 0)
        }
    }
}
