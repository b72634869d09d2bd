import Hummingbird
import PurchaseLedger

/// `GET /v1/books` (docs/SERVER.md, "The books"), scope `books:read`: the figures of `ledger
/// books` (docs/FORMAT.md, "The books") from the query's `from`, `to`, `by`, `at`, `position`
/// or `knownAt`, and `environment` (repeatable; Production by default). An expensive read (it
/// visits every account), in a slot of `ExpensiveReads` on the idle class's threads, stopped
/// between accounts when the client leaves. The answer names no customer.
extension LedgerRoutes {
    func addBooksRoutes(to routes: RouteCollection<Context>) {
        routes.get("/v1/books") { request, context in try await books(request, context: context) }
    }

    func books(_ request: Request, context: Context) async throws -> Response {
        try context.require(.booksRead)
        // One value each (`RepeatedQueryParameterMiddleware`).
        let parameters = request.uri.queryParameters
        func time(_ name: String) throws -> Timestamp? {
            guard let text = parameters[Substring(name)] else { return nil }
            guard let time = Timestamp(rfc3339: text), time.isRepresentable else {
                throw LedgerHTTPError.badRequest("\(name) must be an RFC 3339 time such as 2026-01-31T00:00:00Z, not \"\(text)\"")
            }
            return time
        }
        var granularity: BooksQuery.Granularity?
        if let text = parameters["by"] {
            guard let unit = BooksQuery.Granularity(rawValue: String(text)) else {
                throw LedgerHTTPError.badRequest("by must be day, week or month, not \"\(text)\"")
            }
            granularity = unit
        }
        let environments: Set<StoreEnvironment>
        do {
            environments = try StoreEnvironment.named(parameters.getAll("environment"))
        } catch {
            throw LedgerHTTPError.badRequest(error.description)
        }
        let query: BooksQuery
        do {
            query = try BooksQuery(
                from: try time("from"), to: try time("to"), by: granularity, at: try time("at") ?? .now(),
                environments: environments.isEmpty ? [.production] : environments)
        } catch let invalid as BooksQuery.Invalid {
            throw LedgerHTTPError.badRequest(invalid.message)
        }
        let knownAt = try time("knownAt")
        let position: UInt64? = parameters["position"] == nil ? nil : try integerParameter(request, "position", default: 0, range: 0...ledger.position)
        guard position == nil || knownAt == nil else { throw LedgerHTTPError.badRequest("give position or knownAt, not both") }
        guard let slot = reads.tryAcquire(key: context.keyName) else { throw LedgerHTTPError.busy("the books") }
        let ledger = self.ledger
        do {
            let books = try await ExpensiveReads.run(in: slot, until: context.clientLeft) {
                try ledger.books(query, atPosition: try knownAt.map { try ledger.position(knownAt: $0) } ?? position)
            }
            return .json(books.json + "\n")
        } catch {
            throw Self.httpError(storage: error, logger: context.logger)
        }
    }
}
