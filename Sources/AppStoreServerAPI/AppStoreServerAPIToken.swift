import Foundation
import JWTKit

/// The claims Apple requires of an App Store Server API token: issuer, issued-at, expiry (at
/// most an hour later), audience `appstoreconnect-v1`, and the bundle id.
public struct AppStoreServerAPIClaims: JWTPayload, Sendable {
    public var iss: IssuerClaim
    public var iat: IssuedAtClaim
    public var exp: ExpirationClaim
    public var aud: AudienceClaim
    public var bid: String

    public init(issuer: String, bundleID: String, issuedAt: Date, lifetime: TimeInterval) {
        iss = IssuerClaim(value: issuer)
        iat = IssuedAtClaim(value: issuedAt)
        exp = ExpirationClaim(value: issuedAt.addingTimeInterval(lifetime))
        aud = AudienceClaim(value: AppStoreServerAPIClaims.audience)
        bid = bundleID
    }

    public static let audience = "appstoreconnect-v1"

    /// What Apple checks of a token it receives (the fake App Store of the tests checks the same).
    public func verify(using algorithm: some JWTAlgorithm) async throws {
        try exp.verifyNotExpired()
        try aud.verifyIntendedAudience(includes: Self.audience)
        guard exp.value.timeIntervalSince(iat.value) <= 3600 else {
            throw JWTError.claimVerificationFailure(failedClaim: exp, reason: "a token lives at most an hour")
        }
    }
}

/// Signs tokens with the in-app purchase key (ES256, `kid` in the header). A token lives five
/// minutes: long enough for one call and its retries, short enough to be worthless if leaked.
struct AppStoreServerAPITokenSigner: Sendable {
    let keys: JWTKeyCollection
    let credentials: AppStoreServerAPICredentials
    static let lifetime: TimeInterval = 300

    init(credentials: AppStoreServerAPICredentials) async throws(AppStoreServerAPIError) {
        self.credentials = credentials
        let key: ES256PrivateKey
        do {
            key = try ES256PrivateKey(pem: credentials.privateKeyPEM)
        } catch {
            // Not the error's text: it might quote the key.
            throw AppStoreServerAPIError(.invalidKey, "the in-app purchase key is not a PKCS#8 P-256 private key in PEM (a .p8 file)")
        }
        keys = JWTKeyCollection()
        await keys.add(ecdsa: key, kid: JWKIdentifier(string: credentials.keyID))
    }

    func token(now: Date = Date()) async throws -> String {
        let claims = AppStoreServerAPIClaims(
            issuer: credentials.issuerID, bundleID: credentials.bundleID, issuedAt: now, lifetime: Self.lifetime)
        return try await keys.sign(claims, kid: JWKIdentifier(string: credentials.keyID))
    }
}
