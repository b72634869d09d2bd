import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import Synchronization

/// A client of the App Store Server API: the endpoints the ledger's reconciliation reads, each
/// call authorized by a fresh ES256 token, 429 and 5xx retried (`AppStoreServerAPIRetryPolicy`),
/// every other failure a typed `AppStoreServerAPIError`. The signed data it returns is not
/// verified here: the caller verifies it like a notification's.
public struct AppStoreServerAPIClient: Sendable {
    /// What one call may cost: an answer that would take more is a failure, not a wait.
    public struct Limits: Sendable, Hashable {
        /// One request, from sending it to the last byte of its answer's body: a server that
        /// trickles its body cannot hold a call longer.
        public var requestTimeout: Duration
        /// The largest answer body read.
        public var maximumAnswerBytes: Int
        /// Pages one paged call follows (`allTransactions`, `allNotifications`).
        public var maximumPages: Int
        /// Bytes of answers one paged call reads, all pages together.
        public var maximumPagedBytes: Int

        public init(
            requestTimeout: Duration = .seconds(30), maximumAnswerBytes: Int = 16 << 20, maximumPages: Int = 10_000,
            maximumPagedBytes: Int = 128 << 20
        ) {
            self.requestTimeout = requestTimeout
            self.maximumAnswerBytes = maximumAnswerBytes
            self.maximumPages = maximumPages
            self.maximumPagedBytes = maximumPagedBytes
        }
    }

    public let environment: AppStoreServerAPIEnvironment
    public let retry: AppStoreServerAPIRetryPolicy
    public let limits: Limits
    let signer: AppStoreServerAPITokenSigner
    let http: HTTPClient
    let logger: Logger
    private let counter: CallCounter

    /// Throws `invalidKey` when the key cannot be read.
    public init(
        credentials: AppStoreServerAPICredentials, environment: AppStoreServerAPIEnvironment,
        retry: AppStoreServerAPIRetryPolicy = .init(), limits: Limits = .init(), httpClient: HTTPClient = .shared,
        logger: Logger = Logger(label: "AppStoreServerAPI")
    ) async throws(AppStoreServerAPIError) {
        self.environment = environment
        self.retry = retry
        self.limits = limits
        self.signer = try await AppStoreServerAPITokenSigner(credentials: credentials)
        self.http = httpClient
        self.logger = logger
        self.counter = CallCounter()
    }

    /// HTTP requests made so far (retries included).
    public var requestCount: Int { counter.value }

    // MARK: Endpoints

    /// Get Transaction History (v2), one page: `GET /inApps/v2/history/{transactionId}`.
    public func transactionHistory(of transactionID: String, revision: String? = nil) async throws(AppStoreServerAPIError) -> TransactionHistoryPage {
        try await get("/inApps/v2/history/" + Self.pathComponent(transactionID), query: revision.map { [("revision", $0)] } ?? [])
    }

    /// Every page of the transaction history of the customer who made `transactionID`.
    /// Throws `invalidResponse` when the pages never end: a revision seen before, or more
    /// pages or bytes than `limits` allow.
    public func allTransactions(of transactionID: String) async throws(AppStoreServerAPIError) -> [String] {
        var signed: [String] = []
        var revision: String?
        var paging = Paging(limits: limits, what: "the transaction history of \(transactionID)")
        repeat {
            let page = try await transactionHistory(of: transactionID, revision: revision)
            let items = page.signedTransactions ?? []
            try paging.read(bytes: items.reduce(0) { $0 + $1.utf8.count })
            signed += items
            guard page.hasMore == true else { break }
            guard let next = page.revision else {
                throw AppStoreServerAPIError(.invalidResponse, "a history page says hasMore without a revision")
            }
            try paging.follow(next)
            revision = next
        } while true
        return signed
    }

    /// Get Refund History (v2), one page: `GET /inApps/v2/refund/lookup/{transactionId}`.
    public func refundHistory(of transactionID: String, revision: String? = nil) async throws(AppStoreServerAPIError) -> RefundHistoryPage {
        try await get("/inApps/v2/refund/lookup/" + Self.pathComponent(transactionID), query: revision.map { [("revision", $0)] } ?? [])
    }

