/// Why a call to the App Store Server API failed: a code to switch on, Apple's own error code
/// and message when its answer carried them, and the HTTP status.
public struct AppStoreServerAPIError: Error, Sendable, Hashable, CustomStringConvertible {
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        fileprivate enum Base: String, Sendable, Hashable {
            case invalidKey, unauthorized, notFound, badRequest, rateLimited, serverError, transport, invalidResponse
        }

        fileprivate let base: Base

        /// The in-app purchase key could not be read (not a PKCS#8 P-256 key in PEM).
        public static let invalidKey = Code(base: .invalidKey)
        /// 401: Apple refused the token (wrong key, key id, issuer, bundle, or an expired token).
        public static let unauthorized = Code(base: .unauthorized)
        /// 404: no such transaction (or app) in this environment.
        public static let notFound = Code(base: .notFound)
        /// Another 4xx: the request was wrong.
        public static let badRequest = Code(base: .badRequest)
        /// 429, still after the retries.
        public static let rateLimited = Code(base: .rateLimited)
        /// 5xx, still after the retries.
        public static let serverError = Code(base: .serverError)
        /// No answer: connection refused, timed out, TLS failed.
        public static let transport = Code(base: .transport)
        /// An answer that is not what Apple documents.
        public static let invalidResponse = Code(base: .invalidResponse)

        public var description: String { base.rawValue }
    }

    public var code: Code
    /// The HTTP status, when there was an answer.
    public var status: Int?
    /// Apple's `errorCode` (for example 4040010, transaction id not found).
    public var apiErrorCode: Int64?
    public var message: String

    public init(_ code: Code, status: Int? = nil, apiErrorCode: Int64? = nil, _ message: String) {
        self.code = code
        self.status = status
        self.apiErrorCode = apiErrorCode
        self.message = message
    }

    public var description: String {
        var text = "\(code)"
        if let status { text += " (HTTP \(status)" + (apiErrorCode.map { ", Apple error \($0)" } ?? "") + ")" }
        return text + ": " + message
    }
}
