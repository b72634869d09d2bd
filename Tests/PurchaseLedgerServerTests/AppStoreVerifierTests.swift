import PurchaseLedger
import Foundation
import X509
@testable import PurchaseLedgerAppStore
@testable import PurchaseLedgerServer
import Testing

/// The JWS checks, against Apple's signed fixtures and a throwaway chain.
struct AppStoreVerifierTests {
    static func appleVerifier(appAppleId: Int64? = 1234, environment: AppStoreEnvironment = .sandbox) throws -> AppStoreSignedDataVerifier {
        AppStoreSignedDataVerifier(trustedRoots: [try AppleFixtures.testCA], bundleId: "com.example", appAppleId: appAppleId, environment: environment)
    }

    /// Apple's TEST notification decodes as Apple's library decodes it (read without its chain,
    /// as for Xcode data).
    @Test func applesTestNotificationDecodes() async throws {
        let unchecked = AppStoreSignedDataVerifier(trustedRoots: [], bundleId: "com.example", appAppleId: 1234, environment: .xcode)
        let notification = try await unchecked.verify(try AppleFixtures.signedData("testNotification"), as: AppStoreNotificationPayload.self)
        #expect(notification.notificationType == "TEST")
        #expect(notification.notificationUUID == "9ad56bd2-0bc6-42e0-af24-fd996d87a1e6")
        #expect(notification.data?.bundleId == "com.example")
        #expect(notification.data?.appAppleId == 1234)
        #expect(notification.signedDate == 1_681_314_324_000)
    }

