import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import Prometheus
import PurchaseLedger
@testable import PurchaseLedgerAppStore
@testable import PurchaseLedgerServer
import Testing
@testable import PurchaseLedgerLMDB
import LedgerTestSupport

/// The word game's products, and the App Store fixtures' subscription and a consumable.
let serverTestCatalog: Catalog = {
    try! Catalog(products: [
        .init(id: "com.example.tenhints", type: .consumable, grants: ["hints": 10]),
        .init(id: "com.example.hardwords", type: .nonConsumable),
        .init(id: "com.example.pro.month", type: .autoRenewable, group: "pro"),
        .init(id: "com.example.product", type: .autoRenewable, group: "55555"),
        .init(id: "com.example.product.2", type: .autoRenewable, group: "55555"),
        .init(id: "com.example.lifetime", type: .nonConsumable),
        .init(id: "com.example.coins", type: .consumable, grants: ["coins": 100]),
    ])
}()

/// API keys of the tests, one per kind of client.
enum TestKeys {
    static let writer = "writer-key-0123456789abcdef0123456789"
    static let revoker = "revoker-key-0123456789abcdef012345678"
    static let reader = "reader-key-0123456789abcdef0123456789"
    static let metrics = "metrics-key-0123456789abcdef012345678"
    static let backOffice = "backoffice-key-0123456789abcdef01234"
    static let feed = "feed-key-0123456789abcdef0123456789ab"
    static let forgetter = "forgetter-key-0123456789abcdef0123456"
    static let auditor = "auditor-key-0123456789abcdef012345678"
    static let accountant = "accountant-key-0123456789abcdef012345"

    static let configured: [ServerConfiguration.Key] = [
        .init(name: "writer", key: writer, scopes: [.eventsWrite, .accountsRead]),
        .init(name: "revoker", key: revoker, scopes: [.eventsWrite, .eventsRevoke, .accountsRead]),
        .init(name: "back office", key: backOffice, scopes: [.eventsWrite, .eventsStore, .accountsRead]),
        .init(name: "reader", key: reader, scopes: [.accountsRead]),
        .init(name: "metrics", key: metrics, scopes: [.metricsRead]),
        .init(name: "feed", key: feed, scopes: [.changesRead]),
        .init(name: "support", key: forgetter, scopes: [.accountsForget, .accountsRead]),
        .init(name: "auditor", key: auditor, scopes: [.proofsRead, .accountsRead]),
        .init(name: "accountant", key: accountant, scopes: [.booksRead]),
    ]
}

/// A ledger in a temporary directory, the routes over it in an application, and the test
/// client; the ledger is closed afterwards.
struct ServerHarness: Sendable {
    let ledger: Ledger
    let registry: PrometheusCollectorRegistry
    let directory: String

    static func run<R: Sendable>(
        _ setup: TestingSetup = .router,
        limits: ServerConfiguration.Limits = .init(),
        catalog: Catalog = serverTestCatalog,
        notifications: (@Sendable (Ledger, String) throws -> AppStoreNotificationHandler)? = nil,
        restores: RestorePolicy? = nil,
        _ body: @Sendable (ServerHarness, any TestClientProtocol) async throws -> R
    ) async throws -> R {
        try await withTemporaryDirectory { directory in
            let registry = PrometheusCollectorRegistry()
            let factory = LedgerServer.metricsFactory(registry: registry)
            var configuration = Ledger.Configuration()
            let metrics = LedgerMetrics(factory: factory)
            configuration.onCommit = { metrics.record($0) }
            configuration.logger.logLevel = .warning
            let ledger = try Ledger.open(at: directory + "/ledger", catalog: catalog, configuration: configuration)
            let harness = ServerHarness(ledger: ledger, registry: registry, directory: directory)
            do {
                let routes = LedgerRoutes<LedgerRequestContext>(
                    ledger: ledger, keys: APIKeys(TestKeys.configured), limits: limits,
                    notifications: try notifications?(ledger, directory), restores: restores,
                    metricsRegistry: registry, metricsFactory: factory, dashboard: true)
                let router = Router(context: LedgerRequestContext.self)
                router.addRoutes(routes.collection)
                var logger = Logger(label: "test")
                logger.logLevel = .error
                let app = Application(router: router, logger: logger)
                let result = try await app.test(setup) { client in try await body(harness, client) }
                await ledger.close()
                return result
            } catch {
                await ledger.close()
                throw error
            }
        }
    }
}

/// A response's essentials, read once.
struct Answer: Sendable {
    var status: HTTPResponse.Status
    var headers: HTTPFields
    var body: String

    /// The body as Foundation objects (dictionaries, arrays, NSNumber…).
    var json: Any {
        get throws { try JSONSerialization.jsonObject(with: Data(body.utf8), options: [.fragmentsAllowed]) }
    }

    var object: [String: Any] {
        get throws {
            guard let object = try json as? [String: Any] else { throw TestFailure("not a JSON object: \(body)") }
            return object
        }
    }

    var array: [[String: Any]] {
        get throws {
            guard let array = try json as? [[String: Any]] else { throw TestFailure("not a JSON array of objects: \(body)") }
            return array
        }
    }

