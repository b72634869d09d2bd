import Foundation
import HTTPTypes
import HummingbirdTesting
import PurchaseLedger
@testable import PurchaseLedgerAppStore
@testable import PurchaseLedgerServer
import Testing
import LedgerTestSupport
import Logging

/// The subscription lifecycle as the App Store reports it, through `POST /v1/appstore/notifications`:
/// every notification type and subtype (the table of docs/SERVER.md), then grace periods,
/// upgrades, reversed refunds, extensions, Family Sharing, environments and account tokens.
struct AppStoreLifecycleTests {
    typealias Notifications = AppStoreNotificationTests
    static let account = Notifications.account
    /// Apple's fixture: purchased 1698148900000, expires 1698149000000 (12:03:20Z).
    static let expiry = 1_698_149_000_000.0

    /// One row of docs/SERVER.md's table: what a notification carries and what it appends.
    struct Row: Sendable, CustomTestStringConvertible {
        var type: String
        var subtype: String?
        var transaction = true
        var renewal = true
        var action: String
        var events: [String]

        var testDescription: String { type + (subtype.map { "/" + $0 } ?? "") }
    }

    static let purchase = ["transactionUpdated", "transactionFinished", "storeTransaction", "renewalInfo"]
    static let reports = ["storeTransaction", "renewalInfo"]

    static let table: [Row] = [
        Row(type: "SUBSCRIBED", subtype: "INITIAL_BUY", action: "purchase", events: purchase),
        Row(type: "SUBSCRIBED", subtype: "RESUBSCRIBE", action: "purchase", events: purchase),
        Row(type: "DID_RENEW", action: "purchase", events: purchase),
        Row(type: "DID_RENEW", subtype: "BILLING_RECOVERY", action: "purchase", events: purchase),
        Row(type: "OFFER_REDEEMED", subtype: "INITIAL_BUY", action: "purchase", events: purchase),
        Row(type: "OFFER_REDEEMED", subtype: "RESUBSCRIBE", action: "purchase", events: purchase),
        Row(type: "OFFER_REDEEMED", subtype: "UPGRADE", action: "purchase", events: purchase),
        Row(type: "OFFER_REDEEMED", subtype: "DOWNGRADE", action: "purchase", events: purchase),
        Row(type: "OFFER_REDEEMED", action: "purchase", events: purchase),
        Row(type: "ONE_TIME_CHARGE", renewal: false, action: "purchase", events: Array(purchase.dropLast())),
        Row(type: "DID_CHANGE_RENEWAL_PREF", subtype: "UPGRADE", action: "purchase", events: purchase),
        Row(type: "DID_CHANGE_RENEWAL_PREF", subtype: "DOWNGRADE", action: "record", events: reports),
        Row(type: "DID_CHANGE_RENEWAL_PREF", action: "record", events: reports),
        Row(type: "DID_CHANGE_RENEWAL_STATUS", subtype: "AUTO_RENEW_ENABLED", action: "record", events: reports),
        Row(type: "DID_CHANGE_RENEWAL_STATUS", subtype: "AUTO_RENEW_DISABLED", action: "record", events: reports),
        Row(type: "DID_FAIL_TO_RENEW", action: "record", events: reports),
        Row(type: "DID_FAIL_TO_RENEW", subtype: "GRACE_PERIOD", action: "record", events: reports),
        Row(type: "GRACE_PERIOD_EXPIRED", action: "record", events: reports),
        Row(type: "EXPIRED", subtype: "VOLUNTARY", action: "record", events: reports),
        Row(type: "EXPIRED", subtype: "BILLING_RETRY", action: "record", events: reports),
        Row(type: "EXPIRED", subtype: "PRICE_INCREASE", action: "record", events: reports),
        Row(type: "EXPIRED", subtype: "PRODUCT_NOT_FOR_SALE", action: "record", events: reports),
        Row(type: "PRICE_INCREASE", subtype: "PENDING", action: "record", events: reports),
        Row(type: "PRICE_INCREASE", subtype: "ACCEPTED", action: "record", events: reports),
        Row(type: "PRICE_CHANGE", action: "record", events: reports),
        Row(type: "REFUND", action: "revoke", events: reports),
        Row(type: "REFUND", renewal: false, action: "revoke", events: ["storeTransaction"]),
        Row(type: "REVOKE", action: "revoke", events: reports),
        Row(type: "REFUND_REVERSED", action: "restore", events: reports),
        Row(type: "REFUND_DECLINED", renewal: false, action: "record", events: ["storeTransaction"]),
        Row(type: "RENEWAL_EXTENDED", action: "record", events: reports),
        Row(type: "RENEWAL_EXTENSION", subtype: "SUMMARY", transaction: false, renewal: false, action: "ignored", events: []),
        Row(type: "RENEWAL_EXTENSION", subtype: "FAILURE", action: "record", events: reports),
        Row(type: "CONSUMPTION_REQUEST", renewal: false, action: "refundRequest", events: ["storeTransaction", "consumptionRequest"]),
        Row(type: "METADATA_UPDATE", action: "record", events: reports),
        Row(type: "MIGRATION", action: "record", events: reports),
        Row(type: "TEST", transaction: false, renewal: false, action: "ignored", events: []),
        Row(type: "EXTERNAL_PURCHASE_TOKEN", subtype: "UNREPORTED", transaction: false, renewal: false, action: "ignored", events: []),
        Row(type: "RESCIND_CONSENT", transaction: false, renewal: false, action: "ignored", events: []),
        // A type Apple adds later still records what it carries.
        Row(type: "SOMETHING_NEW", action: "record", events: reports),
    ]

