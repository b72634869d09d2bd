import HTTPTypes
import Hummingbird
import NIOCore

/// `GET /dashboard` (docs/SERVER.md, "The dashboard"): a page that shows the books and an
/// account's timeline through the API, with a key the person gives, kept in the tab only. Three
/// static files compiled into the server (`DashboardAssets`): no build step, no third-party
/// script, nothing of the ledger's in them, so they need no key. A content security policy
/// lets the page run only its own script and talk only to this server.
extension LedgerRoutes {
    func addDashboardRoutes(to routes: RouteCollection<Context>) {
        routes.get("/dashboard") { _, _ in Self.asset(DashboardAssets.html, type: "text/html; charset=utf-8") }
        routes.get("/dashboard/dashboard.js") { _, _ in Self.asset(DashboardAssets.script, type: "text/javascript; charset=utf-8") }
        routes.get("/dashboard/dashboard.css") { _, _ in Self.asset(DashboardAssets.style, type: "text/css; charset=utf-8") }
    }

    static func asset(_ text: String, type: String) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = type
        headers[.cacheControl] = "no-store"
        headers[.contentSecurityPolicy] =
            "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'none'; "
            + "base-uri 'none'; form-action 'none'; frame-ancestors 'none'; require-trusted-types-for 'script'"
        headers[.xContentTypeOptions] = "nosniff"
        headers[HTTPField.Name("Referrer-Policy")!] = "no-referrer"
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: text)))
    }
}
