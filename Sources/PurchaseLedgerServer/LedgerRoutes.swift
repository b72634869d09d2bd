import Foundation
import HTTPTypes
import Hummingbird
import Logging
import CoreMetrics
import NIOCore
import Prometheus
import PurchaseLedger
import PurchaseLedgerAppStore
import ServiceLifecycle

/// The ledger's HTTP API as a route collection, to mount in any Hummingbird 2 application whose
/// context conforms to `LedgerRequestContextProtocol`:
///
/// ```swift
/// let routes = LedgerRoutes<LedgerRequestContext>(ledger: ledger, keys: APIKeys(configuration.keys))
/// router.addRoutes(routes.collection)
/// ```
///
/// | route | scope |
/// |---|---|
/// | `POST /v1/events` | `events:write` (and `events:revoke` for `revoked` events, `events:store` for the store's) |
/// | `GET /v1/accounts/{account}` | `accounts:read` |
/// | `GET /v1/accounts/{account}/history` | `accounts:read` |
/// | `GET /v1/changes`, `GET /v1/changes/stream` | `changes:read` (when a feed hub is given) |
/// | `GET /v1/checkpoint`, `GET /v1/checkpoints`, `GET /v1/proofs/inclusion`, `GET /v1/proofs/consistency` | `proofs:read` |
/// | `GET /v1/books` | `books:read` |
/// | `GET /dashboard` (and its script and style) | none: the page holds no data; it asks for a key (when `dashboard`) |
/// | `GET /v1/health` | none |
/// | `GET /metrics` | `metrics:read` (when a registry is given) |
/// | `POST /v1/appstore/notifications` | none: the payload is signed by Apple (when configured) |
/// | `POST /v1/transactions` | `events:write` (when notifications are configured: it verifies alike) |
public struct LedgerRoutes<Context: LedgerRequestContextProtocol>: Sendable {
    public let ledger: Ledger
    public let keys: APIKeys
    public let limits: ServerConfiguration.Limits
    public let notifications: AppStoreNotificationHandler?
    /// What a restore of a purchase another account owns does (`POST /v1/transactions`, and
    /// StoreKit 1 restores on `POST /v1/events`); nil: the defaults (`RestoresAcrossAccounts`).
    public let restores: RestorePolicy?
    public let metricsRegistry: PrometheusCollectorRegistry?
    /// The change feed's readers are served from it; without one the routes are not mounted.
    public let changeFeed: ChangeFeedHub?
    /// Whether `GET /dashboard` is mounted (`ledger-server` mounts it).
    public let dashboard: Bool
    /// The slots of the expensive reads (a timeline, the books here; the hubs' catch-ups), shared with the hub.
    let reads: ExpensiveReads
    /// The streams and long polls held at once (`limits.heldReads`, `limits.heldReadsPerKey`).
    let held: HeldReads
    private let requestMetrics: RequestMetrics
    /// Refused notifications are logged at a bounded rate: anyone can send them.
    private let refusals = RefusalLog()

    /// - Parameters:
    ///   - ledger: the ledger the routes append to and read.
    ///   - keys: the API keys and the scopes each grants.
    ///   - limits: the bounds on requests (body size, events per request).
    ///   - notifications: the App Store's notifications; without a handler the route is not mounted.
    ///   - restores: what a restore of a purchase another account owns does.
    ///   - metricsRegistry: what `GET /metrics` renders; without one the route is not mounted.
    ///   - changeFeed: what `GET /v1/changes` reads; without one those routes are not mounted.
    ///   - metricsFactory: where the server's own counters go (the ledger's go where its
    ///     configuration says); nil means `MetricsSystem.factory`.
    ///   - dashboard: whether to mount `GET /dashboard`, a page for people (docs/SERVER.md).
    public init(
        ledger: Ledger, keys: APIKeys, limits: ServerConfiguration.Limits = .init(),
        notifications: AppStoreNotificationHandler? = nil, restores: RestorePolicy? = nil,
        metricsRegistry: PrometheusCollectorRegistry? = nil, changeFeed: ChangeFeedHub? = nil,
        metricsFactory: (any MetricsFactory)? = nil, dashboard: Bool = false
    ) {
        self.changeFeed = changeFeed
        self.dashboard = dashboard
        reads = changeFeed?.reads ?? ExpensiveReads(limit: limits.expensiveReads)
        held = HeldReads(limit: limits.heldReadsLimit, limitPerKey: limits.heldReadsPerKey)
        self.ledger = ledger
        self.keys = keys
        self.limits = limits
        self.notifications = notifications
        self.restores = restores
        self.metricsRegistry = metricsRegistry
        self.requestMetrics = RequestMetrics(factory: metricsFactory ?? MetricsSystem.factory)
    }

