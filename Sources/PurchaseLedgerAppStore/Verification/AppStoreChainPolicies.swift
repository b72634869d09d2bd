import SwiftASN1
import X509

// What Apple's library demands of an `x5c` chain beyond RFC 5280 path building. Its Python
// verifier hands the chain to OpenSSL with `X509_V_FLAG_X509_STRICT` set, at a time in whole
// seconds; these policies say the same things in swift-certificates' terms, so that the server
// accepts exactly the chains Apple accepts.

/// Apple's markers: the receipt-signing OID on the leaf, the WWDR OID on the intermediate, and
/// exactly leaf → intermediate → root.
struct AppStoreOIDPolicy: VerifierPolicy {
    static let leafOID: ASN1ObjectIdentifier = [1, 2, 840, 113635, 100, 6, 11, 1]
    static let intermediateOID: ASN1ObjectIdentifier = [1, 2, 840, 113635, 100, 6, 2, 1]

    let verifyingCriticalExtensions: [ASN1ObjectIdentifier] = []

    func chainMeetsPolicyRequirements(chain: UnverifiedCertificateChain) async -> PolicyEvaluationResult {
        guard chain.count == 3 else {
            return .failsToMeetPolicy(reason: "the chain has \(chain.count) certificates, not 3")
        }
        guard chain[1].extensions.contains(where: { $0.oid == Self.intermediateOID }) else {
            return .failsToMeetPolicy(reason: "the intermediate certificate lacks Apple's WWDR OID")
        }
        guard chain[0].extensions.contains(where: { $0.oid == Self.leafOID }) else {
            return .failsToMeetPolicy(reason: "the leaf certificate lacks Apple's receipt-signing OID")
        }
        return .meetsPolicy
    }
}

/// Every certificate of the chain is valid at `time`, a whole second: `notBefore ≤ time ≤
/// notAfter`, as Apple's verifier counts it (so a `signedDate` up to 999 ms past a `notAfter`
/// is still inside it, and one 1 ms before a `notBefore` is not).
///
/// Used instead of RFC5280Policy's own expiry check, which takes a `Date` and builds a
/// `GeneralizedTime` from it that traps past year 9999.
struct ValidAtSigningTimePolicy: VerifierPolicy {
    let verifyingCriticalExtensions: [ASN1ObjectIdentifier] = []
    let time: AppStoreSigningTime

    func chainMeetsPolicyRequirements(chain: UnverifiedCertificateChain) async -> PolicyEvaluationResult {
        let instant = time.date
        for certificate in chain {
            guard certificate.notValidBefore <= instant else {
                return .failsToMeetPolicy(reason: "a certificate is not yet valid at the signing time")
            }
            guard instant <= certificate.notValidAfter else {
                return .failsToMeetPolicy(reason: "a certificate has expired at the signing time")
            }
        }
        return .meetsPolicy
    }
}

/// OpenSSL's `X509_V_FLAG_X509_STRICT` checks of each certificate (RFC 5280 §4.1–4.2, as
/// `check_extensions` in OpenSSL's x509_vfy.c applies them), the root included:
///
/// - a path length only on a CA whose key usage allows keyCertSign;
/// - a CA has keyUsage and a subject key identifier (its basicConstraints may be non-critical:
///   the OpenSSL Apple's library runs on today, 4.0, accepts that, and so does this policy;
///   `AppleVerifierParityTests` has the case for the root and the intermediate);
///   an issuer's key usage allows keyCertSign (`X509_check_ca`);
/// - a non-CA does not claim keyCertSign;
/// - issuer and subject names are not empty (a subject may be, with a critical, non-empty SAN);
/// - key identifiers are not critical; every certificate but the root has an authority key
///   identifier with a key id, and it names its issuer's subject key identifier;
/// - only version 3 certificates carry extensions.
///
/// It also takes the critical extensions OpenSSL handles and swift-certificates' policies do
/// not claim (extended key usage, certificate policies, subject alternative names), which
/// OpenSSL accepts critical.
struct StrictX509Policy: VerifierPolicy {
    let verifyingCriticalExtensions: [ASN1ObjectIdentifier] = [
        .X509ExtensionID.extendedKeyUsage, .X509ExtensionID.subjectAlternativeName, [2, 5, 29, 32],
    ]

