import Crypto
import Foundation
import PurchaseLedger
import SwiftASN1
@_spi(DisableValidityCheck) import X509

/// Verifies and decodes the JWS the App Store signs (notifications and the transactions inside
/// them), accepting exactly what Apple's App Store Server Library accepts with online checks off:
///
/// 1. a compact JWS whose header has `alg` ES256 and an `x5c` of three certificates;
/// 2. the payload's `signedDate` is a sane time (2000-01-01 to tomorrow; it is read before the
///    signature is checked, so it is validated first: `AppStoreSigningTime`);
/// 3. the leaf and intermediate of `x5c` chain to one of the configured trusted roots (the root
///    in `x5c` itself is ignored), valid at `floor(signedDate / 1000)` seconds, with OpenSSL's
///    strict X.509 checks (`StrictX509Policy`), the receipt-signing OID on the leaf and the WWDR
///    OID on the intermediate;
/// 4. the ES256 signature over `header.payload` matches the leaf's P-256 key;
/// 5. the payload names this app (bundle id; App Apple ID in production) and environment.
///
/// A verifier may take several environments (Production and Sandbox: App Review and TestFlight
/// buy in the sandbox against the production app). Each payload is then held to the rules of
/// the environment it names, when that is one of them (Sandbox needs no App Apple ID), and
/// refused as `INVALID_ENVIRONMENT` otherwise; with one environment this is Apple's verifier.
///
/// For the Xcode and LocalTesting environments nothing is signed by the App Store, and, as in
/// Apple's library, steps 1–4 are skipped (the header need name no chain): never configure
/// those on a server others can reach.
/// No OCSP revocation check is made (it needs Apple's responder online).
///
/// Error messages are for the server's log (which escapes and bounds them); a client is
/// answered the code and its fixed `publicMessage` only.
public struct AppStoreSignedDataVerifier: Sendable {
    public let bundleId: String
    public let appAppleId: Int64?
    /// The environments taken, in the configuration's order (never empty).
    public let environments: [AppStoreEnvironment]
    private let roots: [Certificate]

    /// - Parameters:
    ///   - trustedRoots: the roots chains must end in (Apple Root CA G3 in production).
    ///   - bundleId: the app's bundle id, which every payload must name.
    ///   - appAppleId: the app's Apple ID, which production payloads must name.
    ///   - environment: the environment payloads must come from.
    public init(trustedRoots: [Certificate], bundleId: String, appAppleId: Int64?, environment: AppStoreEnvironment) {
        self.init(trustedRoots: trustedRoots, bundleId: bundleId, appAppleId: appAppleId, environments: [environment])
    }

    /// A verifier taking each of `environments` (in order; duplicates are ignored, and none
    /// means Production).
    public init(trustedRoots: [Certificate], bundleId: String, appAppleId: Int64?, environments: [AppStoreEnvironment]) {
        self.roots = trustedRoots
        self.bundleId = bundleId
        self.appAppleId = appAppleId
        var unique: [AppStoreEnvironment] = []
        for environment in environments where !unique.contains(environment) { unique.append(environment) }
        self.environments = unique.isEmpty ? [.production] : unique
    }

    /// The same verifier, taking `environment` only: for the signed objects a notification
    /// carries, which must be of its environment.
    public func only(_ environment: AppStoreEnvironment) -> AppStoreSignedDataVerifier {
        AppStoreSignedDataVerifier(trustedRoots: roots, bundleId: bundleId, appAppleId: appAppleId, environment: environment)
    }

    /// The environment whose rules a payload naming `claimed` is held to: its own when taken,
    /// else the first taken (whose check then refuses it, as a one-environment verifier does).
    func rules(for claimed: String?) -> AppStoreEnvironment {
        environments.first { $0.rawValue == claimed } ?? environments[0]
    }

    /// Refuses a payload from an environment not taken.
    private func checkEnvironment(_ claimed: String?, of what: String) throws(AppStoreVerificationError) {
        guard environments.contains(where: { $0.rawValue == claimed }) else {
            let taken = environments.map(\.rawValue).joined(separator: ", ")
            throw AppStoreVerificationError(.invalidEnvironment, "\(what) is from \(claimed ?? "no environment"), this server takes \(taken)")
        }
    }

    /// Reads root certificates from DER or PEM files.
    public static func loadCertificates(paths: [String]) throws -> [Certificate] {
        try paths.map { path in
            let bytes: [UInt8]
            do {
                bytes = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
            } catch {
                throw AppStoreConfigurationError("cannot read the certificate \(path): \(error.localizedDescription)")
            }
            do {
                if let text = String(bytes: bytes, encoding: .utf8), text.contains("-----BEGIN CERTIFICATE-----") {
                    return try Certificate(pemEncoded: text)
                }
                return try Certificate(derEncoded: bytes)
            } catch {
                throw AppStoreConfigurationError("\(path) is not a DER or PEM certificate: \(error)")
            }
        }
    }

    /// A notification's `signedPayload`, verified and decoded.
    public func verifyNotification(_ signedPayload: String) async throws(AppStoreVerificationError) -> AppStoreNotificationPayload {
        let notification = try await verify(signedPayload, as: AppStoreNotificationPayload.self)
        let identity = notification.identity
        if identity.bundleId != bundleId || (rules(for: identity.environment) == .production && identity.appAppleId != appAppleId) {
            throw AppStoreVerificationError(.invalidAppIdentifier, "the notification is for \(identity.bundleId ?? "no app")\(identity.appAppleId.map { " (\($0))" } ?? ""), not \(bundleId)")
        }
        try checkEnvironment(identity.environment, of: "the notification")
        return notification
    }