    /// Apple's samples are signed by a test chain that OpenSSL's strict checks refuse, and so
    /// Apple's Python verifier refuses them: the server does too, for the same reason.
    @Test func applesSampleChainFailsTheStrictChecksAsInApplesVerifier() async throws {
        let payload = try AppleFixtures.signedData("testNotification")
        await expect(.verificationFailure) { _ = try await Self.appleVerifier().verifyNotification(payload) }
        let header = try #require(NotificationMutator.Token(payload)).header
        let x5c = try #require(try JSONSerialization.jsonObject(with: Data(header.utf8)) as? [String: Any])["x5c"] as? [String]
        let leaf = try TestAppStoreSigner.certificate(base64: try #require(x5c?.first))
        #expect(StrictX509Policy.violation(of: leaf, isLast: false) == "no authority key identifier")
        // Its root's basicConstraints is not critical, which OpenSSL 4.0 (under Apple's verifier
        // today) no longer refuses; it has no subject key identifier either, which it does.
        let rootViolation = StrictX509Policy.violation(of: try AppleFixtures.testCA, isLast: true)
        #expect(rootViolation == "a CA without a subject key identifier")
    }

    @Test func applesMissingX5CHeaderClaimIsRefused() async throws {
        let payload = try AppleFixtures.signedData("missingX5CHeaderClaim")
        await expect(.invalidJWTFormat) { _ = try await Self.appleVerifier().verifyNotification(payload) }
    }

    @Test func anotherEnvironmentOrAppIsRefused() async throws {
        let signer = try TestAppStoreSigner()
        let payload = try signer.sign(Self.testPayload)
        // A production server (the notification says Sandbox).
        await expect(.invalidEnvironment) { _ = try await signer.verifier(environment: .production).verifyNotification(payload) }
        // In production the App Apple ID must match too.
        await expect(.invalidAppIdentifier) { _ = try await signer.verifier(appAppleId: 999, environment: .production).verifyNotification(payload) }
        // In the sandbox it is not compared, as in Apple's library.
        _ = try await signer.verifier(appAppleId: 999).verifyNotification(payload)
        // Another app.
        var wrong = Self.testPayload
        wrong["data"] = ["bundleId": "com.example.wrong", "appAppleId": 41234, "environment": "Sandbox"]
        let wrongPayload = try signer.sign(wrong)
        await expect(.invalidAppIdentifier) { _ = try await signer.verifier().verifyNotification(wrongPayload) }
    }

    @Test func anUntrustedRootIsRefused() async throws {
        let payload = try TestAppStoreSigner().sign(Self.testPayload)
        let other = try TestAppStoreSigner().verifier(appAppleId: 1234)
        await expect(.verificationFailure) { _ = try await other.verifyNotification(payload) }
    }

    @Test func aChangedPayloadOrSignatureIsRefused() async throws {
        let signer = try TestAppStoreSigner()
        let parts = try signer.sign(Self.testPayload).split(separator: ".").map(String.init)
        _ = try await signer.verifier().verifyNotification(parts.joined(separator: "."))
        let payloadBytes = try #require(Base64URL.decode(parts[1]))
        var payload = try #require(try JSONSerialization.jsonObject(with: Data(payloadBytes)) as? [String: Any])
        payload["notificationUUID"] = "00000000-0000-0000-0000-000000000000"
        let forged = parts[0] + "." + Base64URL.encode(try JSONSerialization.data(withJSONObject: payload)) + "." + parts[2]
        await expect(.verificationFailure) { _ = try await signer.verifier().verifyNotification(forged) }

        var signature = try #require(Base64URL.decode(parts[2]))
        signature[10] ^= 1
        let badSignature = parts[0] + "." + parts[1] + "." + Base64URL.encode(signature)
        await expect(.verificationFailure) { _ = try await signer.verifier().verifyNotification(badSignature) }
    }

    nonisolated(unsafe) static let testPayload: [String: Any] = [
        "notificationType": "TEST", "notificationUUID": "9ad56bd2-0000-0000-0000-000000000001",
        "signedDate": 1_681_314_324_000,
        "data": ["bundleId": "com.example", "appAppleId": 41234, "environment": "Sandbox"],
    ]

    @Test func aThrowawayChainWithApplesOIDsVerifies() async throws {
        let signer = try TestAppStoreSigner()
        let notification = try await signer.verifier().verifyNotification(try signer.sign(Self.testPayload))
        #expect(notification.notificationUUID == "9ad56bd2-0000-0000-0000-000000000001")
    }

    @Test(arguments: [(true, false), (false, true)])
    func aChainWithoutApplesOIDsIsRefused(leafOID: Bool, intermediateOID: Bool) async throws {
        let signer = try TestAppStoreSigner(leafOID: leafOID, intermediateOID: intermediateOID)
        let payload = try signer.sign(Self.testPayload)
        await expect(.verificationFailure) { _ = try await signer.verifier().verifyNotification(payload) }
    }

    @Test func validityIsCheckedAtTheSigningDate() async throws {
        let signed = Date(timeIntervalSince1970: 1_681_314_324)
        // Valid when signed, long expired now: accepted, as Apple's library does offline.
        let past = try TestAppStoreSigner(validity: signed.addingTimeInterval(-86_400)...signed.addingTimeInterval(86_400))
        _ = try await past.verifier().verifyNotification(try past.sign(Self.testPayload))
        // Not yet valid when signed: refused.
        let later = try TestAppStoreSigner(validity: signed.addingTimeInterval(86_400)...Date(timeIntervalSinceNow: 86_400))
        let payload = try later.sign(Self.testPayload)
        await expect(.verificationFailure) { _ = try await later.verifier().verifyNotification(payload) }
    }

    @Test func malformedTokensAreRefused() async throws {
        let signer = try TestAppStoreSigner()
        let verifier = signer.verifier()
        let x5c = [try TestAppStoreSigner.der(signer.leaf), try TestAppStoreSigner.der(signer.intermediate), try TestAppStoreSigner.der(signer.root)]
        let cases: [(String, AppStoreVerificationError.Code)] = [
            ("", .invalidJWTFormat),
            ("a.b", .invalidJWTFormat),
            ("a.b.c.d", .invalidJWTFormat),
            ("!!.??.**", .invalidJWTFormat),
            (try signer.sign(["notificationType": "TEST"]), .invalidJWTFormat),  // no notificationUUID
            (try signer.sign(Self.testPayload, header: ["alg": "HS256", "x5c": x5c]), .invalidJWTFormat),
            (try signer.sign(Self.testPayload, header: ["alg": "ES256", "x5c": Array(x5c.prefix(2))]), .invalidJWTFormat),
            (try signer.sign(Self.testPayload, header: ["alg": "ES256", "x5c": ["not base64!", x5c[1], x5c[2]]]), .invalidCertificate),
            (try signer.sign(Self.testPayload, header: ["alg": "ES256", "x5c": ["AAAA", x5c[1], x5c[2]]]), .invalidJWTFormat),
            (try signer.sign(Self.testPayload, header: ["alg": "ES256", "x5c": [x5c[1], x5c[0], x5c[2]]]), .verificationFailure),
        ]
        for (token, code) in cases {
            await expect(code) { _ = try await verifier.verifyNotification(token) }
        }
    }

    @Test func xcodeDataIsDecodedWithoutAChainAsApplesLibraryDoes() async throws {
        var payload = Self.testPayload
        payload["data"] = ["bundleId": "com.example", "environment": "Xcode"]
        let unsigned = try TestAppStoreSigner().sign(payload, header: ["alg": "ES256", "kid": "Apple_Xcode_Key"])
        let xcode = AppStoreSignedDataVerifier(trustedRoots: [], bundleId: "com.example", appAppleId: nil, environment: .xcode)
        #expect(try await xcode.verifyNotification(unsigned).notificationType == "TEST")
        // The same token is refused where signatures count.
        await expect(.invalidJWTFormat) { _ = try await TestAppStoreSigner().verifier().verifyNotification(unsigned) }
    }
}