    @Test(arguments: table)
    func everyNotificationTypeAppendsWhatTheTableSays(_ row: Row) async throws {
        let signer = try TestAppStoreSigner()
        try await Notifications.run(signer: signer) { harness, client in
            let body = try Notifications.notification(
                row.type, subtype: row.subtype, uuid: "n-1",
                transaction: row.transaction ? Notifications.transaction() : nil,
                renewal: row.renewal ? Notifications.renewal() : nil, signer: signer)
            let answer = try await Notifications.post(body, client)
            #expect(answer.status == .ok)
            let object = try answer.object
            #expect(object["action"] as? String == row.action)
            #expect(object["subtype"] as? String == row.subtype)
            let recorded = try harness.ledger.history(account: Self.account)
            #expect(recorded.map(\.event.type.rawValue) == row.events)
            #expect(harness.ledger.position == UInt64(row.events.count))
            for record in recorded {
                if case .storeTransaction(let report) = record.event.payload {
                    #expect(report.source == "notification " + row.testDescription.replacingOccurrences(of: "/", with: " "))
                    #expect(report.environment == .sandbox)
                    #expect((report.revokedAt != nil) == (row.action == "revoke"))
                }
            }
        }
    }

    /// Posts `type` with `transaction` and `renewal`, expecting it answered 200.
    static func send(
        _ type: String, subtype: String? = nil, uuid: String, transaction: [String: Any]? = nil, renewal: [String: Any]? = nil,
        signer: TestAppStoreSigner, _ client: any TestClientProtocol
    ) async throws {
        let answer = try await Notifications.post(try Notifications.notification(
            type, subtype: subtype, uuid: uuid, transaction: transaction, renewal: renewal, signer: signer), client)
        guard answer.status == .ok else { throw TestFailure("\(type) answered \(answer.status): \(answer.body)") }
    }

    static func at(_ milliseconds: Double) -> String {
        AppStoreRecorder.timestamp(milliseconds).description
    }

    static func subscription(_ projection: [String: Any]) throws -> [String: Any] {
        let subscriptions = try #require(projection["subscriptions"] as? [[String: Any]])
        return try #require(subscriptions.first)
    }

