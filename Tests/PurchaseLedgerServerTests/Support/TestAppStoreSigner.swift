import PurchaseLedger
import Crypto
import Foundation
import SwiftASN1
import X509
@testable import PurchaseLedgerAppStore
@testable import PurchaseLedgerServer
import LedgerTestSupport

/// A throwaway App Store signing chain (root → intermediate with Apple's WWDR OID → leaf with
/// the receipt-signing OID, all P-256), made fresh for the tests, and JWS signed with its leaf:
/// what Apple's own tests do with the decoded `models/*.json` payloads. By default the chain
/// passes OpenSSL's strict X.509 checks, as Apple's real chains do; `Chain` takes each piece
/// away to make one that Apple's library refuses.
struct TestAppStoreSigner {
    /// What the chain has. Every switch off (or a validity moved) makes a chain Apple refuses.
    struct Chain: Sendable, Hashable {
        var leafOID = true
        var intermediateOID = true
        /// The intermediate's keyUsage (a CA must have one).
        var intermediateKeyUsage = true
        /// The intermediate's subject key identifier (a CA must have one).
        var intermediateSubjectKeyIdentifier = true
        /// The leaf's authority key identifier (every certificate but the root must have one).
        var leafAuthorityKeyIdentifier = true
        /// The leaf claims keyCertSign although it is no CA.
        var leafSignsCertificates = false
        /// The intermediate's keyUsage allows keyCertSign (a CA's must).
        var intermediateSignsCertificates = true
        /// The leaf's authority key identifier names another key than the intermediate's.
        var leafNamesAnotherIssuerKey = false
        /// The leaf has a critical extended key usage (OpenSSL handles it: accepted).
        var leafCriticalExtendedKeyUsage = false
        /// The intermediate's basicConstraints is marked critical (RFC 5280 asks it of a CA).
        var intermediateBasicConstraintsCritical = true
        /// The root's basicConstraints is marked critical.
        var rootBasicConstraintsCritical = true
        /// When the root and the intermediate are valid (ten years either side of now unless set).
        var validity: ClosedRange<Date>?
        /// When the leaf is valid (`validity` unless set).
        var leafValidity: ClosedRange<Date>?
    }

    let root: Certificate
    let intermediate: Certificate
    let leaf: Certificate
    let leafKey: P256.Signing.PrivateKey

    /// - Parameters:
    ///   - leafOID, intermediateOID: leave one out to make a chain Apple's policy refuses.
    ///   - validity: when the chain's certificates are valid.
    init(leafOID: Bool = true, intermediateOID: Bool = true, validity: ClosedRange<Date>? = nil) throws {
        try self.init(chain: Chain(leafOID: leafOID, intermediateOID: intermediateOID, validity: validity))
    }

    init(chain: Chain) throws {
        let validity = chain.validity ?? Date(timeIntervalSinceNow: -86_400 * 3650)...Date(timeIntervalSinceNow: 86_400 * 3650)
        let rootKey = P256.Signing.PrivateKey()
        let intermediateKey = P256.Signing.PrivateKey()
        leafKey = P256.Signing.PrivateKey()
        let rootName = try DistinguishedName { CountryName("US"); OrganizationName("Test Root") }
        let intermediateName = try DistinguishedName { CountryName("US"); OrganizationName("Test Intermediate") }
        let leafName = try DistinguishedName { CountryName("US"); OrganizationName("Test Leaf") }
        // Apple's marker extensions: their content is not read, only their presence.
        let marker = { (oid: ASN1ObjectIdentifier) in Certificate.Extension(oid: oid, critical: false, value: [0x05, 0x00]) }
        let rootIdentifier = SubjectKeyIdentifier(hash: .init(rootKey.publicKey))
        let intermediateIdentifier = SubjectKeyIdentifier(hash: .init(intermediateKey.publicKey))

        func certificate(
            key: P256.Signing.PrivateKey, subject: DistinguishedName, issuer: DistinguishedName,
            issuerKey: P256.Signing.PrivateKey, validity: ClosedRange<Date>, extensions: Certificate.Extensions
        ) throws -> Certificate {
            try Certificate(
                version: .v3, serialNumber: .init(), publicKey: .init(key.publicKey),
                notValidBefore: validity.lowerBound, notValidAfter: validity.upperBound,
                issuer: issuer, subject: subject, signatureAlgorithm: .ecdsaWithSHA256,
                extensions: extensions, issuerPrivateKey: .init(issuerKey))
        }

        root = try certificate(
            key: rootKey, subject: rootName, issuer: rootName, issuerKey: rootKey, validity: validity,
            extensions: try {
                var extensions = try Certificate.Extensions {
                    Critical(KeyUsage(keyCertSign: true))
                    rootIdentifier
                }
                var constraints = try BasicConstraints.isCertificateAuthority(maxPathLength: nil).makeCertificateExtension()
                constraints.critical = chain.rootBasicConstraintsCritical
                try extensions.append(constraints)
                return extensions
            }())
        var intermediateExtensions = try Certificate.Extensions {
            AuthorityKeyIdentifier(keyIdentifier: rootIdentifier.keyIdentifier)
        }
        var constraints = try BasicConstraints.isCertificateAuthority(maxPathLength: nil).makeCertificateExtension()
        constraints.critical = chain.intermediateBasicConstraintsCritical
        try intermediateExtensions.append(constraints)
        if chain.intermediateKeyUsage {
            let usage = chain.intermediateSignsCertificates ? KeyUsage(keyCertSign: true) : KeyUsage(digitalSignature: true)
            try intermediateExtensions.append(Critical(usage).makeCertificateExtension())
        }
        if chain.intermediateSubjectKeyIdentifier { try intermediateExtensions.append(intermediateIdentifier.makeCertificateExtension()) }
        if chain.intermediateOID { try intermediateExtensions.append(marker(AppStoreOIDPolicy.intermediateOID)) }
        intermediate = try certificate(
            key: intermediateKey, subject: intermediateName, issuer: rootName, issuerKey: rootKey, validity: validity,
            extensions: intermediateExtensions)
        var leafExtensions = try Certificate.Extensions {
            Critical(BasicConstraints.notCertificateAuthority)
            Critical(KeyUsage(digitalSignature: true, keyCertSign: chain.leafSignsCertificates))
        }
        if chain.leafAuthorityKeyIdentifier {
            let named = chain.leafNamesAnotherIssuerKey ? rootIdentifier.keyIdentifier : intermediateIdentifier.keyIdentifier
            try leafExtensions.append(AuthorityKeyIdentifier(keyIdentifier: named).makeCertificateExtension())
        }
        if chain.leafCriticalExtendedKeyUsage {
            try leafExtensions.append(Critical(try ExtendedKeyUsage([.codeSigning])).makeCertificateExtension())
        }
        if chain.leafOID { try leafExtensions.append(marker(AppStoreOIDPolicy.leafOID)) }
        leaf = try certificate(
            key: leafKey, subject: leafName, issuer: intermediateName, issuerKey: intermediateKey,
            validity: chain.leafValidity ?? validity, extensions: leafExtensions)
    }

