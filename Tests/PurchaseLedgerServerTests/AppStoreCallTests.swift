import AppStoreServerAPI
import Foundation
import HTTPTypes
import HummingbirdTesting
import PurchaseLedger
@testable import PurchaseLedgerAppStore
@testable import PurchaseLedgerServer
import Testing
import LedgerTestSupport

/// The customer's id when `appAccountToken` is missing, and closing the loop with Apple: a
/// notification without a token goes to the account that has its customer's
/// `appTransactionId`; the account is then set as the token at Apple, and a StoreKit 2
/// transaction the ledger shows delivered is finished at Apple, each once, recorded, and
/// retried while Apple cannot answer.
struct AppStoreCallTests {
    typealias Notifications = AppStoreNotificationTests
    static let account = Notifications.account

    /// A caller of `store` in the sandbox.
    static func caller(
        _ store: FakeAppStore, base: String, ledger: Ledger, settings: AppStoreCallSettings
    ) async throws -> AppStoreCaller {
        AppStoreCaller(settings: settings, clients: [(.sandbox, try await AppStoreServerAPIClientTests.client(store, base))], ledger: ledger)
    }

    static func calls(in ledger: Ledger, of account: String = account) throws -> [AppStoreCall] {
        try ledger.history(account: account).compactMap { record in
            if case .appStoreCall(let call) = record.event.payload { call } else { nil }
        }
    }

    @Test func aNotificationWithoutATokenFindsItsCustomerAndTheTokenIsSetAtApple() async throws {
        let signer = try TestAppStoreSigner()
        let store = FakeAppStore()
        try await Notifications.run(signer: signer) { harness, client in
            // The app reported its first purchase from the device, naming the account; Apple
            // signed it without a token (the app did not pass one to StoreKit).
            let first = try signer.sign(Notifications.transaction(["appAccountToken": NSNull()]))
            let posted = try await SignedTransactionRouteTests.post(["signedTransaction": first, "account": Self.account], client)
            #expect(posted.status == .ok)

            // A purchase of another subscription, on another device, notified without a token:
            // no account holds it, but its customer (appTransactionId 71134) is this account.
            let other = try Notifications.transaction([
                "appAccountToken": NSNull(), "transactionId": "80001", "originalTransactionId": "80001",
            ])
            let answer = try await Notifications.post(try Notifications.notification(
                "SUBSCRIBED", uuid: "n-80001", transaction: other, signer: signer), client).object
            #expect(answer["action"] as? String == "purchase")
            #expect(try harness.ledger.account(holdingTransaction: "80001") == Self.account)
            #expect(try harness.ledger.account(ofAppTransaction: "71134") == Self.account)

            try await store.run { base in
                let caller = try await Self.caller(store, base: base, ledger: harness.ledger, settings: .init())
                #expect(try await caller.runOnce() == .caughtUp(position: harness.ledger.position - 2))
                // Set once per subscription, at Apple and in the log.
                #expect(store.appAccountTokens == ["12345": Self.account, "80001": Self.account])
                let calls = try Self.calls(in: harness.ledger)
                #expect(calls.map(\.transaction).sorted() == ["12345", "80001"])
                #expect(calls.allSatisfy { $0.call == .setAppAccountToken && $0.outcome == .accepted && $0.status == 200 })
                #expect(calls.allSatisfy { $0.appAccountToken == Self.account && $0.environment == .sandbox })
                // Nothing is owed any more: a second pass calls nothing.
                let requests = store.requests
                _ = try await caller.runOnce()
                #expect(store.requests == requests)
                // The next notification carries the token and owes nothing.
                _ = try await Notifications.post(try Notifications.notification(
                    "DID_RENEW", uuid: "n-80002", transaction: Notifications.transaction(["transactionId": "80002", "originalTransactionId": "80001"]),
                    signer: signer), client)
                _ = try await caller.runOnce()
                #expect(store.requests == requests)
            }
        }
    }

