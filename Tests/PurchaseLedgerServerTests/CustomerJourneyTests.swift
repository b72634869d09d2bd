import Foundation
import HTTPTypes
import HummingbirdTesting
import Logging
import PurchaseLedger
@testable import PurchaseLedgerAppStore
@testable import PurchaseLedgerServer
import Synchronization
import Testing
import LedgerTestSupport

/// One customer's journey through the server, as issue 27 tells it: a sandbox purchase during
/// App Review, a production purchase without a token, its late attribution with the token then
/// set at Apple, an upgrade inside the "pro" entitlement, and a restore on a second account
/// that transfers the subscription. Each step asserts the answers; with
/// `PURCHASE_LEDGER_JOURNEY` naming a file, the requests and answers are written there too.
struct CustomerJourneyTests {
    typealias Notifications = AppStoreNotificationTests
    typealias Environments = AppStoreEnvironmentsTests

    static let catalog = try! Catalog(
        products: serverTestCatalog.products,
        entitlements: [.init(id: "pro", products: ["com.example.product", "com.example.product.2"])])
    static let customer = Notifications.account
    static let secondAccount = "0b3a9c1e-5f2d-4e8a-9c7b-1d2e3f4a5b6c"
    /// Apple's milliseconds, `days` from now: the journey happens today, so that the feed's
    /// changes (judged at their own time) show each step.
    static func milliseconds(days: Double) -> Int64 { Int64((Date().timeIntervalSince1970 + days * 86_400) * 1000) }
    static func dated(_ changes: [String: Any], bought: Double, expires: Double) -> [String: Any] {
        changes.merging([
            "purchaseDate": milliseconds(days: bought), "originalPurchaseDate": milliseconds(days: bought),
            "expiresDate": milliseconds(days: expires), "signedDate": milliseconds(days: 0),
        ]) { $1 }
    }

