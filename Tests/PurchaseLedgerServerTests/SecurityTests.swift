import Foundation
import HTTPTypes
import HummingbirdTesting
import PurchaseLedger
@testable import PurchaseLedgerAppStore
@testable import PurchaseLedgerServer
import Testing

/// API keys and scopes (401 without a valid key, 403 without the scope), limits (413), bad
/// bodies (400, 415): each refused request changes nothing.
struct SecurityTests {
    struct Route: Sendable, CustomTestStringConvertible {
        var method: HTTPRequest.Method
        var uri: String
        var body: String?
        var testDescription: String { "\(method) \(uri)" }
    }

    static let protectedRoutes: [Route] = [
        Route(method: .post, uri: "/v1/events", body: Lines.added("e1", "ana", payment: "A1", product: "com.example.tenhints")),
        Route(method: .get, uri: "/v1/accounts/ana"),
        Route(method: .get, uri: "/v1/accounts/ana/history"),
        Route(method: .get, uri: "/metrics"),
    ]

    @Test(arguments: protectedRoutes)
    func withoutAKeyEveryRouteButHealthIs401(_ route: Route) async throws {
        try await ServerHarness.run { harness, client in
            let answer = try await client.send(route.method, route.uri, body: route.body)
            #expect(answer.status == .unauthorized)
            #expect(answer.errorCode == "unauthorized")
            #expect(answer.headers[.wwwAuthenticate] == "Bearer")
            #expect(harness.ledger.position == 0)
        }
    }

    @Test(arguments: protectedRoutes)
    func anUnknownKeyIs401(_ route: Route) async throws {
        try await ServerHarness.run { harness, client in
            for key in [TestKeys.writer + "x", String(TestKeys.writer.dropLast()), "", "Bearer"] {
                let answer = try await client.send(route.method, route.uri, key: key, body: route.body)
                #expect(answer.status == .unauthorized, "key \(key)")
            }
            var headers = HTTPFields()
            headers[.authorization] = "Basic \(TestKeys.writer)"
            let reply1 = try await client.send(route.method, route.uri, body: route.body, headers: headers)
            #expect(reply1.status == .unauthorized)
            #expect(harness.ledger.position == 0)
        }
    }

    @Test func aKeyWithoutTheScopeIs403() async throws {
        try await ServerHarness.run { harness, client in
            let post = Self.protectedRoutes[0]
            let reply2 = try await client.send(.post, post.uri, key: TestKeys.reader, body: post.body)
            #expect(reply2.status == .forbidden)
            let reply3 = try await client.send(.post, post.uri, key: TestKeys.metrics, body: post.body)
            #expect(reply3.status == .forbidden)
            let reply4 = try await client.send(.get, "/v1/accounts/ana", key: TestKeys.metrics)
            #expect(reply4.status == .forbidden)
            let reply5 = try await client.send(.get, "/metrics", key: TestKeys.writer)
            #expect(reply5.status == .forbidden)
            #expect(harness.ledger.position == 0)
            // The right key for each.
            let reply6 = try await client.send(.post, post.uri, key: TestKeys.writer, body: post.body)
            #expect(reply6.status == .ok)
            let reply7 = try await client.send(.get, "/v1/accounts/ana", key: TestKeys.reader)
            #expect(reply7.status == .ok)
            let reply8 = try await client.send(.get, "/metrics", key: TestKeys.metrics)
            #expect(reply8.status == .ok)
        }
    }

    @Test func theKeyMayComeAsXAPIKey() async throws {
        try await ServerHarness.run { _, client in
            var headers = HTTPFields()
            headers[HTTPField.Name("X-API-Key")!] = TestKeys.reader
            let reply9 = try await client.send(.get, "/v1/accounts/ana", headers: headers)
            #expect(reply9.status == .ok)
        }
    }