    /// `error` of a JSON error body.
    var errorCode: String? { (try? object)?["error"] as? String }
}

extension TestClientProtocol {
    /// Sends a request and reads the whole answer.
    func send(
        _ method: HTTPRequest.Method, _ uri: String, key: String? = nil, contentType: String? = "application/json",
        body: String? = nil, headers extra: HTTPFields = [:]
    ) async throws -> Answer {
        var headers = extra
        if let key { headers[.authorization] = "Bearer \(key)" }
        if body != nil, let contentType { headers[.contentType] = contentType }
        return try await execute(uri: uri, method: method, headers: headers, body: body.map { ByteBuffer(string: $0) }) { response in
            Answer(status: response.status, headers: response.headers, body: String(buffer: response.body))
        }
    }

    /// Posts events as JSON Lines with the writer's key; the outcomes.
    func post(events lines: [String], key: String = TestKeys.writer) async throws -> [[String: Any]] {
        let answer = try await send(.post, "/v1/events", key: key, contentType: "application/x-ndjson", body: lines.joined(separator: "\n") + "\n")
        guard answer.status == .ok else { throw TestFailure("POST /v1/events answered \(answer.status): \(answer.body)") }
        return try answer.array
    }

    /// The account's projection as the API reports it.
    func account(_ account: String, asOf: String? = nil) async throws -> [String: Any] {
        let encoded = account.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        let answer = try await send(.get, "/v1/accounts/\(encoded)" + (asOf.map { "?asOf=\($0)" } ?? ""), key: TestKeys.reader)
        guard answer.status == .ok else { throw TestFailure("GET account answered \(answer.status): \(answer.body)") }
        return try answer.object
    }
}

/// JSON lines of the word game's events, built with the library so that they are exactly what
/// the format says.
enum Lines {
    static let at = "2026-03-14T08:00:00Z"

    static func added(_ id: String, _ account: String, payment: String, product: String) -> String {
        #"{"id":"\#(id)","type":"paymentAdded","account":"\#(account)","at":"\#(at)","payment":"\#(payment)","product":"\#(product)"}"#
    }

    static func purchased(
        _ id: String, _ account: String, payment: String, transaction: String, product: String? = nil, expiresAt: String? = nil,
        original: String? = nil
    ) -> String {
        var line = #"{"id":"\#(id)","type":"transactionUpdated","account":"\#(account)","at":"\#(at)","payment":"\#(payment)","state":"purchased","transaction":"\#(transaction)""#
        if let original { line += #","originalTransaction":"\#(original)""# }
        if let product { line += #","product":"\#(product)""# }
        if let expiresAt { line += #","expiresAt":"\#(expiresAt)""# }
        return line + "}"
    }

    static func finished(_ id: String, _ account: String, payment: String) -> String {
        #"{"id":"\#(id)","type":"transactionFinished","account":"\#(account)","at":"\#(at)","payment":"\#(payment)"}"#
    }

    static func consumed(_ id: String, _ account: String, item: String, amount: Int) -> String {
        #"{"id":"\#(id)","type":"consumed","account":"\#(account)","at":"\#(at)","item":"\#(item)","amount":\#(amount)}"#
    }

    static func revoked(_ id: String, _ account: String, transaction: String) -> String {
        #"{"id":"\#(id)","type":"revoked","account":"\#(account)","at":"\#(at)","transaction":"\#(transaction)"}"#
    }
}

/// A client of a server on a loopback port whose every request may take `timeout` (two minutes
/// by default): HummingbirdTesting's live client gives each 20 s, which one request of
/// `ForgetWhileServingTests` passed once in a CI run, on two cores loaded by the rest of the
/// suite. A connection a request.
struct PatientClient: Sendable {
    let port: Int
    var timeout = Duration.seconds(120)

    func send(
        _ method: HTTPRequest.Method, _ uri: String, key: String? = nil, contentType: String? = "application/json", body: String? = nil
    ) async throws -> Answer {
        let client = TestClient(host: "127.0.0.1", port: port, configuration: .init(timeout: timeout))
        client.connect()
        defer { Task { try? await client.shutdown() } }
        var headers = HTTPFields()
        if let key { headers[.authorization] = "Bearer \(key)" }
        if body != nil, let contentType { headers[.contentType] = contentType }
        let response = try await client.execute(.init(uri, method: method, authority: "localhost", headers: headers, body: body.map { ByteBuffer(string: $0) }))
        return Answer(status: response.status, headers: response.headers, body: response.body.map { String(buffer: $0) } ?? "")
    }

    /// Posts events as JSON Lines; the outcomes.
    func post(events lines: [String], key: String = TestKeys.writer) async throws -> [[String: Any]] {
        let answer = try await send(.post, "/v1/events", key: key, contentType: "application/x-ndjson", body: lines.joined(separator: "\n") + "\n")
        guard answer.status == .ok else { throw TestFailure("POST /v1/events answered \(answer.status): \(answer.body)") }
        return try answer.array
    }
}