    /// Apple keeps serving a subscriber whose renewal failed until the grace period ends.
    @Test func theGracePeriodKeepsTheSubscriberServedUntilItEnds() async throws {
        let signer = try TestAppStoreSigner()
        try await Notifications.run(signer: signer) { _, client in
            try await Self.send("SUBSCRIBED", uuid: "s", transaction: Notifications.transaction(),
                                renewal: Notifications.renewal(["isInBillingRetryPeriod": false, "gracePeriodExpiresDate": NSNull()]),
                                signer: signer, client)
            let graceEnd = Self.expiry + 3_600_000
            try await Self.send("DID_FAIL_TO_RENEW", subtype: "GRACE_PERIOD", uuid: "f",
                                transaction: Notifications.transaction(["signedDate": Self.expiry]),
                                renewal: Notifications.renewal(["isInBillingRetryPeriod": true, "gracePeriodExpiresDate": graceEnd, "signedDate": Self.expiry]),
                                signer: signer, client)
            let inGrace = try await client.account(Self.account, asOf: Self.at(Self.expiry + 60_000))
            #expect(inGrace["entitlements"] as? [String] == ["com.example.product"])
            #expect(try Self.subscription(inGrace)["status"] as? Int == 4)
            #expect(try Self.subscription(inGrace)["gracePeriodEndsAt"] as? String == Self.at(graceEnd))
            let afterGrace = try await client.account(Self.account, asOf: Self.at(graceEnd + 60_000))
            #expect(afterGrace["entitlements"] as? [String] == [])
            #expect(try Self.subscription(afterGrace)["status"] as? Int == 3)

            try await Self.send("EXPIRED", subtype: "BILLING_RETRY", uuid: "x",
                                transaction: Notifications.transaction(["signedDate": graceEnd + 86_400_000]),
                                renewal: Notifications.renewal(["isInBillingRetryPeriod": false, "autoRenewStatus": 0, "signedDate": graceEnd + 86_400_000]),
                                signer: signer, client)
            let expired = try await client.account(Self.account, asOf: Self.at(graceEnd + 60_000))
            #expect(try Self.subscription(expired)["status"] as? Int == 2)
            #expect(try Self.subscription(expired)["willRenew"] as? Bool == false)
        }
    }

    /// An upgrade takes effect at once: the new plan is granted, the old one no more.
    @Test func anUpgradeGrantsTheNewPlanAndEndsTheOldAtOnce() async throws {
        let signer = try TestAppStoreSigner()
        try await Notifications.run(signer: signer) { _, client in
            try await Self.send("SUBSCRIBED", uuid: "s", transaction: Notifications.transaction(), signer: signer, client)
            let upgradedAt = 1_698_148_950_000.0
            try await Self.send("DID_CHANGE_RENEWAL_PREF", subtype: "UPGRADE", uuid: "u", transaction: Notifications.transaction([
                "transactionId": "23470", "productId": "com.example.product.2", "purchaseDate": upgradedAt,
                "expiresDate": upgradedAt + 2_592_000_000, "signedDate": upgradedAt,
            ]), renewal: Notifications.renewal(["productId": "com.example.product.2", "autoRenewProductId": "com.example.product.2"]),
                signer: signer, client)
            let now = try await client.account(Self.account, asOf: Self.at(upgradedAt + 1000))
            #expect(now["entitlements"] as? [String] == ["com.example.product.2"])
            let subscription = try Self.subscription(now)
            #expect(subscription["product"] as? String == "com.example.product.2")
            #expect(subscription["transaction"] as? String == "23470")
            #expect(subscription["renewsTo"] as? String == "com.example.product.2")
            // Apple's later report of the old transaction, marked upgraded, changes nothing more.
            try await Self.send("DID_CHANGE_RENEWAL_STATUS", subtype: "AUTO_RENEW_DISABLED", uuid: "o",
                                transaction: Notifications.transaction(["isUpgraded": true, "signedDate": upgradedAt + 5000]),
                                signer: signer, client)
            let later = try await client.account(Self.account, asOf: Self.at(upgradedAt + 10_000))
            #expect(later["entitlements"] as? [String] == ["com.example.product.2"])
        }
    }

