import Foundation
import HTTPTypes
import HummingbirdTesting
import PurchaseLedger
@testable import PurchaseLedgerAppStore
@testable import PurchaseLedgerServer
import Testing
import LedgerTestSupport

/// Sandbox and Production in one deployment: App Review and TestFlight buy in the sandbox
/// against the production app, so a production server takes both, holds each payload to its
/// own environment's rules, and never lets a sandbox report change a production answer.
struct AppStoreEnvironmentsTests {
    typealias Notifications = AppStoreNotificationTests

    static func bothEnvironments(_ signer: TestAppStoreSigner) -> AppStoreSignedDataVerifier {
        AppStoreSignedDataVerifier(trustedRoots: [signer.root], bundleId: "com.example", appAppleId: 41234, environments: [.production, .sandbox])
    }

    /// Apple's notification model in `environment`, carrying a transaction of
    /// `transactionEnvironment` (the same unless asked), with `appAppleId`.
    static func notification(
        _ type: String, uuid: String, environment: String, transactionEnvironment: String? = nil, appAppleId: Int64?,
        transaction changes: [String: Any] = [:], signer: TestAppStoreSigner, subtype: String? = nil, signedDate: Int64? = nil
    ) throws -> String {
        var transaction = try Notifications.transaction(changes)
        transaction["environment"] = transactionEnvironment ?? environment
        var notification = try AppleFixtures.model("signedNotification")
        notification["notificationType"] = type
        notification["notificationUUID"] = uuid
        notification["subtype"] = subtype
        if let signedDate { notification["signedDate"] = signedDate }
        var data = try #require(notification["data"] as? [String: Any])
        data["environment"] = environment
        data["appAppleId"] = appAppleId
        data["signedRenewalInfo"] = nil
        data["signedTransactionInfo"] = try signer.sign(transaction)
        notification["data"] = data
        return "{\"signedPayload\": \"\(try signer.sign(notification))\"}"
    }

