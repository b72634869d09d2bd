/// Why a signed App Store payload was refused. The codes are the names Apple's App Store Server
/// Library gives the same failures, so that logs and answers read the same in both.
public struct AppStoreVerificationError: Error, Sendable, Hashable, CustomStringConvertible {
    public struct Code: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        private enum Base: String {
            case invalidJWTFormat = "INVALID_JWT_FORMAT"
            case invalidCertificate = "INVALID_CERTIFICATE"
            case verificationFailure = "VERIFICATION_FAILURE"
            case invalidAppIdentifier = "INVALID_APP_IDENTIFIER"
            case invalidEnvironment = "INVALID_ENVIRONMENT"
        }

        private let base: Base
        private init(_ base: Base) { self.base = base }

        public init?(rawValue: String) {
            guard let base = Base(rawValue: rawValue) else { return nil }
            self.base = base
        }

        public var rawValue: String { base.rawValue }
        public var description: String { base.rawValue }

        /// Not a compact JWS (three base64url parts), a header or payload that is not the JSON
        /// expected, an algorithm other than ES256, no three-certificate `x5c` header, or a
        /// certificate there that is not DER.
        public static let invalidJWTFormat = Code(.invalidJWTFormat)
        /// A certificate of `x5c` that is not base64.
        public static let invalidCertificate = Code(.invalidCertificate)
        /// The chain does not end in a trusted root, lacks Apple's OIDs, was not valid at the
        /// signing date, or the signature does not match the leaf's key.
        public static let verificationFailure = Code(.verificationFailure)
        /// The payload is for another app (bundle id, or App Apple ID in production).
        public static let invalidAppIdentifier = Code(.invalidAppIdentifier)
        /// The payload is for another environment (Sandbox sent to a Production server, say).
        public static let invalidEnvironment = Code(.invalidEnvironment)

        /// What a client is told: fixed text, never anything of the request or of a library.
        public var publicMessage: String {
            switch base {
            case .invalidJWTFormat: "the signed payload is not a well-formed App Store JWS"
            case .invalidCertificate: "the signed payload's certificates cannot be read"
            case .verificationFailure: "the signed payload does not verify against the trusted App Store roots"
            case .invalidAppIdentifier: "the signed payload is for another app"
            case .invalidEnvironment: "the signed payload is for another environment"
            }
        }
    }

    public var code: Code
    /// What failed, for the server's log; it may quote values of the payload.
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code): \(message)" }
}

/// A `DecodingError` said in the payload's own terms (the field and what was wrong with it),
/// without the library's text.
enum DecodingFailure {
    static func summary(_ error: any Error) -> String {
        guard let error = error as? DecodingError else { return "not JSON" }
        switch error {
        case .keyNotFound(let key, let context): return "missing \(path(context.codingPath + [key]))"
        case .typeMismatch(_, let context): return "\(path(context.codingPath)) has the wrong type"
        case .valueNotFound(_, let context): return "\(path(context.codingPath)) is null"
        case .dataCorrupted(let context): return context.codingPath.isEmpty ? "not JSON" : "\(path(context.codingPath)) is out of range"
        @unknown default: return "not the JSON expected"
        }
    }

    /// `data.status`: the keys are the payload types' own coding keys, never input.
    private static func path(_ keys: [any CodingKey]) -> String {
        keys.isEmpty ? "the payload" : keys.map { $0.intValue.map(String.init) ?? $0.stringValue }.joined(separator: ".")
    }
}