    @Test func aCustomerFromAppReviewToASecondAccount() async throws {
        let signer = try TestAppStoreSigner()
        let verifier = Environments.bothEnvironments(signer)
        let store = FakeAppStore()
        let transcript = Transcript()
        let handler = Mutex<AppStoreNotificationHandler?>(nil)
        try await ServerHarness.run(catalog: Self.catalog, notifications: { ledger, directory in
            let made = AppStoreNotificationHandler(
                verifier: verifier, unattributed: UnattributedNotificationLog(path: directory + "/unattributed.jsonl"), ledger: ledger)
            handler.withLock { $0 = made }
            return made
        }, restores: .transfer) { harness, client in
            func account(_ account: String, production: Bool) async throws -> [String: Any] {
                let path = "/v1/accounts/\(account)" + (production ? "?environment=Production" : "")
                let answer = try await client.send(.get, path, key: TestKeys.reader)
                transcript.exchange("GET \(path)", answer, keys: ["entitlements", "namedEntitlements"])
                return try answer.object
            }
            func notify(_ what: String, _ body: String) async throws -> [String: Any] {
                let answer = try await Notifications.post(body, client)
                transcript.exchange("POST /v1/appstore/notifications  (\(what))", answer, keys: ["action", "account"])
                return try answer.object
            }
            func sendFromDevice(_ what: String, _ body: [String: Any]) async throws -> [String: Any] {
                let answer = try await SignedTransactionRouteTests.post(body, client)
                transcript.exchange("POST /v1/transactions  (\(what))", answer, keys: ["account", "outcomes"])
                return try answer.object
            }
            func pro(_ answer: [String: Any]) -> [String: Any]? {
                (answer["namedEntitlements"] as? [String: Any])?["pro"] as? [String: Any]
            }

            // 1. App Review buys in the sandbox, with the account's token.
            transcript.step("App Review buys the monthly subscription in the sandbox")
            _ = try await notify("SUBSCRIBED, Sandbox", try Environments.notification(
                "SUBSCRIBED", uuid: "review", environment: "Sandbox", appAppleId: nil,
                transaction: Self.dated([:], bought: -2, expires: 5), signer: signer, signedDate: Self.milliseconds(days: 0)))
            #expect(try await account(Self.customer, production: true)["entitlements"] as? [String] == [])
            #expect(pro(try await account(Self.customer, production: false))?["product"] as? String == "com.example.product")

            // 2. The customer buys in production on a device whose app passed no token.
            transcript.step("The customer buys in production; the app passed StoreKit no appAccountToken")
            let bought = Self.dated([
                "transactionId": "70001", "originalTransactionId": "70001", "appAccountToken": NSNull(), "appTransactionId": "71999",
            ], bought: -1, expires: 29)
            let unattributed = try await notify("SUBSCRIBED, Production, no token", try Environments.notification(
                "SUBSCRIBED", uuid: "bought", environment: "Production", appAppleId: 41234, transaction: bought, signer: signer, signedDate: Self.milliseconds(days: 0)))
            #expect(unattributed["action"] as? String == "unattributed")
            #expect(try await account(Self.customer, production: true)["entitlements"] as? [String] == [])

            // 3. The app reports it from the device, naming the account; the waiting
            //    notification is attributed, and the account is set as the token at Apple.
            transcript.step("The app sends the transaction naming the account; `ledger attribute`; the token is set at Apple")
            var deviceTransaction = try Notifications.transaction(bought)
            deviceTransaction["environment"] = "Production"
            let reported = try await sendFromDevice("70001, account named", [
                "signedTransaction": try signer.sign(deviceTransaction), "account": Self.customer,
            ])
            #expect(reported["account"] as? String == Self.customer)
            let attribution = try await #require(handler.withLock { $0 }).attributeUnattributed(logger: Logger(label: "journey"))
            transcript.line("ledger attribute → attributed \(attribution.attributed), still without an account \(attribution.kept)")
            #expect(attribution.attributed == 1)
            let caller = { @Sendable (base: String) async throws -> AppStoreCaller in
                let apple = try await AppStoreServerAPIClientTests.client(store, base)
                return AppStoreCaller(
                    settings: .init(setAppAccountTokens: true, finishTransactions: false, readAppTransactions: false),
                    clients: [(.production, apple), (.sandbox, apple)], ledger: harness.ledger)
            }
            try await store.run { base in _ = try await caller(base).runOnce() }
            transcript.line("the server's caller: Set App Account Token at Apple, 70001 → \(store.appAccountTokens["70001"] ?? "none")")
            #expect(store.appAccountTokens["70001"] == Self.customer)
            #expect(try await account(Self.customer, production: true)["entitlements"] as? [String] == ["com.example.product"])

            // 4. An upgrade inside "pro": Apple's notification now carries the token.
            transcript.step("The customer upgrades to the other plan of \"pro\"")
            let upgrade = Self.dated([
                "transactionId": "70002", "originalTransactionId": "70001", "productId": "com.example.product.2", "appTransactionId": "71999",
            ], bought: -0.01, expires: 365)
            _ = try await notify("DID_CHANGE_RENEWAL_PREF UPGRADE, Production", try Environments.notification(
                "DID_CHANGE_RENEWAL_PREF", uuid: "upgrade", environment: "Production", appAppleId: 41234, transaction: upgrade, signer: signer,
                subtype: "UPGRADE", signedDate: Self.milliseconds(days: 0)))
            let upgraded = try await account(Self.customer, production: true)
            #expect(pro(upgraded)?["product"] as? String == "com.example.product.2")
            let changes = try await Self.changes(of: harness.ledger, account: Self.customer)
            let named = changes.flatMap(\.differences).filter { if case .namedEntitlement = $0 { true } else { false } }
            let upgradeChange = changes.first { $0.differences.contains(.namedEntitlement(name: "pro", from: "com.example.product", to: "com.example.product.2")) }
            transcript.line("the feed's change of the upgrade: \(Self.differences(upgradeChange))")
            #expect(named.contains(.namedEntitlement(name: "pro", from: "com.example.product", to: "com.example.product.2")))

            // 5. The customer signs in to a second account and restores: the subscription moves.
            transcript.step("The customer signs in to a second account and restores (restoresAcrossAccounts: transfer)")
            var restored = try Notifications.transaction(upgrade)
            restored["environment"] = "Production"
            restored["appAccountToken"] = Self.customer
            let moved = try await sendFromDevice("70002, second account", [
                "signedTransaction": try signer.sign(restored), "account": Self.secondAccount,
            ])
            #expect((moved["outcomes"] as? [[String: Any]])?.allSatisfy { $0["outcome"] as? String == "appended" } == true)
            #expect(try await account(Self.customer, production: true)["entitlements"] as? [String] == [])
            #expect(pro(try await account(Self.secondAccount, production: true))?["product"] as? String == "com.example.product.2")
            let lost = try await Self.changes(of: harness.ledger, account: Self.customer).last
            transcript.line("the feed's last change of the first account (unscoped: the App Review purchase shows again): \(Self.differences(lost))")
            #expect(lost?.differences.contains(.entitlementRevoked(product: "com.example.product.2", reason: .transferred)) == true)
            try await store.run { base in _ = try await caller(base).runOnce() }
            transcript.line("the server's caller: Set App Account Token at Apple, 70001 → \(store.appAccountTokens["70001"] ?? "none")")
            #expect(store.appAccountTokens["70001"] == Self.secondAccount)
            // Apple's next renewal, still naming the first account, goes to the second.
            _ = try await notify("DID_RENEW, Production, the first account's token", try Environments.notification(
                "DID_RENEW", uuid: "renewal", environment: "Production", appAppleId: 41234,
                transaction: upgrade.merging(["transactionId": "70003", "appAccountToken": Self.customer]) { $1 }, signer: signer, signedDate: Self.milliseconds(days: 0)))
            let renewedIn = try harness.ledger.history(account: Self.secondAccount).contains { $0.event.id.hasPrefix("renewal") }
            transcript.line("the renewal is recorded in the second account: \(renewedIn)")
            #expect(renewedIn)
        }
        if let path = ProcessInfo.processInfo.environment["PURCHASE_LEDGER_JOURNEY"], !path.isEmpty {
            try transcript.text.write(toFile: path, atomically: true, encoding: .utf8)
        }
    }