    @Test func revokingNeedsItsOwnScopeAndARefusedRequestAppendsNothing() async throws {
        try await ServerHarness.run { harness, client in
            _ = try await client.post(events: [
                Lines.added("e1", "ana", payment: "A1", product: "com.example.hardwords"),
                Lines.purchased("e2", "ana", payment: "A1", transaction: "t1"),
            ])
            // A batch with one revocation among other events: all or nothing.
            let batch = [Lines.finished("e3", "ana", payment: "A1"), Lines.revoked("e4", "ana", transaction: "t1")]
            let refused = try await client.send(.post, "/v1/events", key: TestKeys.writer, contentType: "application/x-ndjson", body: batch.joined(separator: "\n"))
            #expect(refused.status == .forbidden)
            #expect(harness.ledger.position == 2)
            let projection1 = try await client.account("ana")
            #expect(projection1["entitlements"] as? [String] == ["com.example.hardwords"])

            let outcomes = try await client.post(events: batch, key: TestKeys.revoker)
            #expect(outcomes.map { $0["outcome"] as? String } == ["appended", "appended"])
            let projection2 = try await client.account("ana")
            #expect(projection2["entitlements"] as? [String] == [])
        }
    }

    /// A store report grants what Apple says: a key that may only write the device's events
    /// cannot give an account a purchase by posting one.
    @Test func theStoresEventsNeedTheirOwnScope() async throws {
        try await ServerHarness.run { harness, client in
            let report = Event.storeTransaction(
                id: "s1", account: "ana", signedAt: Timestamp(seconds: 1_767_225_600),
                StoreTransaction(transaction: "t9", product: "com.example.hardwords")).jsonLine
            for key in [TestKeys.writer, TestKeys.revoker] {
                let refused = try await client.send(.post, "/v1/events", key: key, contentType: "application/x-ndjson", body: report)
                #expect(refused.status == .forbidden)
                #expect(try refused.object["error"] as? String == "forbidden")
            }
            #expect(harness.ledger.position == 0)
            let outcomes = try await client.post(events: [report], key: TestKeys.backOffice)
            #expect(outcomes.map { $0["outcome"] as? String } == ["appended"])
            #expect(try await client.account("ana")["entitlements"] as? [String] == ["com.example.hardwords"])

            // A transfer takes a purchase from another account: the device's key may not send one.
            // (Under ids of the client's own: `transfer/…` is the server's namespace.)
            let transfer = Event.transfer(originalTransaction: "t9", from: "ana", to: "eve", at: Timestamp(seconds: 1_767_225_700))
                .enumerated().map { index, event in
                    var event = event
                    event.id = "back-office-move-1/\(index)"
                    return event.jsonLine
                }.joined(separator: "\n")
            let refused = try await client.send(.post, "/v1/events", key: TestKeys.writer, contentType: "application/x-ndjson", body: transfer)
            #expect(refused.status == .forbidden)
            #expect(try await client.account("ana")["entitlements"] as? [String] == ["com.example.hardwords"])
            let moved = try await client.send(.post, "/v1/events", key: TestKeys.backOffice, contentType: "application/x-ndjson", body: transfer)
            #expect(moved.status == .ok)
            #expect(try await client.account("ana")["entitlements"] as? [String] == [])
        }
    }

    /// The ids the server and the tools make are theirs: a client's event under one is refused,
    /// whatever its key (issue 41, point 1). So a client cannot make a forget a "duplicate" by
    /// taking `forget/1` first, nor keep a customer's genuine StoreKit 2 purchase from being
    /// credited by taking `storekit:<transactionId>`.
    @Test func aClientCannotTakeAnIdTheServerMakes() async throws {
        let signer = try TestAppStoreSigner()
        try await AppStoreNotificationTests.run(signer: signer) { harness, client in
            let transaction = try AppStoreNotificationTests.transaction()
            let id = try #require(transaction["transactionId"] as? String)
            let account = AppStoreNotificationTests.account
            let at = Timestamp(seconds: 1_767_225_600)
            let squats = ["forget/1", "forget/2", "storekit:\(id)", "storekit:\(id)/finish", "transfer/\(id)/x/out", "share/\(id)/x",
                          "appstore-call/setAppAccountToken/\(id)", "appstore-api:\(id)"]
                .enumerated().map { index, squat in
                    Event.transactionUpdated(id: squat, account: account, at: at, TransactionUpdated(
                        payment: "p\(index)", state: .purchased, transaction: "9\(index)", product: "com.example.hardwords")).jsonLine
                }
            for key in [TestKeys.writer, TestKeys.backOffice] {
                let outcomes = try await client.post(events: squats, key: key)
                #expect(outcomes.map { $0["error"] as? String } == Array(repeating: "invalidEvent", count: squats.count))
            }
            #expect(harness.ledger.position == 0)
            // The customer's genuine purchase is credited, and can be forgotten.
            let signed = try signer.sign(transaction)
            let recorded = try await SignedTransactionRouteTests.post(["signedTransaction": signed], client).object
            #expect((recorded["outcomes"] as? [[String: Any]])?.map { $0["outcome"] as? String } == ["appended", "appended", "appended"])
            let forgotten = try await client.send(.delete, "/v1/accounts/\(account)", key: TestKeys.forgetter)
            #expect(forgotten.status == .ok)
            #expect(try harness.ledger.position(ofEventID: "forget/1") != nil)
            #expect(try harness.ledger.projection(of: account) == nil)
        }
    }

