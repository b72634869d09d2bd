import Hummingbird
import Logging

/// Logs every request (at `level`) by its method and the shape of its path: an account in the
/// path is `{account}`, and the query is left out (a cursor in it names an account in
/// base64url). A customer's id never reaches the log from a request, so that after a forget
/// no line the server writes holds it, whatever a client asks about (docs/SERVER.md).
struct RequestLogMiddleware<Context: RequestContext>: RouterMiddleware {
    let level: Logger.Level

    init(_ level: Logger.Level) {
        self.level = level
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        context.logger.log(level: level, "Request", metadata: [
            "hb.request.method": "\(request.method)", "hb.request.path": "\(Self.shape(of: request.uri.path))",
        ])
        return try await next(request, context)
    }

    /// `path` with the segment after `/v1/accounts/` (an account, percent-encoded) replaced.
    static func shape(of path: String) -> String {
        let prefix = "/v1/accounts/"
        guard path.hasPrefix(prefix) else { return path }
        let rest = path.dropFirst(prefix.count)
        let tail = rest.firstIndex(of: "/").map { rest[$0...] } ?? ""
        return prefix + "{account}" + tail
    }
}