    func chainMeetsPolicyRequirements(chain: UnverifiedCertificateChain) async -> PolicyEvaluationResult {
        for (index, certificate) in chain.enumerated() {
            if let reason = Self.violation(of: certificate, isLast: index == chain.count - 1, isIssuer: index > 0) {
                return .failsToMeetPolicy(reason: "certificate \(index) of the chain: \(reason)")
            }
            if index + 1 < chain.count, let reason = Self.keyIdentifierMismatch(certificate, issuer: chain[index + 1]) {
                return .failsToMeetPolicy(reason: "certificate \(index) of the chain: \(reason)")
            }
        }
        return .meetsPolicy
    }

    /// OpenSSL's `X509_check_akid`: when both are there, the authority key identifier's key id
    /// is the issuer's subject key identifier.
    static func keyIdentifierMismatch(_ certificate: Certificate, issuer: Certificate) -> String? {
        guard let authority = try? certificate.extensions.authorityKeyIdentifier?.keyIdentifier,
              let subject = try? issuer.extensions.subjectKeyIdentifier?.keyIdentifier
        else { return nil }
        return authority == subject ? nil : "its authority key identifier is not its issuer's subject key identifier"
    }

    static func violation(of certificate: Certificate, isLast: Bool, isIssuer: Bool = false) -> String? {
        let extensions = certificate.extensions
        guard certificate.version == .v3 else {
            return extensions.isEmpty ? nil : "extensions need version 3"
        }
        let basicConstraints: BasicConstraints?
        let keyUsage: KeyUsage?
        let subjectKeyIdentifier: SubjectKeyIdentifier?
        let authorityKeyIdentifier: AuthorityKeyIdentifier?
        let alternativeNames: SubjectAlternativeNames?
        do {
            basicConstraints = try extensions.basicConstraints
            keyUsage = try extensions.keyUsage
            subjectKeyIdentifier = try extensions.subjectKeyIdentifier
            authorityKeyIdentifier = try extensions.authorityKeyIdentifier
            alternativeNames = try extensions.subjectAlternativeNames
        } catch {
            return "an extension is malformed"
        }
        var isAuthority = false
        var pathLength: Int?
        if case .isCertificateAuthority(let maximum) = basicConstraints {
            isAuthority = true
            pathLength = maximum
        }
        let signsCertificates = keyUsage?.keyCertSign ?? false
        if pathLength != nil, !isAuthority || !signsCertificates {
            return "a path length without being a CA that signs certificates"
        }
        if isAuthority {
            if keyUsage == nil { return "a CA without keyUsage" }
            if subjectKeyIdentifier == nil { return "a CA without a subject key identifier" }
            if isIssuer, !signsCertificates { return "an issuer whose key usage does not allow keyCertSign" }
        } else if signsCertificates {
            return "keyCertSign without being a CA"
        }
        if certificate.issuer.isEmpty { return "an empty issuer name" }
        if certificate.subject.isEmpty {
            if isAuthority || keyUsage?.cRLSign == true || alternativeNames == nil { return "an empty subject name" }
            if extensions[oid: .X509ExtensionID.subjectAlternativeName]?.critical != true {
                return "an empty subject with a non-critical subjectAltName"
            }
        }
        if let alternativeNames, alternativeNames.isEmpty { return "an empty subjectAltName" }
        if extensions[oid: .X509ExtensionID.authorityKeyIdentifier]?.critical == true { return "a critical authority key identifier" }
        if extensions[oid: .X509ExtensionID.subjectKeyIdentifier]?.critical == true { return "a critical subject key identifier" }
        if !isLast, authorityKeyIdentifier?.keyIdentifier == nil { return "no authority key identifier" }
        return nil
    }
}