    /// The entry of an App Store purchase (`appstore:<transactionId>`) is opened by Apple's
    /// report of it: a client that opened it first (a payment of another product, ten units,
    /// failed and finished) would bend what the genuine purchase credits. Nor may a client name
    /// a forgotten customer's pseudonym.
    @Test func aClientCannotTakeTheStoresEntriesOrAPseudonym() async throws {
        let signer = try TestAppStoreSigner()
        try await AppStoreNotificationTests.run(signer: signer) { harness, client in
            let transaction = try AppStoreNotificationTests.transaction()
            let id = try #require(transaction["transactionId"] as? String)
            let account = AppStoreNotificationTests.account
            let at = Timestamp(seconds: 1_767_225_600)
            let entry = "appstore:\(id)"
            let squats = [
                Event.paymentAdded(id: "s1", account: account, at: at, payment: entry, product: "com.example.tenhints", quantity: 10),
                Event.transactionUpdated(id: "s2", account: account, at: at, TransactionUpdated(
                    payment: entry, state: .purchased, transaction: id, product: "com.example.tenhints", quantity: 10)),
                Event.transactionUpdated(id: "s3", account: account, at: at, TransactionUpdated(payment: entry, state: .failed, error: "x")),
                Event.transactionFinished(id: "s4", account: account, at: at, payment: entry),
                Event.paymentAdded(id: "s5", account: "forgotten/1", at: at, payment: "p", product: "com.example.tenhints"),
                Event.paymentAdded(id: "s6", account: "forgotten/99", at: at, payment: "p", product: "com.example.tenhints"),
            ].map(\.jsonLine)
            for key in [TestKeys.writer, TestKeys.backOffice] {
                let outcomes = try await client.post(events: squats, key: key)
                #expect(outcomes.map { $0["error"] as? String } == Array(repeating: "invalidEvent", count: squats.count))
            }
            #expect(harness.ledger.position == 0)
            // An import cannot either: a store entry is opened only by its own purchase.
            for event in [
                Event.paymentAdded(id: "i1", account: account, at: at, payment: entry, product: "com.example.tenhints"),
                Event.transactionUpdated(id: "i2", account: account, at: at, TransactionUpdated(
                    payment: entry, state: .purchased, transaction: "\(id)0", product: "com.example.tenhints")),
            ] {
                #expect(throws: LedgerError.self) { try event.validate() }
            }
            // Nor the StoreKit 2 route, with a pseudonym for its account (a transaction without a token).
            let untokened = try signer.sign(try AppStoreNotificationTests.transaction(["appAccountToken": NSNull()]))
            let pseudonymous = try await SignedTransactionRouteTests.post(["signedTransaction": untokened, "account": "forgotten/1"], client)
            #expect(pseudonymous.status == .badRequest)
            #expect(harness.ledger.position == 0)
            // The genuine purchase is recorded whole, on its own entry.
            let signed = try signer.sign(transaction)
            let recorded = try await SignedTransactionRouteTests.post(["signedTransaction": signed], client).object
            #expect((recorded["outcomes"] as? [[String: Any]])?.map { $0["outcome"] as? String } == ["appended", "appended", "appended"])
        }
    }

    @Test func keysAreIdentifiedOnlyByTheirExactBytes() {
        let keys = APIKeys(TestKeys.configured)
        #expect(keys.identify(TestKeys.writer)?.name == "writer")
        #expect(keys.identify(TestKeys.revoker)?.scopes == [.eventsWrite, .eventsRevoke, .accountsRead])
        #expect(keys.identify(TestKeys.writer.uppercased()) == nil)
        #expect(keys.identify(TestKeys.writer + " ") == nil)
        #expect(keys.identify("") == nil)
    }