    /// A reversed refund gives back what the refund took, whichever of the two arrives first.
    @Test(arguments: [false, true])
    func aReversedRefundRestoresTheSubscription(reversalFirst: Bool) async throws {
        let signer = try TestAppStoreSigner()
        try await Notifications.run(signer: signer) { _, client in
            try await Self.send("SUBSCRIBED", uuid: "s", transaction: Notifications.transaction(), signer: signer, client)
            let refund = { try await Self.send("REFUND", uuid: "r", transaction: Notifications.transaction(["signedDate": 1_698_148_920_000], revoked: true), signer: signer, client) }
            let reversal = { try await Self.send("REFUND_REVERSED", uuid: "v", transaction: Notifications.transaction(["signedDate": 1_698_148_940_000], revoked: true), signer: signer, client) }
            if reversalFirst {
                try await reversal()
                try await refund()
            } else {
                try await refund()
                let refunded = try await client.account(Self.account, asOf: Notifications.duringSubscription)
                #expect(refunded["entitlements"] as? [String] == [])
                try await reversal()
            }
            let restored = try await client.account(Self.account, asOf: Notifications.duringSubscription)
            #expect(restored["entitlements"] as? [String] == ["com.example.product"])
            #expect(try Self.subscription(restored)["status"] as? Int == 1)
        }
    }

    /// A refunded consumable's credit comes back when Apple reverses the refund.
    @Test func aReversedRefundOfAConsumableCreditsItAgain() async throws {
        let signer = try TestAppStoreSigner()
        try await Notifications.run(signer: signer) { _, client in
            let coins: [String: Any] = [
                "transactionId": "900", "originalTransactionId": "900", "productId": "com.example.coins",
                "type": "Consumable", "expiresDate": NSNull(), "subscriptionGroupIdentifier": NSNull(),
            ]
            try await Self.send("ONE_TIME_CHARGE", uuid: "p", transaction: Notifications.transaction(coins), signer: signer, client)
            #expect(try await client.account(Self.account)["balances"] as? [String: Int] == ["coins": 100])
            try await Self.send("REFUND", uuid: "r", transaction: Notifications.transaction(coins.merging(["signedDate": 1_698_148_920_000]) { $1 }, revoked: true), signer: signer, client)
            #expect(try await client.account(Self.account)["balances"] as? [String: Int] == ["coins": 0])
            try await Self.send("REFUND_REVERSED", uuid: "v", transaction: Notifications.transaction(coins.merging(["signedDate": 1_698_148_940_000]) { $1 }), signer: signer, client)
            #expect(try await client.account(Self.account)["balances"] as? [String: Int] == ["coins": 100])
        }
    }

    /// Access follows an extended expiry.
    @Test func anExtensionMovesTheExpiry() async throws {
        let signer = try TestAppStoreSigner()
        try await Notifications.run(signer: signer) { _, client in
            try await Self.send("SUBSCRIBED", uuid: "s", transaction: Notifications.transaction(), signer: signer, client)
            #expect(try await client.account(Self.account, asOf: Notifications.afterSubscription)["entitlements"] as? [String] == [])
            try await Self.send("RENEWAL_EXTENDED", uuid: "e", transaction: Notifications.transaction([
                "expiresDate": Self.expiry + 86_400_000, "signedDate": Self.expiry - 1000,
            ]), signer: signer, client)
            let extended = try await client.account(Self.account, asOf: Notifications.afterSubscription)
            #expect(extended["entitlements"] as? [String] == ["com.example.product"])
            #expect(try Self.subscription(extended)["expiresAt"] as? String == Self.at(Self.expiry + 86_400_000))
        }
    }