    @Test func aCallAppleCannotAnswerIsTriedAgainAndARefusalIsRecordedOnce() async throws {
        let signer = try TestAppStoreSigner()
        let store = FakeAppStore()
        try await Notifications.run(signer: signer) { harness, client in
            let signed = try signer.sign(Notifications.transaction(["appAccountToken": NSNull()]))
            _ = try await SignedTransactionRouteTests.post(["signedTransaction": signed, "account": Self.account], client)
            let shared = try signer.sign(Notifications.transaction([
                "appAccountToken": NSNull(), "transactionId": "90001", "originalTransactionId": "90001",
            ]))
            _ = try await SignedTransactionRouteTests.post(["signedTransaction": shared, "account": Self.account], client)
            store.shareInFamily("90001")
            try await store.run { base in
                let caller = try await Self.caller(store, base: base, ledger: harness.ledger, settings: .init())
                // Apple fails (500 after the client's retries): nothing recorded, the checkpoint holds.
                store.queue(Array(repeating: FakeAppStore.Fault(status: 500), count: 4))
                guard case .interrupted(let held) = try await caller.runOnce() else { throw TestFailure("not interrupted") }
                #expect(try Self.calls(in: harness.ledger).isEmpty)
                #expect(try AppStoreCaller.checkpoint(in: harness.ledger) == held)
                // Apple answers again: the token is set; Family Sharing's is refused for good, and recorded.
                _ = try await caller.runOnce()
                let calls = try Self.calls(in: harness.ledger)
                #expect(calls.map { "\($0.transaction) \($0.outcome.rawValue) \($0.status ?? 0)" } == ["12345 accepted 200", "90001 refused 400"])
                #expect(calls.last?.error?.contains("4000185") == true)
                let requests = store.requests
                _ = try await caller.runOnce()
                #expect(store.requests == requests)
            }
        }
    }