    /// Get All Subscription Statuses: `GET /inApps/v1/subscriptions/{transactionId}`.
    public func subscriptionStatuses(of transactionID: String) async throws(AppStoreServerAPIError) -> SubscriptionStatusesResponse {
        try await get("/inApps/v1/subscriptions/" + Self.pathComponent(transactionID), query: [])
    }

    /// Get Notification History, one page: `POST /inApps/v1/notifications/history`, the
    /// notifications Apple sent from `start` to `end` (milliseconds since 1970).
    public func notificationHistory(
        from start: Int64, to end: Int64, paginationToken: String? = nil
    ) async throws(AppStoreServerAPIError) -> NotificationHistoryPage {
        let body: Data
        do {
            body = try JSONEncoder().encode(NotificationHistoryRequest(startDate: start, endDate: end))
        } catch {
            throw AppStoreServerAPIError(.badRequest, "cannot encode the request: \(error)")
        }
        return try await call(.POST, "/inApps/v1/notifications/history", query: paginationToken.map { [("paginationToken", $0)] } ?? [], body: body)
    }

    /// Every notification Apple sent from `start` to `end`, following the pages.
    public func allNotifications(from start: Int64, to end: Int64) async throws(AppStoreServerAPIError) -> [NotificationHistoryPage.Item] {
        var items: [NotificationHistoryPage.Item] = []
        var token: String?
        var paging = Paging(limits: limits, what: "the notification history")
        repeat {
            let page = try await notificationHistory(from: start, to: end, paginationToken: token)
            let pageItems = page.notificationHistory ?? []
            try paging.read(bytes: pageItems.reduce(0) { $0 + ($1.signedPayload?.utf8.count ?? 0) })
            items += pageItems
            guard page.hasMore == true else { break }
            guard let next = page.paginationToken else {
                throw AppStoreServerAPIError(.invalidResponse, "a notification history page says hasMore without a paginationToken")
            }
            try paging.follow(next)
            token = next
        } while true
        return items
    }

    /// Send Consumption Information: `PUT /inApps/v2/transactions/consumption/{transactionId}`,
    /// the answer to a refund request (`CONSUMPTION_REQUEST`). Returns Apple's HTTP status
    /// (202 when accepted); a refusal throws, with Apple's error code.
    @discardableResult
    public func sendConsumptionInformation(
        _ information: ConsumptionInformation, transactionID: String
    ) async throws(AppStoreServerAPIError) -> Int {
        let body: Data
        do {
            body = try information.encoded()
        } catch {
            throw AppStoreServerAPIError(.badRequest, "cannot encode the request: \(error)")
        }
        let path = "/inApps/v2/transactions/consumption/" + Self.pathComponent(transactionID)
        return try await exchange(.PUT, path, query: [], body: body).status
    }

    /// Look Up Order ID: `GET /inApps/v1/lookup/{orderId}`, the transactions of the order whose
    /// id is on the customer's receipt email.
    public func lookUpOrder(_ orderID: String) async throws(AppStoreServerAPIError) -> OrderLookupResponse {
        try await get("/inApps/v1/lookup/" + Self.pathComponent(orderID), query: [])
    }

    /// Set App Account Token (API 1.16): `PUT /inApps/v1/transactions/{originalTransactionId}/appAccountToken`,
    /// so that the App Store's later notifications and answers about that purchase carry
    /// `token` (a purchase made outside the app, or attributed late). Returns Apple's HTTP
    /// status (200); a refusal throws with Apple's error code (a transaction id that is not an
    /// original one, a Family Sharing transaction, a token that is not a UUID).
    @discardableResult
    public func setAppAccountToken(_ token: UUID, originalTransactionID: String) async throws(AppStoreServerAPIError) -> Int {
        let body: Data
        do {
            body = try JSONEncoder().encode(AppAccountTokenRequest(appAccountToken: token.uuidString.lowercased()))
        } catch {
            throw AppStoreServerAPIError(.badRequest, "cannot encode the request: \(error)")
        }
        let path = "/inApps/v1/transactions/" + Self.pathComponent(originalTransactionID) + "/appAccountToken"
        return try await exchange(.PUT, path, query: [], body: body).status
    }