    static func certificate(base64: String) throws -> Certificate {
        guard let bytes = Data(base64Encoded: base64) else { throw TestFailure("not base64") }
        return try Certificate(derEncoded: Array(bytes))
    }

    static func der(_ certificate: Certificate) throws -> String {
        var serializer = DER.Serializer()
        try serializer.serialize(certificate)
        return Data(serializer.serializedBytes).base64EncodedString()
    }

    /// `payload` (a JSON object) as a compact JWS, ES256 with `x5c` [leaf, intermediate, root].
    func sign(_ payload: [String: Any], header: [String: Any]? = nil) throws -> String {
        let header = try header ?? ["alg": "ES256", "x5c": [Self.der(leaf), Self.der(intermediate), Self.der(root)]]
        let headerPart = Base64URL.encode(try JSONSerialization.data(withJSONObject: header, options: [.sortedKeys]))
        let payloadPart = Base64URL.encode(try JSONSerialization.data(withJSONObject: payload, options: [.sortedKeys]))
        let signingInput = headerPart + "." + payloadPart
        let signature = try leafKey.signature(for: Data(signingInput.utf8))
        return signingInput + "." + Base64URL.encode(signature.rawRepresentation)
    }

    /// A JWS of exactly this header and payload text (which need not be JSON), signed by the leaf.
    func sign(rawHeader: String, rawPayload: String) throws -> String {
        let signingInput = Base64URL.encode(Array(rawHeader.utf8)) + "." + Base64URL.encode(Array(rawPayload.utf8))
        let signature = try leafKey.signature(for: Data(signingInput.utf8))
        return signingInput + "." + Base64URL.encode(signature.rawRepresentation)
    }

    /// This chain's header: ES256 with `x5c` [leaf, intermediate, root].
    func header() throws -> String {
        let header: [String: Any] = ["alg": "ES256", "x5c": [try Self.der(leaf), try Self.der(intermediate), try Self.der(root)]]
        return String(decoding: try JSONSerialization.data(withJSONObject: header, options: [.sortedKeys]), as: UTF8.self)
    }

    func verifier(bundleId: String = "com.example", appAppleId: Int64? = 41234, environment: AppStoreEnvironment = .sandbox) -> AppStoreSignedDataVerifier {
        AppStoreSignedDataVerifier(trustedRoots: [root], bundleId: bundleId, appAppleId: appAppleId, environment: environment)
    }
}

/// Apple's fixtures, from `Fixtures/` (copied from apple/app-store-server-library-swift; MIT,
/// LICENSE.txt beside them).
enum AppleFixtures {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Fixtures")

    static func signedData(_ name: String) throws -> String {
        try String(contentsOf: directory.appendingPathComponent("mock_signed_data/\(name)"), encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }

    static func model(_ name: String) throws -> [String: Any] {
        let data = try Data(contentsOf: directory.appendingPathComponent("models/\(name).json"))
        guard let object = try JSONSerialization.jsonObject(with: data) as? [String: Any] else { throw TestFailure("\(name) is not an object") }
        return object
    }

    static var testCA: Certificate {
        get throws { try Certificate(derEncoded: Array(Data(contentsOf: directory.appendingPathComponent("certs/testCA.der")))) }
    }
}