    /// The routes, behind the API-key middleware.
    public var collection: RouteCollection<Context> {
        let routes = RouteCollection(context: Context.self)
        routes.add(middleware: APIKeyMiddleware<Context>(keys: keys))
        routes.add(middleware: RepeatedQueryParameterMiddleware<Context>())
        routes.get("/v1/health") { _, _ in try health() }
        routes.post("/v1/events") { request, context in try await postEvents(request, context: context) }
        routes.get("/v1/accounts/:account") { request, context in try await account(request, context: context) }
        routes.get("/v1/accounts/:account/history") { request, context in try history(request, context: context) }
        routes.delete("/v1/accounts/:account") { request, context in try await forget(request, context: context) }
        if metricsRegistry != nil {
            routes.get("/metrics") { _, context in try metrics(context: context) }
        }
        addProofRoutes(to: routes)
        addBooksRoutes(to: routes)
        if dashboard { addDashboardRoutes(to: routes) }
        if let changeFeed {
            routes.get("/v1/changes") { request, context in try await changes(request, context: context, hub: changeFeed) }
            routes.get("/v1/changes/stream") { request, context in try await changeStream(request, context: context, hub: changeFeed) }
        }
        if let notifications {
            routes.post("/v1/appstore/notifications") { request, context in try await appStoreNotification(request, context: context) }
            let transactions = SignedTransactionHandler(verifier: notifications.verifier, ledger: ledger, restores: restores ?? .keep)
            routes.post("/v1/transactions") { request, context in
                try await signedTransaction(request, context: context, handler: transactions)
            }
        }
        return routes
    }

    // MARK: Routes

    func health() throws -> Response {
        .json("{\"status\": \"ok\", \"position\": \(ledger.position)}\n")
    }

    func postEvents(_ request: Request, context: Context) async throws -> Response {
        try context.require(.eventsWrite)
        let body = try await collectBody(request)
        let decoded = try EventBodyDecoder.decode(body, contentType: request.headers[.contentType], limit: limits.eventsPerRequest)
        guard !decoded.isEmpty else { throw LedgerHTTPError.invalidEvent("the body holds no events") }
        for (types, scope) in Scope.beyondWriting where decoded.contains(where: { (try? types.contains($0.get().type)) == true }) {
            guard context.identity?.scopes.contains(scope) == true else {
                let names = types.map(\.rawValue).sorted().joined(separator: " and ")
                throw LedgerHTTPError.forbidden("\(names) events need the scope \(scope.rawValue); nothing of this request was appended")
            }
        }
        // The ids the server and the tools make are theirs (`OwnEventIDs`), and so are the App
        // Store's entries and the pseudonyms: a client's event may take none, whatever its
        // key's scopes.
        let admitted = decoded.map { line -> Result<Event, LedgerError> in
            guard case .success(let event) = line, let refusal = OwnEventIDs.clientRefusal(of: event) else { return line }
            return .failure(refusal)
        }
        let restores = RestoresAcrossAccounts(
            ledger: ledger, policy: restores, mayMovePurchases: context.identity?.scopes.contains(.eventsStore) == true)
        let results: [AppendResult]
        do {
            results = try await restores.append(admitted)
        } catch {
            throw Self.httpError(storage: error, logger: context.logger)
        }
        for case .failure in decoded { requestMetrics.undecodable() }
        let lines = results.enumerated().map { $0.element.reportLine($0.offset + 1) }
        return .json("[" + lines.joined(separator: ",\n ") + "]\n")
    }

