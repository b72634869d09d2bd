import Crypto
import Foundation
@testable import AppStoreServerAPI
import Testing
import LedgerTestSupport

/// The App Store Server API client against the fake App Store: tokens Apple accepts, paging,
/// retries of 429 and 5xx honouring `Retry-After`, typed errors.
struct AppStoreServerAPIClientTests {
    static let quickRetry = AppStoreServerAPIRetryPolicy(maximumAttempts: 4, initialBackoff: .milliseconds(1), maximumWait: .milliseconds(300))

    static func client(_ store: FakeAppStore, _ base: String, credentials: AppStoreServerAPICredentials? = nil) async throws -> AppStoreServerAPIClient {
        try await AppStoreServerAPIClient(
            credentials: credentials ?? store.credentials, environment: .custom(baseURL: base), retry: quickRetry)
    }

    @Test func everyPageIsReadWithATokenAppleAccepts() async throws {
        let store = FakeAppStore(pageSize: 2)
        store.setHistory(["a", "b", "c", "d", "e"], of: "1000")
        try await store.run { base in
            let client = try await Self.client(store, base)
            #expect(try await client.allTransactions(of: "1000") == ["a", "b", "c", "d", "e"])
            #expect(client.requestCount == 3)
            #expect(store.refusedTokens == 0)
        }
    }

    @Test func anOrderIsLookedUpAndAnUnknownOneIsInvalid() async throws {
        let store = FakeAppStore()
        store.setOrder("MTMTT2W7WZ", ["signed-1", "signed-2"])
        try await store.run { base in
            let client = try await Self.client(store, base)
            let order = try await client.lookUpOrder("MTMTT2W7WZ")
            #expect(order.status == 0)
            #expect(order.signedTransactions == ["signed-1", "signed-2"])
            #expect(try await client.lookUpOrder("UNKNOWN").status == 1)
            // An id with a slash stays one path segment.
            #expect(try await client.lookUpOrder("A/../B").status == 1)
        }
    }