    /// A purchase shared with the family grants the family member, and its revocation (the
    /// organizer stopped sharing) takes it from that member alone.
    @Test func aFamilySharedPurchaseIsGrantedAndRevokedAlone() async throws {
        let signer = try TestAppStoreSigner()
        try await Notifications.run(signer: signer) { _, client in
            let organizer = "11111111-1111-4111-8111-111111111111"
            let member = "22222222-2222-4222-8222-222222222222"
            let lifetime: [String: Any] = [
                "productId": "com.example.lifetime", "type": "Non-Consumable", "expiresDate": NSNull(),
                "subscriptionGroupIdentifier": NSNull(),
            ]
            try await Self.send("ONE_TIME_CHARGE", uuid: "o", transaction: Notifications.transaction(lifetime.merging([
                "transactionId": "500", "originalTransactionId": "500", "appAccountToken": organizer,
            ]) { $1 }), signer: signer, client)
            let shared = lifetime.merging([
                "transactionId": "501", "originalTransactionId": "500", "appAccountToken": member, "inAppOwnershipType": "FAMILY_SHARED",
            ]) { $1 }
            try await Self.send("ONE_TIME_CHARGE", uuid: "m", transaction: Notifications.transaction(shared), signer: signer, client)
            let granted = try await client.account(member)
            #expect(granted["entitlements"] as? [String] == ["com.example.lifetime"])
            #expect((granted["storeTransactions"] as? [[String: Any]])?.first?["ownership"] as? String == "FAMILY_SHARED")

            try await Self.send("REVOKE", uuid: "mr", transaction: Notifications.transaction(shared.merging([
                "signedDate": 1_698_149_900_000, "revocationType": "FAMILY_REVOKE",
            ]) { $1 }, revoked: true), signer: signer, client)
            let revoked = try await client.account(member)
            #expect(revoked["entitlements"] as? [String] == [])
            #expect((revoked["storeTransactions"] as? [[String: Any]])?.first?["revocationType"] as? String == "FAMILY_REVOKE")
            #expect(try await client.account(organizer)["entitlements"] as? [String] == ["com.example.lifetime"])
        }
    }

    /// Apple sends tokens in lowercase; an app that wrote its account id with Swift's uppercase
    /// `uuidString` gets the same account.
    @Test func anUppercaseTokenIsTheSameAccount() async throws {
        #expect(AppStoreRecorder.account(fromToken: "7E3FB20B-4CDB-47CC-936D-99D65F608138") == Self.account)
        #expect(AppStoreRecorder.account(fromToken: Self.account) == Self.account)
        #expect(AppStoreRecorder.account(fromToken: "not-a-uuid") == "not-a-uuid")
        #expect(AppStoreRecorder.account(fromToken: "") == nil)
        let signer = try TestAppStoreSigner()
        try await Notifications.run(signer: signer) { harness, client in
            try await Self.send("SUBSCRIBED", uuid: "s", transaction: Notifications.transaction(["appAccountToken": Self.account.uppercased()]),
                                signer: signer, client)
            #expect(try harness.ledger.history(account: Self.account).count == 3)
        }
    }

    /// The store's reports say which environment a purchase was made in.
    @Test func sandboxPurchasesAreMarked() async throws {
        let signer = try TestAppStoreSigner()
        try await Notifications.run(signer: signer) { _, client in
            try await Self.send("SUBSCRIBED", uuid: "s", transaction: Notifications.transaction(), signer: signer, client)
            let projection = try await client.account(Self.account, asOf: Notifications.duringSubscription)
            #expect((projection["storeTransactions"] as? [[String: Any]])?.first?["environment"] as? String == "Sandbox")
            #expect(try Self.subscription(projection)["environment"] as? String == "Sandbox")
            // Counting production only, the sandbox purchase grants nothing and is not listed.
            let path = "/v1/accounts/\(Self.account)?asOf=\(Notifications.duringSubscription)"
            let production = try await client.send(.get, path + "&environment=Production", key: TestKeys.reader).object
            #expect(production["entitlements"] as? [String] == [])
            #expect(production["storeTransactions"] == nil)
            let both = try await client.send(.get, path + "&environment=Production&environment=Sandbox", key: TestKeys.reader).object
            #expect(both["entitlements"] as? [String] == ["com.example.product"])
            let unknown = try await client.send(.get, path + "&environment=Moon", key: TestKeys.reader)
            #expect(unknown.status == .badRequest)
        }
    }
}