    func account(_ request: Request, context: Context) async throws -> Response {
        try context.require(.accountsRead)
        let account = try accountParameter(context)
        // `minPosition=P`: read one's own write. Waits (at most `Limits.positionWaitSeconds`)
        // until the projections reflect position P.
        if let text = request.uri.queryParameters["minPosition"] {
            guard let wanted = UInt64(text) else {
                throw LedgerHTTPError.badRequest("minPosition must be a log position (an integer ≥ 0), not \"\(text)\"")
            }
            try await waitForPosition(wanted, context: context)
        }
        var asOf = Timestamp.now()
        if let text = request.uri.queryParameters["asOf"] {
            guard let time = Timestamp(rfc3339: text) else {
                throw LedgerHTTPError.badRequest("asOf must be an RFC 3339 time such as 2026-01-31T12:00:00Z, not \"\(text)\"")
            }
            asOf = time
        }
        // `environment=Production` (repeatable): count only the store's reports from those.
        let excluded: Set<StoreEnvironment>
        do {
            excluded = try StoreEnvironment.excluded(keeping: request.uri.queryParameters.getAll("environment"))
        } catch {
            throw LedgerHTTPError.badRequest(error.description)
        }
        // `timeline=true`: when each product was owned, and what started and ended each interval.
        let timeline: Bool
        switch request.uri.queryParameters["timeline"] {
        case nil, "false": timeline = false
        case "true": timeline = true
        case let other?: throw LedgerHTTPError.badRequest("timeline must be true or false, not \"\(other)\"")
        }
        switch request.uri.queryParameters["proof"] {
        case nil, "false": break
        case "true": return try await provenAccount(account, asOf: asOf, excluding: excluded, timeline: timeline, context: context)
        case let other?: throw LedgerHTTPError.badRequest("proof must be true or false, not \"\(other)\"")
        }
        let (projection, position): (AccountProjection?, UInt64)
        if timeline {
            // An expensive read: in a slot, on the idle class's threads, stopped if the client leaves.
            guard let slot = reads.tryAcquire(key: context.keyName) else { throw LedgerHTTPError.busy("an account's timeline") }
            let (ledger, time) = (self.ledger, asOf)
            do {
                (projection, position) = try await ExpensiveReads.run(in: slot, until: context.clientLeft) {
                    try ledger.projectionAndPosition(of: account, asOf: time, excluding: excluded, timeline: true)
                }
            } catch {
                throw Self.httpError(storage: error, logger: context.logger)
            }
        } else {
            (projection, position) = try readLedger(context) {
                try ledger.projectionAndPosition(of: account, asOf: asOf, excluding: excluded, timeline: false)
            }
        }
        var answer = projection ?? .empty(account: account)
        if timeline, answer.timeline == nil { answer.timeline = [] }
        return .json(answer.json(position: position) + "\n")
    }

    /// `DELETE /v1/accounts/{account}`: forgets the customer (docs/FORMAT.md, "Forgetting a
    /// customer"), answered once the forget is durable: `{"position": P, "pseudonym":
    /// "forgotten/<handle>"}`, 404 `notFound` when the ledger has no event of the account.
    /// `requestedBy` (1–128 bytes, optional) says who asked; the API key's name is recorded
    /// with it.
    func forget(_ request: Request, context: Context) async throws -> Response {
        try context.require(.accountsForget)
        let account = try accountParameter(context)
        var requestedBy = "api-key:" + (context.identity?.name ?? "none")
        if let text = request.uri.queryParameters["requestedBy"] {
            requestedBy += " " + text
        }
        guard requestedBy.utf8.count <= 128 else {
            throw LedgerHTTPError.badRequest("requestedBy and the API key's name are at most 128 bytes together")
        }
        let answer: (outcome: AppendOutcome, pseudonym: String)?
        do {
            answer = try await ledger.forget(account, requestedBy: requestedBy)
        } catch let error as LedgerError {
            throw LedgerHTTPError(status: .badRequest, code: error.code.rawValue, message: error.message)
        } catch {
            throw Self.httpError(storage: error, logger: context.logger)
        }
        guard let forgotten = answer else {
            throw LedgerHTTPError(status: .notFound, code: "notFound", message: "the ledger has no event of this account")
        }
        let position = switch forgotten.outcome {
        case .appended(let position), .duplicate(let position): position
        }
        // What the server keeps outside the ledger goes before the answer (`ForgetService` does
        // the same for forgets made elsewhere).
        if let unattributed = notifications?.unattributed {
            do {
                try unattributed.forget(try ledger.renames(ofForgetAt: position).map(\.old))
            } catch {
                throw Self.httpError(storage: error, logger: context.logger)
            }
        }
        return .json("{\"position\": \(position), \"pseudonym\": \(JSONString.quoted(forgotten.pseudonym))}\n")
    }