    @Test func eachPayloadIsHeldToItsOwnEnvironmentsRules() async throws {
        let signer = try TestAppStoreSigner()
        let verifier = Self.bothEnvironments(signer)
        func payload(_ body: String) throws -> String {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any])
            return try #require(object["signedPayload"] as? String)
        }
        // The sandbox needs no App Apple ID (TestFlight builds are not the App Store's app yet).
        let sandbox = try payload(Self.notification("TEST", uuid: "s", environment: "Sandbox", appAppleId: nil, signer: signer))
        #expect(try await verifier.verifyNotification(sandbox).identity.environment == "Sandbox")
        // Production does.
        let production = try payload(Self.notification("TEST", uuid: "p", environment: "Production", appAppleId: 41234, signer: signer))
        #expect(try await verifier.verifyNotification(production).identity.environment == "Production")
        let anotherApp = try payload(Self.notification("TEST", uuid: "p2", environment: "Production", appAppleId: 999, signer: signer))
        await expect(.invalidAppIdentifier) { _ = try await verifier.verifyNotification(anotherApp) }
        // An environment not taken is refused, held to the first one's rules (so it is signed).
        let xcode = try payload(Self.notification("TEST", uuid: "x", environment: "Xcode", appAppleId: 41234, signer: signer))
        await expect(.invalidEnvironment) { _ = try await verifier.verifyNotification(xcode) }
        // A one-environment verifier is Apple's: a sandbox payload is refused in production,
        // for its environment when it names this app, for the app before that when it does not.
        let sandboxNamingTheApp = try payload(Self.notification("TEST", uuid: "s2", environment: "Sandbox", appAppleId: 41234, signer: signer))
        await expect(.invalidEnvironment) { _ = try await verifier.only(.production).verifyNotification(sandboxNamingTheApp) }
        await expect(.invalidAppIdentifier) { _ = try await verifier.only(.production).verifyNotification(sandbox) }
    }

    @Test func aSandboxPurchaseNeverChangesTheProductionAnswer() async throws {
        let signer = try TestAppStoreSigner()
        let verifier = Self.bothEnvironments(signer)
        try await ServerHarness.run(notifications: { ledger, directory in
            AppStoreNotificationHandler(
                verifier: verifier, unattributed: UnattributedNotificationLog(path: directory + "/unattributed.jsonl"), ledger: ledger)
        }) { harness, client in
            // App Review buys in the sandbox, with the account's token.
            let review = try Self.notification("SUBSCRIBED", uuid: "review", environment: "Sandbox", appAppleId: nil, signer: signer)
            #expect(try await Notifications.post(review, client).status == .ok)
            let during = Notifications.duringSubscription
            let account = Notifications.account
            let everywhere = try await client.send(.get, "/v1/accounts/\(account)?asOf=\(during)", key: TestKeys.reader).object
            #expect(everywhere["entitlements"] as? [String] == ["com.example.product"])
            let production = try await client.send(.get, "/v1/accounts/\(account)?asOf=\(during)&environment=Production", key: TestKeys.reader).object
            #expect(production["entitlements"] as? [String] == [])
            let sandbox = try await client.send(.get, "/v1/accounts/\(account)?asOf=\(during)&environment=Sandbox", key: TestKeys.reader).object
            #expect(sandbox["entitlements"] as? [String] == ["com.example.product"])

            // A production notification may not carry a sandbox transaction: refused, nothing appended.
            let position = harness.ledger.position
            let mixed = try Self.notification(
                "SUBSCRIBED", uuid: "mixed", environment: "Production", transactionEnvironment: "Sandbox", appAppleId: 41234,
                transaction: ["transactionId": "99999"], signer: signer)
            let refused = try await Notifications.post(mixed, client)
            #expect(refused.status == .badRequest)
            #expect(try refused.object["error"] as? String == "INVALID_ENVIRONMENT")
            #expect(harness.ledger.position == position)

            // The real purchase, in production: the production answer has it.
            let bought = try Self.notification(
                "SUBSCRIBED", uuid: "bought", environment: "Production", appAppleId: 41234,
                transaction: ["transactionId": "70001", "originalTransactionId": "70001"], signer: signer)
            #expect(try await Notifications.post(bought, client).status == .ok)
            let afterwards = try await client.send(.get, "/v1/accounts/\(account)?asOf=\(during)&environment=Production", key: TestKeys.reader).object
            #expect(afterwards["entitlements"] as? [String] == ["com.example.product"])
            let reports = try #require(afterwards["storeTransactions"] as? [[String: Any]])
            #expect(reports.map { $0["environment"] as? String } == ["Production"])
        }
    }

    /// Issue 41, point 8: App Review's coins are the sandbox's. The unscoped balance (what the
    /// app delivers from) has them; the production view does not.
    @Test func aSandboxConsumableNeverCreditsTheProductionBalance() async throws {
        let signer = try TestAppStoreSigner()
        let verifier = Self.bothEnvironments(signer)
        try await ServerHarness.run(notifications: { ledger, directory in
            AppStoreNotificationHandler(
                verifier: verifier, unattributed: UnattributedNotificationLog(path: directory + "/unattributed.jsonl"), ledger: ledger)
        }) { _, client in
            let coins = try Self.notification(
                "ONE_TIME_CHARGE", uuid: "review-coins", environment: "Sandbox", appAppleId: nil,
                transaction: [
                    "transactionId": "900", "originalTransactionId": "900", "productId": "com.example.coins", "type": "Consumable",
                    "expiresDate": NSNull(), "subscriptionGroupIdentifier": NSNull(), "quantity": 2,
                ], signer: signer)
            #expect(try await Notifications.post(coins, client).status == .ok)
            let account = Notifications.account
            func balances(_ query: String) async throws -> [String: Int]? {
                try await client.send(.get, "/v1/accounts/\(account)\(query)", key: TestKeys.reader).object["balances"] as? [String: Int]
            }
            #expect(try await balances("") == ["coins": 200])
            #expect(try await balances("?environment=Sandbox") == ["coins": 200])
            #expect(try await balances("?environment=Production") == ["coins": 0])
        }
    }

    @Test func theConfigurationTakesOneEnvironmentOrSeveral() throws {
        func configuration(_ appStore: String) throws -> ServerConfiguration {
            let json = #"{"ledger": "/tmp/x", "keys": [], "appStore": "# + appStore + "}"
            return try JSONDecoder().decode(ServerConfiguration.self, from: Data(json.utf8))
        }
        let both = try configuration(#"{"bundleId": "com.example", "appAppleId": 1, "environments": ["Production", "Sandbox"], "trustedRoots": ["r.der"]}"#)
        #expect(both.appStore?.acceptedEnvironments == [.production, .sandbox])
        try both.check()
        let one = try configuration(#"{"bundleId": "com.example", "environment": "Sandbox", "trustedRoots": ["r.der"]}"#)
        #expect(one.appStore?.acceptedEnvironments == [.sandbox])
        try one.check()
        for (appStore, message) in [
            (#"{"bundleId": "b", "environments": ["Production", "Sandbox"], "trustedRoots": ["r.der"]}"#, "appAppleId"),
            (#"{"bundleId": "b", "environment": "Sandbox", "environments": ["Sandbox"], "trustedRoots": ["r.der"]}"#, "not both"),
            (#"{"bundleId": "b", "trustedRoots": ["r.der"]}"#, "not both"),
            (#"{"bundleId": "b", "environments": [], "trustedRoots": ["r.der"]}"#, "at least one"),
            (#"{"bundleId": "b", "environments": ["Sandbox", "Sandbox"], "trustedRoots": ["r.der"]}"#, "each once"),
            (#"{"bundleId": "b", "environments": ["Sandbox", "Xcode"], "trustedRoots": ["r.der"]}"#, "unsigned"),
        ] {
            var refused = try configuration(appStore)
            refused.bind.host = "0.0.0.0"
            #expect { try refused.check() } throws: { "\($0)".contains(message) }
        }
    }
}