    /// A change's `differences`, as the feed's JSON has them.
    static func differences(_ change: LedgerChange?) -> String {
        guard let change, let object = try? JSONSerialization.jsonObject(with: Data(change.json.utf8)) as? [String: Any],
              let data = try? JSONSerialization.data(withJSONObject: object["differences"] ?? [], options: [.sortedKeys])
        else { return "none" }
        return String(decoding: data, as: UTF8.self)
    }

    /// The account's changes in the feed derived from the log so far.
    static func changes(of ledger: Ledger, account: String) async throws -> [LedgerChange] {
        var found: [LedgerChange] = []
        for try await change in ledger.changes(follow: false) where change.account == account { found.append(change) }
        return found
    }
}

/// The requests and answers of a journey, as text.
private final class Transcript: Sendable {
    private let lines = Mutex<[String]>([])

    var text: String { lines.withLock { $0.joined(separator: "\n") } + "\n" }

    func step(_ title: String) { line("\n## \(title)") }

    func line(_ text: String) { lines.withLock { $0.append(text) } }

    /// A request and its answer: the status and, of a JSON object, the `keys` asked for.
    func exchange(_ request: String, _ answer: Answer, keys: [String]) {
        var shown = "\(answer.status.code)"
        if let object = try? answer.object {
            let kept = object.filter { keys.contains($0.key) }
            if let data = try? JSONSerialization.data(withJSONObject: kept, options: [.sortedKeys]) {
                shown += " " + String(decoding: data, as: UTF8.self)
            }
        }
        line("$ \(request)\n  → \(shown)")
    }
}