    /// Waits until the ledger's projections reflect `position` (catching up with other
    /// processes on shared storage), at most `Limits.positionWaitSeconds`; then 503
    /// `positionNotReached`.
    private func waitForPosition(_ position: UInt64, context: Context) async throws {
        let deadline = ContinuousClock.now + .milliseconds(Int64(ServerConfiguration.Limits.positionWaitSeconds * 1000))
        while ledger.position < position {
            guard ContinuousClock.now < deadline else {
                throw LedgerHTTPError(status: .serviceUnavailable, code: "positionNotReached",
                    message: "the ledger is at position \(ledger.position); position \(position) was not reached in time (retry)")
            }
            do {
                try await ledger.catchUp()
            } catch {
                throw Self.httpError(storage: error, logger: context.logger)
            }
            if ledger.position < position { try await Task.sleep(for: .milliseconds(20)) }
        }
    }

    /// `GET /v1/changes?after=CURSOR&limit=N&wait=SECONDS`: `{"changes": [...], "next": CURSOR}`;
    /// waits (long poll) up to `wait` seconds when there is none yet.
    func changes(_ request: Request, context: Context, hub: ChangeFeedHub) async throws -> Response {
        try context.require(.changesRead)
        let after = try cursorParameter(request, header: nil, context: context)
        let limit = Int(try integerParameter(request, "limit", default: 100, range: 1...1000))
        let wait = try integerParameter(request, "wait", default: 0, range: 0...UInt64(ServerConfiguration.Limits.longestChangeWaitSeconds))
        // A long poll holds its connection while it waits.
        let slot = wait > 0 ? try heldSlot(context) : nil
        defer { slot?.release() }
        var changes: [LedgerChange]
        var next: FeedCursor
        do {
            repeat {
                // A forget between the read and the answer: read again (the page may name an old name).
                let generation = ledger.forgetGeneration
                (changes, next) = try await hub.changes(
                    after: after, limit: limit, wait: .seconds(Int64(wait)), key: context.keyName, clientLeft: context.clientLeft)
                if ledger.forgetGeneration == generation { break }
            } while true
        } catch is ChangeFeedHub.Busy {
            throw LedgerHTTPError.busy("reading the feed from behind what the server keeps in memory")
        } catch {
            throw Self.httpError(storage: error, logger: context.logger)
        }
        var writer = JSONWriter(spaced: false, capacity: 1024 + changes.count * 1024)
        writer.beginObject()
        writer.key("changes")
        writer.beginArray()
        for change in changes { writer.raw(change.json) }
        writer.endArray()
        writer.member("next", next.description)
        writer.endObject()
        return .json(writer.string + "\n")
    }