    /// Get App Transaction Info (API 1.17): `GET /inApps/v1/transactions/appTransactions/{transactionId}`,
    /// the customer's app transaction (the app's original purchase, its version), signed, for
    /// any transaction, original transaction or app transaction id of that customer.
    public func appTransactionInfo(of transactionID: String) async throws(AppStoreServerAPIError) -> AppTransactionInfoResponse {
        try await get("/inApps/v1/transactions/appTransactions/" + Self.pathComponent(transactionID), query: [])
    }

    /// Finish Transaction (API 1.20): `POST /inApps/v1/transactions/{transactionId}/finish`, telling
    /// the App Store that the server delivered what the transaction bought. Returns Apple's HTTP
    /// status; a refusal throws with Apple's error code.
    @discardableResult
    public func finishTransaction(_ transactionID: String) async throws(AppStoreServerAPIError) -> Int {
        try await exchange(.POST, "/inApps/v1/transactions/" + Self.pathComponent(transactionID) + "/finish", query: [], body: nil).status
    }

    // MARK: Requests

    private func get<Answer: Decodable>(_ path: String, query: [(String, String)]) async throws(AppStoreServerAPIError) -> Answer {
        try await call(.GET, path, query: query, body: nil)
    }

    private func call<Answer: Decodable>(
        _ method: HTTPMethod, _ path: String, query: [(String, String)], body: Data?
    ) async throws(AppStoreServerAPIError) -> Answer {
        let (status, answer) = try await exchange(method, path, query: query, body: body)
        do {
            return try JSONDecoder().decode(Answer.self, from: answer)
        } catch {
            throw AppStoreServerAPIError(.invalidResponse, status: status, "the answer to \(path) is not what Apple documents: \(error)")
        }
    }

    /// One call, retried as `retry` says: the status and body of a 2xx answer.
    private func exchange(
        _ method: HTTPMethod, _ path: String, query: [(String, String)], body: Data?
    ) async throws(AppStoreServerAPIError) -> (status: Int, body: Data) {
        var url = environment.baseURL + path
        if !query.isEmpty {
            url += "?" + query.map { Self.queryComponent($0.0) + "=" + Self.queryComponent($0.1) }.joined(separator: "&")
        }
        var attempt = 0
        while true {
            attempt += 1
            let outcome = await send(method, url, body: body)
            switch outcome {
            case .answer(let status, let body, let retryAfter):
                if (200..<300).contains(status) { return (status, body) }
                let retryable = status == 429 || (500..<600).contains(status)
                guard retryable, attempt < retry.maximumAttempts else { throw Self.error(status: status, body: body, path: path) }
                let wait = retry.wait(after: attempt, retryAfter: retryAfter)
                logger.notice("App Store Server API asked to retry", metadata: ["status": "\(status)", "wait": "\(wait)", "path": "\(path)"])
                try await sleep(wait)
            case .failed(let reason):
                guard attempt < retry.maximumAttempts else { throw AppStoreServerAPIError(.transport, "\(path): \(reason)") }
                let wait = retry.wait(after: attempt, retryAfter: nil)
                logger.notice("App Store Server API unreachable; retrying", metadata: ["reason": "\(reason)", "wait": "\(wait)"])
                try await sleep(wait)
            case .tooLarge:
                // The same answer would come again: not worth another call.
                throw AppStoreServerAPIError(.invalidResponse, "\(path): the answer is larger than \(limits.maximumAnswerBytes) bytes")
            }
        }
    }

    private enum Outcome {
        case answer(status: Int, body: Data, retryAfter: String?)
        case failed(String)
        /// An answer larger than `limits.maximumAnswerBytes`.
        case tooLarge
    }

