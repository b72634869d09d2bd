import Foundation
import HTTPTypes
import HummingbirdTesting
import LedgerTestSupport
import PurchaseLedger
@testable import PurchaseLedgerAppStore
@testable import PurchaseLedgerServer
import Testing

/// What anyone who can reach `POST /v1/appstore/notifications` can send without a key: each
/// refusal is a 4xx with the code and a fixed message, the ledger unchanged, and the server
/// still serving.
struct AppStoreHostileInputTests {
    /// The route over a verifier that trusts Apple's test root and `signer`'s, in the sandbox.
    static func run(
        signer: TestAppStoreSigner, _ body: @Sendable (ServerHarness, any TestClientProtocol) async throws -> Void
    ) async throws {
        let roots = [try AppleFixtures.testCA, signer.root]
        try await ServerHarness.run(notifications: { ledger, directory in
            AppStoreNotificationHandler(
                verifier: AppStoreSignedDataVerifier(trustedRoots: roots, bundleId: "com.example", appAppleId: 41234, environment: .sandbox),
                unattributed: UnattributedNotificationLog(path: directory + "/unattributed.jsonl"), ledger: ledger)
        }, body)
    }

    static func post(_ jws: String, _ client: any TestClientProtocol) async throws -> Answer {
        try await client.send(.post, "/v1/appstore/notifications", body: "{\"signedPayload\": \(JSONString.quoted(jws))}")
    }

    /// Apple's signed TEST notification with its payload's `signedDate` rewritten (the
    /// signature no longer matches, but the date used to be read first).
    static func applesNotification(signedDate: String) throws -> String {
        var token = try #require(NotificationMutator.Token(try AppleFixtures.signedData("testNotification")))
        token.payload = NotificationMutator.replacing("signedDate", in: token.payload, with: signedDate)
        #expect(token.payload.contains("\"signedDate\":\(signedDate)"))
        return token.jws
    }

    @Test(arguments: ["1e15", "253402300800000", "1e300", "-1e15", "-62135769600000", "9223372036854775807"])
    func applesNotificationWithAnImpossibleSignedDateIs400AndTheServerServesOn(_ signedDate: String) async throws {
        let signer = try TestAppStoreSigner()
        try await Self.run(signer: signer) { harness, client in
            let answer = try await Self.post(try Self.applesNotification(signedDate: signedDate), client)
            #expect(answer.status == .badRequest)
            #expect(answer.errorCode == "INVALID_JWT_FORMAT")
            #expect(try answer.object["message"] as? String == AppStoreVerificationError.Code.invalidJWTFormat.publicMessage)
            #expect(harness.ledger.position == 0)
            // Still serving, and a genuine notification still verifies.
            #expect(try await client.send(.get, "/v1/health").status == .ok)
            let genuine = try await Self.post(try signer.sign(AppStoreVerifierTests.testPayload), client)
            #expect(genuine.status == .ok, "\(genuine.body)")
        }
    }