    /// `GET /v1/changes/stream`: the same changes as server-sent events (`id` the change's id,
    /// `event: change`, `data` its JSON), from `Last-Event-ID` or `after`; a comment every
    /// fifteen seconds keeps the connection alive. Ends when the server shuts down; holds a
    /// slot of the held reads until then.
    func changeStream(_ request: Request, context: Context, hub: ChangeFeedHub) async throws -> Response {
        try context.require(.changesRead)
        let start = try cursorParameter(request, header: request.headers[.lastEventID], context: context)
        let slot = try heldSlot(context)
        var headers = HTTPFields()
        headers[.contentType] = "text/event-stream"
        headers[.cacheControl] = "no-store"
        let (clientLeft, key) = (context.clientLeft, context.keyName)
        return Response(status: .ok, headers: headers, body: ResponseBody { writer in
            defer { slot.release() }
            var cursor = start
            var quiet = 0
            try await writer.write(ByteBuffer(string: ": ledger change feed\n\n"))
            // A client that left gives its slot back within a second, not at the next write.
            while !Task.isCancelled, !Task.isShuttingDownGracefully, !clientLeft() {
                let generation = ledger.forgetGeneration
                let changes: [LedgerChange]
                let next: FeedCursor
                do {
                    (changes, next) = try await hub.changes(after: cursor, limit: 100, wait: .seconds(1), key: key, clientLeft: clientLeft)
                } catch is ChangeFeedHub.Busy {
                    // Behind what is kept, and every expensive read's slot taken: a stream waits
                    // its turn (a comment now and then finds out whether its client is still there).
                    try await writer.write(ByteBuffer(string: ": waiting for a slot\n\n"))
                    try await Task.sleep(for: .seconds(1))
                    continue
                }
                // A forget since the page was read: it may name an old name; read it again.
                guard ledger.forgetGeneration == generation else { continue }
                if changes.isEmpty {
                    quiet += 1
                    if quiet >= 15 {
                        quiet = 0
                        try await writer.write(ByteBuffer(string: ": keep-alive\n\n"))
                    }
                    continue
                }
                quiet = 0
                var text = ""
                for change in changes { text += "id: \(change.id)\nevent: change\ndata: \(change.json)\n\n" }
                try await writer.write(ByteBuffer(string: text))
                cursor = next
            }
            try await writer.finish(nil)
        })
    }

    /// `after` (or the `Last-Event-ID` header when given): a change's id or a position, not
    /// past the log's end (a reader that sent one would wait, unaware, for changes it has
    /// skipped).
    private func cursorParameter(_ request: Request, header: String?, context: Context) throws -> FeedCursor {
        guard let text = header ?? request.uri.queryParameters["after"].map(String.init) else { return .start }
        let name = header == nil ? "after" : "Last-Event-ID"
        guard let cursor = FeedCursor(text) else {
            throw LedgerHTTPError.badRequest("\(name) must be a change's id or a log position, not \"\(LogSafe.metadata(String(text.prefix(64))))\"")
        }
        guard cursor.position > ledger.position else { return cursor }
        // The feed reads committed storage, which is ahead of the projections until they are
        // published (and, on shared storage, of what this process has caught up with).
        let stored = try readLedger(context) { try ledger.storedPosition() }
        guard cursor.position <= stored else {
            throw LedgerHTTPError.badRequest("\(name) is past the end of the log (position \(stored)): it is no cursor of this ledger's")
        }
        return cursor
    }

    /// A slot for a read that holds its connection while it waits (`HeldReads`); 503 `busy`
    /// when the server's or the key's are all taken.
    private func heldSlot(_ context: Context) throws -> CountedSlot {
        guard let slot = held.tryAcquire(key: context.keyName) else {
            throw LedgerHTTPError.heldReadsTaken()
        }
        return slot
    }

    func history(_ request: Request, context: Context) throws -> Response {
        try context.require(.accountsRead)
        let account = try accountParameter(context)
        let from = try integerParameter(request, "from", default: 1, range: 1...UInt64.max)
        let limit = Int(try integerParameter(request, "limit", default: 100, range: 1...1000))
        // One more than asked for tells whether there is a next page.
        var records = try readLedger(context) { try ledger.history(account: account, after: from - 1, limit: limit + 1) }
        var next = "null"
        if records.count > limit {
            next = String(records[limit].position)
            records.removeLast(records.count - limit)
        }
        var text = "{\"account\": \(JSONString.quoted(account)), \"events\": ["
        text += records.map { "\n  " + $0.jsonLine }.joined(separator: ",")
        text += records.isEmpty ? "], " : "\n], "
        text += "\"next\": \(next)}\n"
        return .json(text)
    }