    /// One request, within `limits.requestTimeout` from start to the body's last byte, its
    /// answer read up to `limits.maximumAnswerBytes` (Apple's pages are far smaller).
    private func send(_ method: HTTPMethod, _ url: String, body: Data?) async -> Outcome {
        counter.increment()
        let timeout = limits.requestTimeout
        return await withTaskGroup(of: Outcome?.self) { group in
            group.addTask { await exchangeOnce(method, url, body: body, timeout: timeout) }
            group.addTask {
                // Cancelled when the exchange ends first; nil then.
                guard (try? await Task.sleep(for: timeout)) != nil else { return nil }
                return .failed("no complete answer within \(timeout)")
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first ?? .failed("no complete answer within \(timeout)")
        }
    }

    private func exchangeOnce(_ method: HTTPMethod, _ url: String, body: Data?, timeout: Duration) async -> Outcome {
        do {
            let token = try await signer.token()
            var request = HTTPClientRequest(url: url)
            request.method = method
            if let body {
                request.headers.add(name: "Content-Type", value: "application/json")
                request.body = .bytes(ByteBuffer(bytes: body))
            }
            request.headers.add(name: "Authorization", value: "Bearer " + token)
            request.headers.add(name: "Accept", value: "application/json")
            request.headers.add(name: "User-Agent", value: "PurchaseLedger")
            let (seconds, attoseconds) = timeout.components
            let response = try await http.execute(request, timeout: .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000))
            let body = try await response.body.collect(upTo: limits.maximumAnswerBytes)
            return .answer(status: Int(response.status.code), body: Data(body.readableBytesView), retryAfter: response.headers.first(name: "Retry-After"))
        } catch is NIOTooManyBytesError {
            return .tooLarge
        } catch {
            return .failed("\(error)")
        }
    }

    private func sleep(_ duration: Duration) async throws(AppStoreServerAPIError) {
        do {
            try await Task.sleep(for: duration)
        } catch {
            throw AppStoreServerAPIError(.transport, "cancelled while waiting to retry")
        }
    }

    static func error(status: Int, body: Data, path: String) -> AppStoreServerAPIError {
        let apple = try? JSONDecoder().decode(AppStoreServerAPIErrorBody.self, from: body)
        let message = apple?.errorMessage ?? "HTTP \(status) for \(path)"
        let code: AppStoreServerAPIError.Code = switch status {
        case 401: .unauthorized
        case 404: .notFound
        case 429: .rateLimited
        case 500..<600: .serverError
        default: .badRequest
        }
        return AppStoreServerAPIError(code, status: status, apiErrorCode: apple?.errorCode, message)
    }

    /// A path segment: Apple's ids are digits; anything else is percent-encoded, never a path.
    static func pathComponent(_ value: String) -> String {
        value.addingPercentEncoding(withAllowedCharacters: unreserved) ?? ""
    }

    /// RFC 3986's unreserved characters, ASCII only.
    private static let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

    static func queryComponent(_ value: String) -> String {
        pathComponent(value)
    }
}

/// A paged call's guard against pages that never end: every revision or token it was given,
/// and the pages and bytes read so far.
struct Paging {
    let limits: AppStoreServerAPIClient.Limits
    let what: String
    private var seen: Set<String> = []
    private var pages = 0
    private var bytes = 0

    init(limits: AppStoreServerAPIClient.Limits, what: String) {
        self.limits = limits
        self.what = what
    }

    mutating func read(bytes count: Int) throws(AppStoreServerAPIError) {
        pages += 1
        bytes += count
        if pages > limits.maximumPages {
            throw AppStoreServerAPIError(.invalidResponse, "\(what) has more than \(limits.maximumPages) pages: stopped")
        }
        if bytes > limits.maximumPagedBytes {
            throw AppStoreServerAPIError(.invalidResponse, "\(what) is larger than \(limits.maximumPagedBytes) bytes: stopped")
        }
    }

    /// Throws when `next` was given before: the server is going round in circles.
    mutating func follow(_ next: String) throws(AppStoreServerAPIError) {
        guard seen.insert(next).inserted else {
            throw AppStoreServerAPIError(.invalidResponse, "\(what) gives a page it gave before (\(next.prefix(64))): stopped")
        }
    }
}

/// Requests made, for reports.
private final class CallCounter: Sendable {
    private let count = Atomic<Int>(0)
    var value: Int { count.load(ordering: .relaxed) }
    func increment() { count.add(1, ordering: .relaxed) }
}
