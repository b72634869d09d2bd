import Foundation
@testable import AppStoreServerAPI
import Testing
import LedgerTestSupport

/// The client against a fake App Store that misbehaves: every call ends, within its deadline,
/// in a typed error, and no answer is followed forever or read without bound.
struct AppStoreServerAPIHostileServerTests {
    static let noRetry = AppStoreServerAPIRetryPolicy(maximumAttempts: 1, initialBackoff: .milliseconds(1), maximumWait: .milliseconds(1))

    /// Generous for a request where the deadline is not what is tested: a CI run under the
    /// suite's load once took over 30 s (the default) for one of 26 pages.
    static let patient = Duration.seconds(120)

    static func client(
        _ store: FakeAppStore, _ base: String, limits: AppStoreServerAPIClient.Limits = .init(requestTimeout: patient)
    ) async throws -> AppStoreServerAPIClient {
        try await AppStoreServerAPIClient(credentials: store.credentials, environment: .custom(baseURL: base), retry: noRetry, limits: limits)
    }

    /// A server alternating two revisions with `hasMore` was followed forever (the guard only
    /// compared a revision with the one before it).
    @Test func revisionsGoingRoundInCirclesAreNotFollowed() async throws {
        let store = FakeAppStore()
        store.setHistory(["a"], of: "1000")
        store.misbehave(.alternatingRevisions)
        try await store.run { base in
            let client = try await Self.client(store, base)
            let error = await #expect(throws: AppStoreServerAPIError.self) { try await client.allTransactions(of: "1000") }
            #expect(error?.code == .invalidResponse)
            #expect(client.requestCount == 3)
        }
    }

    @Test func pagesThatNeverEndStopAtTheLimit() async throws {
        let store = FakeAppStore()
        store.setHistory(["a"], of: "1000")
        store.misbehave(.endlessPages)
        try await store.run { base in
            let client = try await Self.client(store, base, limits: .init(requestTimeout: Self.patient, maximumPages: 25))
            let error = await #expect(throws: AppStoreServerAPIError.self) { try await client.allTransactions(of: "1000") }
            #expect(error?.code == .invalidResponse)
            #expect(error?.message.contains("more than 25 pages") == true)
            #expect(client.requestCount == 26)
        }
    }

    @Test func pagesLargerThanTheLimitInAllStop() async throws {
        let store = FakeAppStore()
        store.setHistory([String(repeating: "s", count: 10_000)], of: "1000")
        store.misbehave(.endlessPages)
        try await store.run { base in
            let client = try await Self.client(store, base, limits: .init(requestTimeout: Self.patient, maximumPagedBytes: 100_000))
            let error = await #expect(throws: AppStoreServerAPIError.self) { try await client.allTransactions(of: "1000") }
            #expect(error?.message.contains("larger than 100000 bytes") == true)
            #expect(client.requestCount == 11)
        }
    }

    /// A body sent a byte at a time kept the client waiting as long as the server liked: the
    /// timeout covered the head only.
    @Test func aTricklingBodyIsGivenUpAtTheDeadline() async throws {
        let store = FakeAppStore()
        store.setHistory(["a"], of: "1000")
        store.misbehave(.slowBody(interval: .milliseconds(200)))
        try await store.run { base in
            let client = try await Self.client(store, base, limits: .init(requestTimeout: .seconds(1)))
            let started = ContinuousClock.now
            let error = await #expect(throws: AppStoreServerAPIError.self) { try await client.allTransactions(of: "1000") }
            #expect(error?.code == .transport)
            // The body alone would take minutes; the call ends at its deadline.
            #expect(ContinuousClock.now - started < .seconds(20))
        }
    }

    @Test func garbageAndHugeBodiesAreTypedErrors() async throws {
        let store = FakeAppStore()
        store.setHistory(["a"], of: "1000")
        try await store.run { base in
            store.misbehave(.garbage)
            let client = try await Self.client(store, base, limits: .init(requestTimeout: Self.patient, maximumAnswerBytes: 1 << 20))
            let garbage = await #expect(throws: AppStoreServerAPIError.self) { try await client.allTransactions(of: "1000") }
            #expect(garbage?.code == .invalidResponse)
            store.misbehave(.hugeBody(bytes: 2 << 20))
            let huge = await #expect(throws: AppStoreServerAPIError.self) { try await client.allTransactions(of: "1000") }
            #expect(huge?.code == .invalidResponse)
            #expect(huge?.message.contains("larger than") == true)
        }
    }
}