    func metrics(context: Context) throws -> Response {
        try context.require(.metricsRead)
        var headers = HTTPFields()
        headers[.contentType] = "text/plain; version=0.0.4; charset=utf-8"
        let text = metricsRegistry?.emitToBuffer() ?? []
        return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: text)))
    }

    func appStoreNotification(_ request: Request, context: Context) async throws -> Response {
        guard let notifications else { throw LedgerHTTPError(status: .notFound, code: "notFound", message: "App Store notifications are not configured") }
        let body = try await collectBody(request)
        let signedPayload: String
        do {
            signedPayload = try JSONDecoder().decode(NotificationBody.self, from: Data(body.readableBytesView)).signedPayload
        } catch {
            throw LedgerHTTPError.badRequest("the body must be {\"signedPayload\": \"<JWS>\"}")
        }
        do {
            let handled = try await notifications.handle(signedPayload: signedPayload, logger: context.logger)
            requestMetrics.notification(handled.action)
            return .json(handled.json)
        } catch let error as AppStoreVerificationError {
            requestMetrics.notification(.refused)
            refusals.warning(
                "App Store notification refused",
                metadata: ["code": "\(error.code)", "reason": LogSafe.metadata(error.message)], logger: context.logger)
            // Anyone can post here: the code and a fixed message, nothing of the request.
            throw LedgerHTTPError(status: .badRequest, code: error.code.rawValue, message: error.code.publicMessage)
        } catch {
            throw Self.httpError(storage: error, logger: context.logger)
        }
    }

    /// A StoreKit 2 transaction from the app: `{"signedTransaction": "<JWS>", "account": "u1"}`
    /// (`account` optional when the transaction carries an `appAccountToken`).
    func signedTransaction(_ request: Request, context: Context, handler: SignedTransactionHandler) async throws -> Response {
        try context.require(.eventsWrite)
        let body = try await collectBody(request)
        let decoded: TransactionBody
        do {
            decoded = try JSONDecoder().decode(TransactionBody.self, from: Data(body.readableBytesView))
        } catch {
            throw LedgerHTTPError.invalidEvent("the body must be {\"signedTransaction\": \"<JWS>\", \"account\": \"<optional>\"}")
        }
        if let account = decoded.account, !(1...128).contains(account.utf8.count) {
            throw LedgerHTTPError.invalidEvent("`account` must be 1 to 128 bytes of UTF-8")
        }
        if let account = decoded.account, account.utf8.starts(with: Forgotten.pseudonymPrefix.utf8) {
            throw LedgerHTTPError.invalidEvent("accounts that start with `\(Forgotten.pseudonymPrefix)` are forgotten customers' pseudonyms; a client never names one")
        }
        do {
            let handled = try await handler.handle(signedTransaction: decoded.signedTransaction, account: decoded.account)
            return .json(handled.json)
        } catch let error as AppStoreVerificationError {
            refusals.warning(
                "signed transaction refused", metadata: ["code": "\(error.code)", "reason": LogSafe.metadata(error.message)], logger: context.logger)
            throw LedgerHTTPError(status: .badRequest, code: error.code.rawValue, message: error.code.publicMessage)
        } catch SignedTransactionHandler.Refusal.noAccount {
            throw LedgerHTTPError.invalidEvent("the transaction has no appAccountToken: give `account`")
        } catch SignedTransactionHandler.Refusal.notTheTokensAccount {
            throw LedgerHTTPError.invalidEvent("the transaction's appAccountToken binds it to another account than `account`")
        } catch SignedTransactionHandler.Refusal.noTransactionID {
            throw LedgerHTTPError.invalidEvent("the transaction has no transactionId")
        } catch SignedTransactionHandler.Refusal.noSignedDate {
            throw LedgerHTTPError.invalidEvent("the transaction has no signedDate")
        } catch {
            throw Self.httpError(storage: error, logger: context.logger)
        }
    }

    // MARK: Helpers

    /// The body, at most `limits.bodyBytes` (413 beyond).
    private func collectBody(_ request: Request) async throws -> ByteBuffer {
        if let length = request.headers[.contentLength].flatMap(Int.init), length > limits.bodyBytes {
            throw LedgerHTTPError.tooLarge("the body is \(length) bytes; at most \(limits.bodyBytes)")
        }
        do {
            return try await request.body.collect(upTo: limits.bodyBytes)
        } catch is NIOTooManyBytesError {
            throw LedgerHTTPError.tooLarge("the body is larger than \(limits.bodyBytes) bytes")
        }
    }

    private func accountParameter(_ context: Context) throws -> String {
        guard let raw = context.parameters.get("account"), let account = raw.removingPercentEncoding,
              !account.isEmpty, account.utf8.count <= 128
        else {
            throw LedgerHTTPError.badRequest("the account must be 1–128 bytes of UTF-8, percent-encoded in the path")
        }
        return account
    }

    func integerParameter(_ request: Request, _ name: String, default value: UInt64, range: ClosedRange<UInt64>) throws -> UInt64 {
        guard let text = request.uri.queryParameters[Substring(name)] else { return value }
        guard let number = UInt64(text), range.contains(number) else {
            throw LedgerHTTPError.badRequest("\(name) must be an integer from \(range.lowerBound) to \(range.upperBound), not \"\(text)\"")
        }
        return number
    }

    func readLedger<R>(_ context: Context, _ body: () throws -> R) throws -> R {
        do {
            return try body()
        } catch {
            throw Self.httpError(storage: error, logger: context.logger)
        }
    }

    /// A storage failure as an answer: 503 when the ledger is closing (retry elsewhere or
    /// later), 507 when it is full, else 500; nothing of the request was written in any case.
    static func httpError(storage error: any Error, logger: Logger) -> any Error {
        if error is LedgerHTTPError { return error }
        if error is CancellationError {
            // The server is stopping; an append may still commit, and a retry is then answered
            // duplicate.
            return LedgerHTTPError.unavailable("the server is stopping; retry")
        }
        guard let storage = error as? StorageError else {
            logger.error("request failed", metadata: ["error": LogSafe.metadata("\(error)", limit: 500)])
            return LedgerHTTPError.internal("the ledger failed; nothing of this request was written")
        }
        // Storage errors may quote an event's fields: a client's input.
        logger.error("storage failed", metadata: ["error": LogSafe.metadata("\(storage)", limit: 500)])
        switch storage.code {
        case .closed: return LedgerHTTPError.unavailable("the ledger is closing; nothing of this request was written")
        case .storageFull: return LedgerHTTPError(status: HTTPResponse.Status(code: 507, reasonPhrase: "Insufficient Storage"), code: "storageFull", message: "the ledger is full; nothing of this request was written")
        default: return LedgerHTTPError.internal("the ledger's storage failed (\(storage.code)); nothing of this request was written")
        }
    }
}