    /// The same dates, validly signed: still refused before the chain is checked.
    @Test func aSignedDateOutsideTheWindowIsInvalidJWTFormatEvenWhenSigned() async throws {
        let signer = try TestAppStoreSigner()
        let verifier = signer.verifier()
        let now = Date().timeIntervalSince1970 * 1000
        let refused = ["-1", "0", "946684799999", "1e15", "253402300800000", "1.7976931348623157e308", "-1.7976931348623157e308",
                       "9223372036854775807", "\(Int64(now + 2 * 86_400_000))", "\"1681314324000\"", "true", "[]", "{}", "1e400"]
        for signedDate in refused {
            let payload = NotificationMutator.replacing("signedDate", in: #"{"notificationType":"TEST","notificationUUID":"u","signedDate":0,"data":{"bundleId":"com.example","environment":"Sandbox"}}"#, with: signedDate)
            let jws = try signer.sign(rawHeader: try signer.header(), rawPayload: payload)
            do throws(AppStoreVerificationError) {
                _ = try await verifier.verifyNotification(jws)
                Issue.record("signedDate \(signedDate) was accepted")
            } catch {
                #expect(error.code == .invalidJWTFormat, "signedDate \(signedDate): \(error)")
            }
        }
        for signedDate in ["946684800000", "\(Int64(now))", "\(now)", "\(Int64(now + 86_000_000))"] {
            let payload = #"{"notificationType":"TEST","notificationUUID":"u","signedDate":\#(signedDate),"data":{"bundleId":"com.example","environment":"Sandbox"}}"#
            let jws = try signer.sign(rawHeader: try signer.header(), rawPayload: payload)
            do throws(AppStoreVerificationError) {
                _ = try await verifier.verifyNotification(jws)
                // 2000-01-01 is outside the chain's validity: it gets that far and no further.
                #expect(signedDate != "946684800000")
            } catch {
                #expect(signedDate == "946684800000" && error.code == .verificationFailure, "signedDate \(signedDate): \(error)")
            }
        }
    }

    /// Refusals tell a stranger the code and a fixed text: nothing of the request, nothing of a
    /// library (`DecodingError`, `ASN1Error` and their source paths).
    @Test func refusalsSayTheCodeAndAFixedMessage() async throws {
        let signer = try TestAppStoreSigner()
        try await Self.run(signer: signer) { _, client in
            let x5c = [try TestAppStoreSigner.der(signer.leaf), try TestAppStoreSigner.der(signer.intermediate), try TestAppStoreSigner.der(signer.root)]
            let tokens = [
                try signer.sign(["notificationType": "TEST", "signedDate": "secret-\u{1B}[31m"]),
                try signer.sign(AppStoreVerifierTests.testPayload, header: ["alg": "ES256", "x5c": ["AAAA", x5c[1], x5c[2]]]),
                try signer.sign(AppStoreVerifierTests.testPayload, header: ["alg": "ES256-secret", "x5c": x5c]),
                "secret.secret.secret",
            ]
            for token in tokens {
                let answer = try await Self.post(token, client)
                #expect(answer.status == .badRequest)
                let code = try #require(answer.errorCode.flatMap(AppStoreVerificationError.Code.init(rawValue:)), "\(answer.body)")
                #expect(try answer.object["message"] as? String == code.publicMessage)
                #expect(!answer.body.contains("secret") && !answer.body.contains("Error") && !answer.body.contains(".swift"), "\(answer.body)")
            }
        }
    }

    /// Notifications Apple keeps retrying until it gets a 200: verified and acknowledged.
    @Test(arguments: ["signedRescindConsentNotification", "signedSummaryNotification"])
    func notificationsWithoutDataAreVerifiedAndAcknowledged(_ model: String) async throws {
        let signer = try TestAppStoreSigner()
        try await Self.run(signer: signer) { harness, client in
            var payload = try AppleFixtures.model(model)
            for key in ["appData", "summary"] {
                guard var part = payload[key] as? [String: Any] else { continue }
                part["environment"] = "Sandbox"
                payload[key] = part
            }
            let answer = try await Self.post(try signer.sign(payload), client)
            #expect(answer.status == .ok, "\(answer.body)")
            #expect(try answer.object["action"] as? String == "ignored")
            #expect(try answer.object["notificationType"] as? String == payload["notificationType"] as? String)
            #expect(harness.ledger.position == 0)

            // For another app it is refused as any notification is.
            for key in ["appData", "summary"] {
                guard var part = payload[key] as? [String: Any] else { continue }
                part["bundleId"] = "com.other"
                payload[key] = part
            }
            #expect(try await Self.post(try signer.sign(payload), client).errorCode == "INVALID_APP_IDENTIFIER")
        }
    }

    /// The fuzz run: hostile bodies made from Apple's signed samples and the test chain's.
    /// Every answer is 200 or 4xx, never a 5xx (the storage is healthy throughout), and a
    /// refused body changes nothing. `tools/fuzz` runs it long through the environment:
    /// PURCHASE_LEDGER_FUZZ_INPUTS, PURCHASE_LEDGER_FUZZ_SECONDS, PURCHASE_LEDGER_FUZZ_SEED.
    @Test func fuzzedNotificationsAreAnswered200Or4xxAndRefusalsChangeNothing() async throws {
        let environment = ProcessInfo.processInfo.environment
        let inputs = environment["PURCHASE_LEDGER_FUZZ_INPUTS"].flatMap(Int.init) ?? 1500
        let seconds = environment["PURCHASE_LEDGER_FUZZ_SECONDS"].flatMap(Double.init) ?? 120
        let seed = environment["PURCHASE_LEDGER_FUZZ_SEED"].flatMap(UInt64.init) ?? UInt64.random(in: 0...UInt64.max)
        let signer = try TestAppStoreSigner()
        let purchase = try AppStoreNotificationTests.notification(
            "ONE_TIME_CHARGE", uuid: UUID().uuidString, transaction: AppStoreNotificationTests.transaction(), signer: signer)
        let seeds = [
            try AppleFixtures.signedData("testNotification"), try AppleFixtures.signedData("wrongBundleId"),
            try AppleFixtures.signedData("missingX5CHeaderClaim"), try AppleFixtures.signedData("transactionInfo"),
            try signer.sign(AppStoreVerifierTests.testPayload),
            try #require(purchase.split(separator: "\"").dropFirst(3).first.map(String.init)),
        ]
        let mutator = NotificationMutator(seeds: seeds, signer: signer, stranger: try TestAppStoreSigner())
        // Said first: a crash ends the process before any later line.
        print("App Store route fuzz: seed \(seed) (PURCHASE_LEDGER_FUZZ_SEED repeats the run)")
        try await Self.run(signer: signer) { harness, client in
            var random = SeededGenerator(seed: seed)
            var statuses: [Int: Int] = [:]
            let deadline = Date().addingTimeInterval(seconds)
            var sent = 0
            while sent < inputs, Date() < deadline {
                let body = mutator.body(&random)
                let before = harness.ledger.position
                let answer = try await client.send(.post, "/v1/appstore/notifications", body: body)
                sent += 1
                statuses[Int(answer.status.code), default: 0] += 1
                #expect(answer.status == .ok || (400..<500).contains(answer.status.code), "seed \(seed), input \(sent): \(answer.status) \(answer.body.prefix(300))")
                if answer.status != .ok {
                    #expect(harness.ledger.position == before, "seed \(seed), input \(sent): refused but appended")
                    #expect(answer.errorCode != nil, "seed \(seed), input \(sent): \(answer.body.prefix(300))")
                }
            }
            #expect(try await client.send(.get, "/v1/health").status == .ok)
            // The mutations reach past the signature: some inputs are accepted. Judged on a whole
            // run only: one cut short by its deadline (a CI machine running every suite at once
            // once sent 25 inputs in two minutes) may not have drawn an input that gets that far.
            if sent == inputs {
                #expect(statuses[200, default: 0] > 0 && statuses[400, default: 0] > 0, "\(statuses)")
            }
            print("App Store route fuzz: seed \(seed), \(sent) inputs, answers \(statuses.sorted { $0.key < $1.key }), crashes 0")
        }
    }
}
