import Hummingbird

/// Refuses a query that names a parameter twice, unless the parameter is a list
/// (`environment`): the routes read one value of each, and a client that sends two should
/// learn which was not read instead of guessing (400 `badRequest`, nothing done).
struct RepeatedQueryParameterMiddleware<Context: RequestContext>: RouterMiddleware {
    /// The parameters whose every value is read.
    static var lists: Set<Substring> { ["environment"] }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var seen: Set<Substring> = []
        // An empty piece (`a=1&&b=2`) names nothing.
        for (name, _) in request.uri.queryParameters where !name.isEmpty && !Self.lists.contains(name) {
            guard seen.insert(name).inserted else {
                // The name is not echoed: a client's text stays out of answers the server keeps.
                throw LedgerHTTPError.badRequest("the query names a parameter more than once; only environment may repeat")
            }
        }
        return try await next(request, context)
    }
}