/// Apple's notification body.
private struct NotificationBody: Decodable {
    var signedPayload: String
}

/// The app's body for `POST /v1/transactions`.
private struct TransactionBody: Decodable {
    var signedTransaction: String
    var account: String?
}

extension Response {
    static func json(_ text: String) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        // An answer read with a key is the key holder's: no shared cache keeps it (one sent as
        // `X-API-Key` is not covered by the rule for `Authorization`).
        headers[.cacheControl] = "no-store"
        return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
    }
}

/// The server's own counters (the ledger reports its commits itself).
struct RequestMetrics: Sendable {

    private let undecodableRejections: CoreMetrics.Counter
    private let undecodableOutcomes: CoreMetrics.Counter
    /// What `POST /v1/appstore/notifications` did, one series per `AppStoreRecordingAction`.
    private let notifications: [AppStoreRecordingAction: CoreMetrics.Counter]

    init(factory: any MetricsFactory) {
        // The ledger's own series: an event rejected before it reached the ledger counts the same.
        undecodableRejections = CoreMetrics.Counter(label: "purchaseledger_rejections_total", dimensions: [("code", "invalidEvent")], factory: factory)
        undecodableOutcomes = CoreMetrics.Counter(label: "purchaseledger_events_total", dimensions: [("outcome", "rejected")], factory: factory)
        notifications = Dictionary(uniqueKeysWithValues: AppStoreRecordingAction.allCases.map { action in
            (action, CoreMetrics.Counter(
                label: "purchaseledger_appstore_notifications_total", dimensions: [("action", action.rawValue)], factory: factory))
        })
    }

    /// An event of a request that did not decode: rejected `invalidEvent` before the ledger.
    func undecodable() {
        undecodableRejections.increment()
        undecodableOutcomes.increment()
    }

    func notification(_ action: AppStoreRecordingAction) {
        notifications[action]?.increment()
    }
}

extension HTTPField.Name {
    /// Server-sent events: where a reconnecting client's stream left off.
    static let lastEventID = HTTPField.Name("Last-Event-ID")!
}