    /// Send Consumption Information: Apple's 202, and its typed refusal of an answer without
    /// the customer's consent.
    @Test func consumptionInformationIsSentAndARefusalIsTyped() async throws {
        let store = FakeAppStore()
        try await store.run { base in
            let client = try await Self.client(store, base)
            let information = ConsumptionInformation(
                customerConsented: true, deliveryStatus: .undeliveredServerOutage, sampleContentProvided: false, consumptionPercentage: 0)
            #expect(try await client.sendConsumptionInformation(information, transactionID: "1000") == 202)
            #expect(store.consumptionAnswers.map(\.body) == [
                #"{"consumptionPercentage":0,"customerConsented":true,"deliveryStatus":"UNDELIVERED_SERVER_OUTAGE","sampleContentProvided":false}"#,
            ])
            var unconsented = information
            unconsented.customerConsented = false
            let error = await #expect(throws: AppStoreServerAPIError.self) {
                try await client.sendConsumptionInformation(unconsented, transactionID: "1000")
            }
            #expect(error?.code == .badRequest)
            #expect(error?.apiErrorCode == 4_000_035)
            #expect(store.consumptionAnswers.count == 1)
        }
    }

    /// Set App Account Token (API 1.16): set on an original transaction, with Apple's typed
    /// refusals (from Apple's error models) of a transaction that is not original and of a
    /// Family Sharing one; a 500 is retried.
    @Test func anAppAccountTokenIsSetAtAppleAndItsRefusalsAreTyped() async throws {
        let store = FakeAppStore()
        store.setOriginal("2000", of: "2001")
        store.shareInFamily("3000")
        store.queue([.init(status: 500)])
        let token = try #require(UUID(uuidString: "7E3FB20B-4CDB-47CC-936D-99D65F608138"))
        try await store.run { base in
            let client = try await Self.client(store, base)
            #expect(try await client.setAppAccountToken(token, originalTransactionID: "2000") == 200)
            #expect(store.appAccountTokens == ["2000": "7e3fb20b-4cdb-47cc-936d-99d65f608138"])
            #expect(client.requestCount == 2)
            for (transaction, code) in [("2001", 4_000_187), ("3000", 4_000_185)] as [(String, Int64)] {
                let error = await #expect(throws: AppStoreServerAPIError.self) {
                    try await client.setAppAccountToken(token, originalTransactionID: transaction)
                }
                #expect(error?.code == .badRequest)
                #expect(error?.apiErrorCode == code, "\(transaction)")
            }
            #expect(store.appAccountTokens.count == 1)
        }
    }

    /// Get App Transaction Info (API 1.17): Apple's model answered; a customer with no app
    /// transaction is Apple's typed 404.
    @Test func theAppTransactionIsReadAndAMissingOneIsTyped() async throws {
        let store = FakeAppStore()
        store.knowAppTransactions(of: ["1000"])
        try await store.run { base in
            let client = try await Self.client(store, base)
            #expect(try await client.appTransactionInfo(of: "1000").signedAppTransactionInfo == "signed_app_transaction_info_value")
            let error = await #expect(throws: AppStoreServerAPIError.self) { try await client.appTransactionInfo(of: "9999") }
            #expect(error?.code == .notFound)
            #expect(error?.apiErrorCode == 4_040_019)
        }
    }

    /// Finish Transaction (API 1.20): a POST with no body; an unknown transaction is 404.
    @Test func aTransactionIsFinishedAtAppleAndAnUnknownOneIsTyped() async throws {
        let store = FakeAppStore()
        store.knowTransactions(["1000"])
        try await store.run { base in
            let client = try await Self.client(store, base)
            #expect(try await client.finishTransaction("1000") == 200)
            let error = await #expect(throws: AppStoreServerAPIError.self) { try await client.finishTransaction("9999") }
            #expect(error?.code == .notFound)
            #expect(store.finished == ["1000"])
        }
    }

    @Test func rateLimitsAndServerErrorsAreRetried() async throws {
        let store = FakeAppStore()
        store.setHistory(["a"], of: "1000")
        // Apple's form (a UNIX time in milliseconds), HTTP's form (seconds), and a 500.
        let soon = String(Int64(Date().timeIntervalSince1970 * 1000) + 100)
        store.queue([.init(status: 429, retryAfter: soon), .init(status: 500), .init(status: 429, retryAfter: "0")])
        try await store.run { base in
            let client = try await Self.client(store, base)
            let started = ContinuousClock.now
            #expect(try await client.allTransactions(of: "1000") == ["a"])
            #expect(client.requestCount == 4)
            #expect(ContinuousClock.now - started >= .milliseconds(50))
        }
    }

    @Test func retriesEndWithATypedError() async throws {
        let store = FakeAppStore()
        store.setHistory(["a"], of: "1000")
        store.queue(Array(repeating: .init(status: 503), count: 6))
        try await store.run { base in
            let client = try await Self.client(store, base)
            let error = await #expect(throws: AppStoreServerAPIError.self) { try await client.transactionHistory(of: "1000") }
            #expect(error?.code == .serverError)
            #expect(error?.status == 503)
            #expect(client.requestCount == Self.quickRetry.maximumAttempts)
        }
    }

    @Test func aKeyAppleDoesNotKnowIsUnauthorizedAtOnce() async throws {
        let store = FakeAppStore()
        store.setHistory(["a"], of: "1000")
        try await store.run { base in
            var credentials = store.credentials
            credentials.privateKeyPEM = P256.Signing.PrivateKey().pemRepresentation
            let client = try await Self.client(store, base, credentials: credentials)
            do {
                _ = try await client.transactionHistory(of: "1000")
                Issue.record("a foreign key was accepted")
            } catch let error as AppStoreServerAPIError {
                #expect(error.code == .unauthorized)
                #expect(client.requestCount == 1)
            }
            var otherBundle = store.credentials
            otherBundle.bundleID = "com.example.other"
            let wrongBundle = try await Self.client(store, base, credentials: otherBundle)
            await #expect(throws: AppStoreServerAPIError.self) { try await wrongBundle.transactionHistory(of: "1000") }
            #expect(store.refusedTokens == 2)
        }
    }

    @Test func anUnknownTransactionIsNotFoundWithApplesCode() async throws {
        let store = FakeAppStore()
        try await store.run { base in
            let client = try await Self.client(store, base)
            do {
                _ = try await client.transactionHistory(of: "../../etc/passwd")
                Issue.record("found")
            } catch let error as AppStoreServerAPIError {
                #expect(error.code == .notFound)
                #expect(error.apiErrorCode == 4040010)
                #expect(error.message == "Transaction id not found.")
            }
        }
    }

    @Test func aKeyThatIsNotAKeyIsRefusedWithoutQuotingIt() async throws {
        let credentials = AppStoreServerAPICredentials(privateKeyPEM: "-----BEGIN PRIVATE KEY-----\nc2VjcmV0\n-----END PRIVATE KEY-----", keyID: "K", issuerID: "I", bundleID: "B")
        do {
            _ = try await AppStoreServerAPIClient(credentials: credentials, environment: .sandbox)
            Issue.record("accepted")
        } catch {
            #expect(error.code == .invalidKey)
            #expect(!error.message.contains("c2VjcmV0"))
        }
        #expect(!"\(credentials)".contains("c2VjcmV0"))
    }

    @Test func retryAfterIsReadInBothForms() {
        let now = Date(timeIntervalSince1970: 1_700_000_000)
        #expect(AppStoreServerAPIRetryPolicy.retryAfter("2", now: now) == .seconds(2))
        #expect(AppStoreServerAPIRetryPolicy.retryAfter("1700000001500", now: now) == .milliseconds(1500))
        #expect(AppStoreServerAPIRetryPolicy.retryAfter("1600000000000", now: now) == .zero)
        #expect(AppStoreServerAPIRetryPolicy.retryAfter("Wed, 21 Oct 2015 07:28:00 GMT", now: now) == nil)
        #expect(AppStoreServerAPIRetryPolicy.retryAfter("-1", now: now) == nil)
        let policy = AppStoreServerAPIRetryPolicy(initialBackoff: .milliseconds(100), maximumWait: .seconds(1))
        #expect(policy.wait(after: 1, retryAfter: nil, now: now) == .milliseconds(100))
        #expect(policy.wait(after: 3, retryAfter: nil, now: now) == .milliseconds(400))
        #expect(policy.wait(after: 10, retryAfter: nil, now: now) == .seconds(1))
        #expect(policy.wait(after: 1, retryAfter: "3600", now: now) == .seconds(1))
    }
}