    @Test func theCallsAreConfiguredWithTheKeyAndOffWithout() throws {
        func configuration(_ appStore: String) throws -> ServerConfiguration {
            let json = #"{"ledger": "/tmp/x", "keys": [], "appStore": {"bundleId": "b", "environment": "Sandbox", "trustedRoots": ["r.der"]"# + appStore + "}}"
            return try JSONDecoder().decode(ServerConfiguration.self, from: Data(json.utf8))
        }
        let api = #", "api": {"keyFile": "k.p8", "keyId": "K", "issuerId": "I"}"#
        let defaults = try configuration(api + #", "calls": {}"#)
        try defaults.check()
        #expect(AppStoreCallService.settings(defaults.appStore?.calls) == AppStoreCallSettings(setAppAccountTokens: true, finishTransactions: false))
        let finishing = try configuration(api + #", "calls": {"setAppAccountTokens": false, "finishTransactions": true}"#)
        #expect(AppStoreCallService.settings(finishing.appStore?.calls) == AppStoreCallSettings(setAppAccountTokens: false, finishTransactions: true))
        #expect(AppStoreCallService.settings(try configuration(api).appStore?.calls) == nil)
        #expect { try configuration(#", "calls": {}"#).check() } throws: { "\($0)".contains("appStore.api") }
    }

    /// Reconciliation reports a call owed that no event records, and with `apply` makes it.
    @Test func reconciliationFindsACallOwedAndMakesIt() async throws {
        let signer = try TestAppStoreSigner()
        let store = FakeAppStore()
        try await Notifications.run(signer: signer) { harness, client in
            let signed = try signer.sign(Notifications.transaction())
            _ = try await SignedTransactionRouteTests.post(["signedTransaction": signed], client)
            store.setHistory([signed], of: "12345")
            try await store.run { base in
                var reconciliation = Reconciliation(client: try await AppStoreServerAPIClientTests.client(store, base), verifier: signer.verifier(), ledger: harness.ledger)
                let unchecked = try await reconciliation.run(apply: false)
                #expect(unchecked.differences.isEmpty)
                reconciliation.calls = AppStoreCallSettings(setAppAccountTokens: true, finishTransactions: true, readAppTransactions: false)
                let looked = try await reconciliation.run(apply: false)
                #expect(looked.differences.map { "\($0.kind.rawValue) \($0.transaction)" } == ["appStoreCallOwed 23456"])
                #expect(store.finished.isEmpty)
                let mended = try await reconciliation.run(apply: true)
                #expect(mended.appended == 1)
                #expect(store.finished == ["23456"])
                let again = try await reconciliation.run(apply: true)
                #expect(again.differences.isEmpty)
            }
        }
    }

    /// Get App Transaction Info, once per customer: Apple's app transaction (its model,
    /// signed), verified and kept for the account, shown in its answer; an unknown customer is
    /// a refusal, recorded once.
    @Test func theCustomersAppTransactionIsReadAndKept() async throws {
        let signer = try TestAppStoreSigner()
        let store = FakeAppStore()
        try await Notifications.run(signer: signer) { harness, client in
            _ = try await Notifications.post(try Notifications.notification(
                "SUBSCRIBED", uuid: "n1", transaction: Notifications.transaction(), signer: signer), client)
            _ = try await Notifications.post(try Notifications.notification(
                "SUBSCRIBED", uuid: "n2", transaction: Notifications.transaction([
                    "transactionId": "60001", "originalTransactionId": "60001", "appTransactionId": "unknown-customer",
                ]), signer: signer), client)
            var appTransaction = try AppleFixtures.model("appTransaction")
            appTransaction["receiptType"] = "Sandbox"
            store.setAppTransaction(try signer.sign(appTransaction), for: "71134")
            try await store.run { base in
                let caller = AppStoreCaller(
                    settings: .init(setAppAccountTokens: false), clients: [(.sandbox, try await AppStoreServerAPIClientTests.client(store, base))],
                    verifier: signer.verifier(), ledger: harness.ledger)
                _ = try await caller.runOnce()
                let requests = store.requests
                _ = try await caller.runOnce()
                #expect(store.requests == requests)
            }
            let records = try harness.ledger.history(account: Self.account).suffix(2)
            guard case .appTransaction(let info) = records.first?.event.payload,
                  case .appStoreCall(let refused) = records.last?.event.payload else { throw TestFailure("\(records)") }
            // Named by the customer id's handle, not the id itself (issue 41, point 3).
            #expect(records.first?.event.id.hasPrefix("appstore-call/getAppTransactionInfo/h") == true)
            #expect(records.first?.event.id.contains("71134") == false)
            #expect(records.first?.event.at == Timestamp(seconds: 1_698_148_900))
            #expect(info.originalPurchasedAt == Timestamp(seconds: 1_698_148_800))
            #expect(info.originalApplicationVersion == "1.1.2")
            #expect(info.applicationVersion == "1.2.3")
            #expect(info.originalPlatform == "iOS")
            #expect(info.preorderedAt == Timestamp(seconds: 1_698_148_700))
            #expect(info.environment == .sandbox)
            #expect(info.signed != nil)
            #expect(refused.call == .getAppTransactionInfo && refused.outcome == .refused && refused.status == 404)
            // Held to Apple's rules for app transactions: the app, then `receiptType` as the environment.
            for (changes, code) in [
                (["bundleId": "com.example.other"], AppStoreVerificationError.Code.invalidAppIdentifier),
                (["receiptType": "Xcode"], .invalidEnvironment),
                (["receiptCreationDate": 4_000_000_000_000], .invalidJWTFormat),
            ] as [([String: Any], AppStoreVerificationError.Code)] {
                var changed = appTransaction
                for (key, value) in changes { changed[key] = value is NSNull ? nil : value }
                let signed = try signer.sign(changed)
                await #expect { _ = try await signer.verifier().verifyAppTransaction(signed) } throws: {
                    ($0 as? AppStoreVerificationError)?.code == code
                }
            }
            let answer = try await client.account(Self.account)
            let shown = try #require(answer["appTransaction"] as? [String: Any])
            #expect(shown["originalApplicationVersion"] as? String == "1.1.2")
            #expect(shown["originalPurchasedAt"] as? String == "2023-10-24T12:00:00Z")
            #expect(shown["signed"] == nil)
        }
    }

    @Test func aDeliveredStoreKit2TransactionIsFinishedAtAppleOnce() async throws {
        let signer = try TestAppStoreSigner()
        let store = FakeAppStore()
        try await Notifications.run(signer: signer) { harness, client in
            // With its token: no token to set; the device's report finishes the entry.
            let signed = try signer.sign(Notifications.transaction())
            _ = try await SignedTransactionRouteTests.post(["signedTransaction": signed], client)
            // A notification-only purchase is Apple's own report, not a StoreKit 2 delivery.
            _ = try await Notifications.post(try Notifications.notification(
                "ONE_TIME_CHARGE", uuid: "n-1", transaction: Notifications.transaction(["transactionId": "70001", "originalTransactionId": "70001"]),
                signer: signer), client)
            try await store.run { base in
                let off = try await Self.caller(store, base: base, ledger: harness.ledger, settings: .init(finishTransactions: false))
                _ = try await off.runOnce()
                #expect(store.finished.isEmpty)
                // Finishing turned on later: the caller's checkpoint is past those records, so a
                // fresh checkpoint (a new deployment reading from the start) is what finds them.
                try await harness.ledger.updateFeedState { try $0.set(AppStoreCaller.checkpointKey, nil) }
                let on = try await Self.caller(store, base: base, ledger: harness.ledger, settings: .init(finishTransactions: true))
                _ = try await on.runOnce()
                #expect(store.finished == ["23456"])
                let calls = try Self.calls(in: harness.ledger)
                #expect(calls.map { "\($0.call.rawValue) \($0.transaction) \($0.outcome.rawValue)" } == ["finishTransaction 23456 accepted"])
                try await harness.ledger.updateFeedState { try $0.set(AppStoreCaller.checkpointKey, nil) }
                _ = try await on.runOnce()
                #expect(store.finished == ["23456"])
            }
        }
    }
}