    // MARK: Limits and bad bodies

    @Test func aBodyOverTheLimitIs413AndAppendsNothing() async throws {
        try await ServerHarness.run(limits: .init(bodyBytes: 4096, eventsPerRequest: 1000)) { harness, client in
            let lines = (1...40).map { Lines.added("e\($0)", "ana", payment: "A\($0)", product: "com.example.tenhints") }
            let body = lines.joined(separator: "\n")
            #expect(body.utf8.count > 4096)
            let answer = try await client.send(.post, "/v1/events", key: TestKeys.writer, contentType: "application/x-ndjson", body: body)
            #expect(answer.status == .contentTooLarge)
            #expect(answer.errorCode == "payloadTooLarge")
            #expect(harness.ledger.position == 0)
            // Just under the limit is taken.
            let fits = lines.prefix(20).joined(separator: "\n")
            #expect(fits.utf8.count <= 4096)
            let outcomes1 = try await client.post(events: Array(lines.prefix(20)))
            #expect(outcomes1.count == 20)
        }
    }

    @Test func moreEventsThanTheLimitIs413AndAppendsNothing() async throws {
        try await ServerHarness.run(limits: .init(bodyBytes: 1 << 20, eventsPerRequest: 10)) { harness, client in
            let lines = (1...11).map { Lines.added("e\($0)", "ana", payment: "A\($0)", product: "com.example.tenhints") }
            let answer = try await client.send(.post, "/v1/events", key: TestKeys.writer, body: "[" + lines.joined(separator: ",") + "]")
            #expect(answer.status == .contentTooLarge)
            #expect(harness.ledger.position == 0)
            let outcomes2 = try await client.post(events: Array(lines.prefix(10)))
            #expect(outcomes2.count == 10)
        }
    }