extension AppStoreLifecycleTests {
    /// Notifications without an account wait in the audit file; once the app has reported the
    /// purchase, attribution gives them to its account and keeps only the rest.
    @Test func attributionGivesWaitingNotificationsToTheAccountThatNowHoldsThem() async throws {
        let signer = try TestAppStoreSigner()
        try await Notifications.run(signer: signer) { harness, client in
            let coins: [String: Any] = [
                "transactionId": "900", "originalTransactionId": "900", "productId": "com.example.coins", "type": "Consumable",
                "expiresDate": NSNull(), "subscriptionGroupIdentifier": NSNull(), "appAccountToken": NSNull(),
            ]
            try await Self.send("ONE_TIME_CHARGE", uuid: "early", transaction: Notifications.transaction(coins), signer: signer, client)
            try await Self.send("REFUND", uuid: "stranger", transaction: Notifications.transaction(
                coins.merging(["transactionId": "901", "originalTransactionId": "901", "appTransactionId": "another-customer"]) { $1 }, revoked: true),
                signer: signer, client)
            let path = harness.directory + "/unattributed.jsonl"
            #expect(try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").count == 2)
            #expect(harness.ledger.position == 0)

            _ = try await client.post(events: [
                Lines.added("app-1", "player-9", payment: "P1", product: "com.example.coins"),
                Lines.purchased("app-2", "player-9", payment: "P1", transaction: "900"),
            ])
            let handler = AppStoreNotificationHandler(
                verifier: signer.verifier(), unattributed: UnattributedNotificationLog(path: path), ledger: harness.ledger)
            let first = try await handler.attributeUnattributed(logger: Logger(label: "test"))
            #expect(first == .init(attributed: 1, kept: 1))
            let remaining = try String(contentsOfFile: path, encoding: .utf8)
            #expect(remaining.contains("\"stranger\"") && !remaining.contains("\"early\""))
            #expect(!FileManager.default.fileExists(atPath: path + ".attributing"))
            let history = try harness.ledger.history(account: "player-9").map(\.event.id)
            #expect(history == ["app-1", "app-2", "early", "early/finish", "early/transaction"])
            #expect(try await client.account("player-9")["balances"] as? [String: Int] == ["coins": 100])

            let second = try await handler.attributeUnattributed(logger: Logger(label: "test"))
            #expect(second == .init(attributed: 0, kept: 1))
            #expect(try harness.ledger.history(account: "player-9").count == 5)
        }
    }
}

extension AppStoreLifecycleTests {
    /// Apple's CONSUMPTION_REQUEST sample, its placeholders replaced by a signed transaction and
    /// renewal info: Apple's current view is recorded, and the request (without
    /// `appStore.consumption` it is not answered; ConsumptionRequestTests answer it).
    @Test func applesConsumptionRequestSampleIsRecorded() async throws {
        let signer = try TestAppStoreSigner()
        try await Notifications.run(signer: signer) { harness, client in
            var notification = try AppleFixtures.model("signedConsumptionRequestNotification")
            var data = try #require(notification["data"] as? [String: Any])
            data["environment"] = "Sandbox"
            data["signedTransactionInfo"] = try signer.sign(Notifications.transaction())
            data["signedRenewalInfo"] = try signer.sign(Notifications.renewal())
            notification["data"] = data
            let body = "{\"signedPayload\": \"\(try signer.sign(notification))\"}"
            let answer = try await Notifications.post(body, client).object
            #expect(answer["action"] as? String == "refundRequest")
            #expect(try harness.ledger.history(account: Self.account).map(\.event.id) == [
                "002e14d5-51f5-4503-b5a8-c3a1af68eb20/transaction", "002e14d5-51f5-4503-b5a8-c3a1af68eb20/renewal",
                "002e14d5-51f5-4503-b5a8-c3a1af68eb20/consumption-request",
            ])
        }
    }
}
