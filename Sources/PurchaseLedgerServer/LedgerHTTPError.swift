import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import PurchaseLedger
import PurchaseLedgerAppStore

/// An error answered to the client as JSON: `{"error": "<code>", "message": "<what to fix>"}`.
///
/// `error` is one of the interchange format's codes (`invalidEvent` for a body that is not
/// events) or, for what the format does not cover, one of `unauthorized`, `forbidden`,
/// `payloadTooLarge`, `badRequest`, `notFound`, `unavailable`, `busy`, `internal`, or an App Store
/// verification code (`INVALID_JWT_FORMAT`, `INVALID_CERTIFICATE`, `VERIFICATION_FAILURE`,
/// `INVALID_APP_IDENTIFIER`, `INVALID_ENVIRONMENT`, Apple's own names).
public struct LedgerHTTPError: HTTPResponseError, CustomStringConvertible, Sendable {
    public var status: HTTPResponse.Status
    public var code: String
    public var message: String

    public init(status: HTTPResponse.Status, code: String, message: String) {
        self.status = status
        self.code = code
        self.message = message
    }

    /// Seconds after which a retry may succeed (`Retry-After`), for `busy`.
    public var retryAfterSeconds: Int?

    public var description: String { "\(status.code) \(code): \(message)" }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        if status == .unauthorized { headers[.wwwAuthenticate] = "Bearer" }
        if let retryAfterSeconds { headers[.retryAfter] = String(retryAfterSeconds) }
        var writer = "{\"error\": "
        writer += JSONString.quoted(code)
        writer += ", \"message\": "
        writer += JSONString.quoted(message)
        writer += "}\n"
        return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: writer)))
    }

    static func unauthorized(_ message: String) -> LedgerHTTPError {
        LedgerHTTPError(status: .unauthorized, code: "unauthorized", message: message)
    }

    static func forbidden(_ message: String) -> LedgerHTTPError {
        LedgerHTTPError(status: .forbidden, code: "forbidden", message: message)
    }

    static func tooLarge(_ message: String) -> LedgerHTTPError {
        LedgerHTTPError(status: .contentTooLarge, code: "payloadTooLarge", message: message)
    }

    static func badRequest(_ message: String) -> LedgerHTTPError {
        LedgerHTTPError(status: .badRequest, code: "badRequest", message: message)
    }

    /// A body that is not events: the spec's `invalidEvent`.
    static func invalidEvent(_ message: String) -> LedgerHTTPError {
        LedgerHTTPError(status: .badRequest, code: LedgerError.Code.invalidEvent.rawValue, message: message)
    }

    static func unavailable(_ message: String) -> LedgerHTTPError {
        LedgerHTTPError(status: .serviceUnavailable, code: "unavailable", message: message)
    }

    /// Every slot of the expensive reads is taken, or the key's share (`ExpensiveReads`): 503,
    /// retry in a second.
    static func busy(_ what: String) -> LedgerHTTPError {
        var error = LedgerHTTPError(status: .serviceUnavailable, code: "busy",
            message: "\(what) is an expensive read, and the server runs a few at once, fewer for one key (limits.expensiveReads); retry after a second")
        error.retryAfterSeconds = 1
        return error
    }

    /// Every slot of the held reads is taken, the server's or the key's (`HeldReads`): 503,
    /// retry in a second.
    static func heldReadsTaken() -> LedgerHTTPError {
        var error = LedgerHTTPError(status: .serviceUnavailable, code: "busy",
            message: "the server holds as many streams and long polls as it takes (limits.heldReads, limits.heldReadsPerKey); retry after a second")
        error.retryAfterSeconds = 1
        return error
    }

    static func `internal`(_ message: String) -> LedgerHTTPError {
        LedgerHTTPError(status: .internalServerError, code: "internal", message: message)
    }
}