    /// A body of more would-be events than the limit is refused by a count, before decoding
    /// (a megabyte of empty lines would otherwise be a million rejected results in memory).
    @Test(arguments: [
        ("application/x-ndjson", String(repeating: "\n", count: 1001)),
        ("application/x-ndjson", String(repeating: "{}\n", count: 1000) + "{}"),
        ("application/json", "[" + Array(repeating: "0", count: 1001).joined(separator: ",") + "]"),
        ("application/json", "[" + Array(repeating: #"{"a": [1, 2], "b": "x,y"}"#, count: 1001).joined(separator: ",") + "]"),
    ])
    func aBodyOfMoreThanTheLimitIsCountedAndRefusedBeforeDecoding(_ contentType: String, _ body: String) async throws {
        try await ServerHarness.run(limits: .init(eventsPerRequest: 1000)) { harness, client in
            let answer = try await client.send(.post, "/v1/events", key: TestKeys.writer, contentType: contentType, body: body)
            #expect(answer.status == .contentTooLarge, "\(answer.body.prefix(200))")
            #expect(harness.ledger.position == 0)
        }
        #expect(EventBodyDecoder.topLevelElements(Array(#"[{"a": [1, 2], "b": "x,\"],y"}, 2]"#.utf8)) == 2)
    }

    @Test(arguments: [
        ("", "invalidEvent"),
        ("{", "invalidEvent"),
        ("[1, 2", "invalidEvent"),
        ("\"an event\"", "invalidEvent"),
        ("42", "invalidEvent"),
        ("null", "invalidEvent"),
        ("[]", "invalidEvent"),
        ("{\"id\": \"e1\"} trailing", "invalidEvent"),
    ])
    func aBodyThatIsNotEventsIs400WithTheSpecsCode(_ body: String, _ code: String) async throws {
        try await ServerHarness.run { harness, client in
            let answer = try await client.send(.post, "/v1/events", key: TestKeys.writer, body: body)
            #expect(answer.status == .badRequest)
            #expect(answer.errorCode == code)
            #expect(harness.ledger.position == 0)
        }
    }

    @Test func anEventThatDoesNotDecodeIsRejectedAlone() async throws {
        try await ServerHarness.run { harness, client in
            let body = "[" + [
                Lines.added("e1", "ana", payment: "A1", product: "com.example.tenhints"),
                "{\"id\": \"e2\"}",
                "7",
                Lines.added("e3", "ana", payment: "A2", product: "com.example.tenhints"),
            ].joined(separator: ",") + "]"
            let outcomes = try await client.send(.post, "/v1/events", key: TestKeys.writer, body: body).array
            #expect(outcomes.map { $0["outcome"] as? String } == ["appended", "rejected", "rejected", "appended"])
            #expect(outcomes.map { $0["error"] as? String } == [nil, "invalidEvent", "invalidEvent", nil])
            #expect(harness.ledger.position == 2)
        }
    }

    @Test(arguments: ["", ";", " ; charset=utf-8", "text/plain"])
    func anEmptyOrUnknownContentTypeIs415(_ contentType: String) async throws {
        try await ServerHarness.run { harness, client in
            var headers = HTTPFields()
            headers[.contentType] = contentType
            let body = Lines.added("e1", "ana", payment: "A1", product: "com.example.tenhints")
            let answer = try await client.send(.post, "/v1/events", key: TestKeys.writer, contentType: nil, body: body, headers: headers)
            #expect(answer.status == .unsupportedMediaType)
            #expect(harness.ledger.position == 0)
            let health = try await client.send(.get, "/v1/health")
            #expect(health.status == .ok)
        }
    }

    @Test func openRoutesIgnoreKeysAndXAPIKeyIsReadBehindAnotherScheme() async throws {
        try await ServerHarness.run { _, client in
            // A stale key does not shut a health checker out.
            let health = try await client.send(.get, "/v1/health", key: "a-key-that-was-rotated-out-long-ago-000")
            #expect(health.status == .ok)
            // A proxy's Authorization: Basic does not hide X-API-Key.
            var headers = HTTPFields()
            headers[.authorization] = "Basic cHJveHk6c2VjcmV0"
            headers[HTTPField.Name("X-API-Key")!] = TestKeys.reader
            let read = try await client.send(.get, "/v1/accounts/ana", headers: headers)
            #expect(read.status == .ok)
        }
    }

    @Test func anUnknownContentTypeIs415() async throws {
        try await ServerHarness.run { harness, client in
            let body = Lines.added("e1", "ana", payment: "A1", product: "com.example.tenhints")
            let answer = try await client.send(.post, "/v1/events", key: TestKeys.writer, contentType: "text/plain", body: body)
            #expect(answer.status == .unsupportedMediaType)
            #expect(harness.ledger.position == 0)
            // Parameters and case do not matter.
            let reply10 = try await client.send(.post, "/v1/events", key: TestKeys.writer, contentType: "Application/JSON; charset=utf-8", body: body)
            #expect(reply10.status == .ok)
        }
    }

    /// Whatever bytes a client sends, the server answers (never a 5xx) and keeps serving; what
    /// it appended is what it said it appended.
    @Test func arbitraryBodiesNeverBreakTheServer() async throws {
        try await ServerHarness.run { harness, client in
            var random = SystemRandomNumberGenerator()
            let fragments = ["{", "}", "[", "]", ",", ":", "\"id\"", "\"type\"", "\"paymentAdded\"", "\"account\"", "\"ana\"",
                             "\"at\"", "\"2026-03-14T08:00:00Z\"", "\"payment\"", "\"product\"", "\"com.example.tenhints\"",
                             "1e999", "-0", "null", "true", "\\u0000", "\u{FFFF}", "\n", "\"\\ud800\"", "9223372036854775808"]
            var appended = 0
            for round in 0..<300 {
                var body = ""
                for _ in 0..<Int.random(in: 0...40, using: &random) { body += fragments.randomElement(using: &random)! }
                if round % 3 == 0 {
                    body = Lines.added("r\(round)", "ana", payment: "P\(round)", product: "com.example.tenhints") + body
                }
                let type = ["application/json", "application/x-ndjson"].randomElement(using: &random)!
                let answer = try await client.send(.post, "/v1/events", key: TestKeys.writer, contentType: type, body: body)
                #expect(answer.status.code < 500, "\(body) → \(answer.status) \(answer.body)")
                if answer.status == .ok {
                    appended += try answer.array.filter { $0["outcome"] as? String == "appended" }.count
                }
            }
            let reply11 = try await client.send(.get, "/v1/health")
            #expect(reply11.status == .ok)
            #expect(harness.ledger.position == UInt64(appended))
        }
    }
}
