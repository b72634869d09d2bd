import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import PurchaseLedger
@testable import PurchaseLedgerServer
import Testing

/// `GET /v1/books` (docs/SERVER.md, "The books"): the library's figures for the query's
/// options, to `books:read` only; a malformed query is 400 and reads nothing.
struct BooksRouteTests {
    static func sale(_ id: String, _ transaction: String, purchased: String, price: Int, revoked: String? = nil) -> String {
        let refund = revoked.map { #","revokedAt":"\#($0)T00:00:00Z","revocationType":"REFUND_FULL""# } ?? ""
        return #"{"id":"\#(id)","type":"storeTransaction","account":"ana","at":"\#(revoked ?? purchased)T00:00:00Z","transaction":"\#(transaction)","product":"com.example.lifetime","purchasedAt":"\#(purchased)T00:00:00Z","price":\#(price),"currency":"USD"\#(refund)}"#
    }

    @Test func theBooksAnswerWhatTheLibraryComputesToTheirScopeOnly() async throws {
        try await ServerHarness.run { harness, client in
            _ = try await client.post(events: [
                Self.sale("b1", "1", purchased: "2026-01-10", price: 5000),
                Self.sale("b2", "2", purchased: "2026-02-10", price: 3000),
                Self.sale("b3", "1", purchased: "2026-01-10", price: 5000, revoked: "2026-02-20"),
            ], key: TestKeys.backOffice)
            let range = "from=2026-01-01T00:00:00Z&to=2026-03-01T00:00:00Z&by=month&at=2026-02-01T00:00:00Z"
            #expect(try await client.send(.get, "/v1/books?\(range)").status == .unauthorized)
            #expect(try await client.send(.get, "/v1/books?\(range)", key: TestKeys.reader).status == .forbidden)

            let answer = try await client.send(.get, "/v1/books?\(range)", key: TestKeys.accountant)
            #expect(answer.status == .ok)
            let query = try BooksQuery(
                from: Timestamp(rfc3339: "2026-01-01T00:00:00Z"), to: Timestamp(rfc3339: "2026-03-01T00:00:00Z"), by: .month,
                at: try #require(Timestamp(rfc3339: "2026-02-01T00:00:00Z")))
            #expect(answer.body == (try harness.ledger.books(query)).json + "\n")
            let months = try answer.object["periods"] as? [[String: Any]]
            let usd = months?.compactMap { ($0["byCurrency"] as? [String: Any])?["USD"] as? [String: Int] }
            #expect(usd == [
                ["sales": 5000, "refunds": 0, "net": 5000, "proceeds": 3500, "recognised": 5000],
                ["sales": 3000, "refunds": 5000, "net": -2000, "proceeds": -1400, "recognised": -2000],
            ])
            // As known after the first two events: no refund yet.
            let then = try await client.send(.get, "/v1/books?\(range)&position=2", key: TestKeys.accountant)
            #expect(try then.object["position"] as? Int == 2)
            #expect(then.body.contains(#""refunds":0,"net":3000"#))
            // Known by the year 2000: nothing.
            let early = try await client.send(.get, "/v1/books?knownAt=2000-01-01T00:00:00Z", key: TestKeys.accountant)
            #expect(try early.object["position"] as? Int == 0)
            // The sandbox alone: none of it.
            let sandbox = try await client.send(.get, "/v1/books?\(range)&environment=Sandbox", key: TestKeys.accountant)
            #expect(sandbox.body.contains(#""environments":["Sandbox"]"#) && !sandbox.body.contains("USD"))

            #expect(answer.headers[.cacheControl] == "no-store")
            for bad in [
                "from=2026-01-01T00:00:00Z", "from=x&to=2026-01-01T00:00:00Z", "\(range)&by=year", "by=day", "environment=Moon",
                "position=99", "position=-1", "position=1&knownAt=2026-01-01T00:00:00Z", "at=2026-13-01T00:00:00Z",
                "from=2000-01-01T00:00:00Z&to=2040-01-01T00:00:00Z&by=day",
            ] {
                let refused = try await client.send(.get, "/v1/books?\(bad)", key: TestKeys.accountant)
                #expect(refused.status == .badRequest && refused.errorCode == "badRequest", "\(bad): \(refused.body)")
            }
        }
    }

    /// The dashboard's files need no key (they hold no data), and come with a policy that lets
    /// the page run only its own script, talk only to this server, and never be framed.
    @Test func theDashboardsFilesAreServedWithoutAKeyUnderAStrictPolicy() async throws {
        try await ServerHarness.run { _, client in
            for (path, type) in [("/dashboard", "text/html"), ("/dashboard/dashboard.js", "text/javascript"), ("/dashboard/dashboard.css", "text/css")] {
                let answer = try await client.send(.get, path)
                #expect(answer.status == .ok, "\(path)")
                #expect(answer.headers[.contentType]?.hasPrefix(type) == true, "\(path)")
                let policy = answer.headers[.contentSecurityPolicy] ?? ""
                for directive in ["default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"] {
                    #expect(policy.contains(directive), "\(path): \(policy)")
                }
                #expect(answer.headers[.xContentTypeOptions] == "nosniff")
            }
            // The page sets no markup from answers: the script never writes innerHTML.
            #expect(!DashboardAssets.script.contains("innerHTML") && !DashboardAssets.script.contains("insertAdjacentHTML"))
        }
    }
}