    /// A `signedTransactionInfo`, verified and decoded.
    public func verifyTransaction(_ signedTransaction: String) async throws(AppStoreVerificationError) -> AppStoreTransactionPayload {
        let transaction = try await verify(signedTransaction, as: AppStoreTransactionPayload.self)
        if transaction.bundleId != bundleId {
            throw AppStoreVerificationError(.invalidAppIdentifier, "the transaction is for \(transaction.bundleId ?? "no app"), not \(bundleId)")
        }
        try checkEnvironment(transaction.environment, of: "the transaction")
        return transaction
    }

    /// A `signedRenewalInfo`, verified and decoded (it names no app: its environment is checked).
    public func verifyRenewalInfo(_ signedRenewalInfo: String) async throws(AppStoreVerificationError) -> AppStoreRenewalPayload {
        let renewal = try await verify(signedRenewalInfo, as: AppStoreRenewalPayload.self)
        try checkEnvironment(renewal.environment, of: "the renewal info")
        return renewal
    }

    /// A `signedAppTransactionInfo`, verified and decoded as Apple's library does: the app
    /// (and in production its App Apple ID), then its `receiptType` as the environment.
    public func verifyAppTransaction(_ signedAppTransaction: String) async throws(AppStoreVerificationError) -> AppStoreAppTransactionPayload {
        let appTransaction = try await verify(signedAppTransaction, as: AppStoreAppTransactionPayload.self)
        if appTransaction.bundleId != bundleId || (rules(for: appTransaction.receiptType) == .production && appTransaction.appAppleId != appAppleId) {
            throw AppStoreVerificationError(.invalidAppIdentifier, "the app transaction is for \(appTransaction.bundleId ?? "no app"), not \(bundleId)")
        }
        try checkEnvironment(appTransaction.receiptType, of: "the app transaction")
        return appTransaction
    }

    private struct Header: Decodable {
        var alg: String?
        var x5c: [String]?
    }

    func verify<Payload: AppStoreSignedPayload>(_ jws: String, as type: Payload.Type, now: Date = Date()) async throws(AppStoreVerificationError) -> Payload {
        let parts = jws.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3,
              let headerBytes = Base64URL.decode(parts[0]),
              let payloadBytes = Base64URL.decode(parts[1]),
              let signatureBytes = Base64URL.decode(parts[2])
        else {
            throw AppStoreVerificationError(.invalidJWTFormat, "not a compact JWS (three base64url parts separated by dots)")
        }
        let header: Header
        let payload: Payload
        do {
            header = try JSONDecoder().decode(Header.self, from: Data(headerBytes))
        } catch {
            throw AppStoreVerificationError(.invalidJWTFormat, "the JWS header is not a JSON object with alg and x5c")
        }
        do {
            payload = try JSONDecoder().decode(Payload.self, from: Data(payloadBytes))
        } catch {
            throw AppStoreVerificationError(.invalidJWTFormat, "the JWS payload is not the JSON expected (\(DecodingFailure.summary(error)))")
        }
        guard rules(for: payload.claimedEnvironment).isSigned else { return payload }

        guard let x5c = header.x5c else {
            throw AppStoreVerificationError(.invalidJWTFormat, "the JWS header has no x5c certificate chain")
        }
        guard header.alg == "ES256", x5c.count == 3 else {
            throw AppStoreVerificationError(.invalidJWTFormat, "expected alg ES256 and three x5c certificates")
        }
        // Read before the signature is checked: validated before any certificate code sees it.
        let signingTime = try AppStoreSigningTime(signedDate: payload.signedDate, now: now)
        guard let leafDER = Data(base64Encoded: x5c[0]), let intermediateDER = Data(base64Encoded: x5c[1]) else {
            throw AppStoreVerificationError(.invalidCertificate, "an x5c certificate is not base64")
        }
        let leaf: Certificate, intermediate: Certificate
        do {
            leaf = try Certificate(derEncoded: Array(leafDER))
            intermediate = try Certificate(derEncoded: Array(intermediateDER))
        } catch {
            // Apple's library answers a certificate that is base64 but not DER this way.
            throw AppStoreVerificationError(.invalidJWTFormat, "an x5c certificate is not DER")
        }

        var verifier = Verifier(rootCertificates: CertificateStore(roots)) {
            RFC5280Policy.withValidityCheckDisabled()
            ValidAtSigningTimePolicy(time: signingTime)
            StrictX509Policy()
            AppStoreOIDPolicy()
        }
        let result = await verifier.validate(leaf: leaf, intermediates: CertificateStore([intermediate]))
        guard case .validCertificate = result else {
            throw AppStoreVerificationError(.verificationFailure, "the x5c chain does not verify against the trusted roots at \(signingTime.seconds) s")
        }
        guard let key = P256.Signing.PublicKey(leaf.publicKey) else {
            throw AppStoreVerificationError(.verificationFailure, "the leaf certificate's key is not P-256")
        }
        guard let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signatureBytes),
              key.isValidSignature(signature, for: Array(jws.utf8[..<parts[1].endIndex]))
        else {
            throw AppStoreVerificationError(.verificationFailure, "the JWS signature does not match the leaf certificate's key")
        }
        return payload
    }
}

enum Base64URL {
    static func decode(_ text: some StringProtocol) -> [UInt8]? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        return Data(base64Encoded: base64).map(Array.init)
    }

    static func encode(_ bytes: some Sequence<UInt8>) -> String {
        Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
