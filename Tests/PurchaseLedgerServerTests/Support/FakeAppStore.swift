import AppStoreServerAPI
import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import JWTKit
import Logging
import NIOCore
import Synchronization

/// A small App Store Server API on loopback for the tests: it checks every request's token as
/// Apple does (ES256 signature by the registered key id, `aud`, `bid`, `iss`, expiry, a
/// lifetime of at most an hour) and answers 401 otherwise; it serves transaction histories in
/// pages of `pageSize` with `revision`/`hasMore`, 404 with Apple's error body for an unknown id,
/// and the faults queued in `faults` first (429 with `Retry-After`, 500).
final class FakeAppStore: Sendable {
    struct Fault: Sendable {
        var status: Int
        var retryAfter: String?
    }

    static let keyID = "TESTKEY123"
    static let issuerID = "57246542-96fe-1a63-e053-0824d011072a"
    static let bundleID = "com.example"

    let key = P256.Signing.PrivateKey()
    let pageSize: Int
    private let state: Mutex<State>

    /// How the history endpoint misbehaves, as a broken or hostile server would.
    enum Misbehaviour: Sendable {
        /// `hasMore: true` forever, its revision alternating between two values.
        case alternatingRevisions
        /// `hasMore: true` forever, with a new revision each page.
        case endlessPages
        /// The answer's head at once, then its body one byte every `interval`.
        case slowBody(interval: Duration)
        /// Not JSON.
        case garbage
        /// A body of `bytes` bytes.
        case hugeBody(bytes: Int)
    }

    struct State {
        var histories: [String: [String]] = [:]
        var misbehaviour: Misbehaviour?
        /// Signed renewal info by original transaction (Get All Subscription Statuses).
        var renewals: [String: String] = [:]
        /// Notifications Apple sent: the signed payload and when (milliseconds since 1970).
        var notifications: [(signedPayload: String, sentAt: Int64)] = []
        var faults: [Fault] = []
        /// Send Consumption Information bodies Apple accepted, by transaction id, in order.
        var consumptionAnswers: [(transaction: String, body: String)] = []
        /// Transactions Apple knows, for Send Consumption Information (nil: any).
        var knownTransactions: Set<String>?
        /// Signed transactions by order id (Look Up Order ID).
        var orders: [String: [String]] = [:]
        var requests = 0
        var refusedTokens = 0
        /// App Account Tokens set, by original transaction id (Set App Account Token).
        var appAccountTokens: [String: String] = [:]
        /// Per transaction id, its original one; and the Family Sharing ones (Set App Account
        /// Token refuses those). Transactions not listed are original, not shared.
        var originals: [String: String] = [:]
        var familyShared: Set<String> = []
        /// Transaction ids whose customer has an app transaction (Get App Transaction Info).
        var appTransactions: Set<String> = []
        /// Signed app transactions by the id asked for (answered before `appTransactions`).
        var signedAppTransactions: [String: String] = [:]
        /// Transactions finished (Finish Transaction), in order.
        var finished: [String] = []
    }

    init(pageSize: Int = 2) {
        self.pageSize = pageSize
        state = Mutex(State())
    }

    /// Apple's history of `original`: its signed transactions, oldest first.
    func setHistory(_ signed: [String], of original: String) {
        state.withLock { $0.histories[original] = signed }
    }

    func setRenewal(_ signed: String, of original: String) {
        state.withLock { $0.renewals[original] = signed }
    }

    func sent(_ signedPayload: String, at milliseconds: Int64) {
        state.withLock { $0.notifications.append((signedPayload, milliseconds)) }
    }

    func misbehave(_ misbehaviour: Misbehaviour?) {
        state.withLock { $0.misbehaviour = misbehaviour }
    }

    func queue(_ faults: [Fault]) {
        state.withLock { $0.faults += faults }
    }

    /// The consumption information Apple accepted: the request bodies, as sent.
    var consumptionAnswers: [(transaction: String, body: String)] { state.withLock { $0.consumptionAnswers } }

    /// The order `id` on a customer's receipt email, and its signed transactions.
    func setOrder(_ id: String, _ signed: [String]) {
        state.withLock { $0.orders[id] = signed }
    }

    /// Send Consumption Information answers 404 for any transaction not in `known`.
    func knowTransactions(_ known: Set<String>) {
        state.withLock { $0.knownTransactions = known }
    }

    /// Set App Account Token refuses `transaction` as not original (its original is `original`).
    func setOriginal(_ original: String, of transaction: String) {
        state.withLock { $0.originals[transaction] = original }
    }

    func shareInFamily(_ transaction: String) {
        state.withLock { _ = $0.familyShared.insert(transaction) }
    }

    /// Get App Transaction Info answers `signed` (an app transaction signed by a test chain) for `id`.
    func setAppTransaction(_ signed: String, for id: String) {
        state.withLock { $0.signedAppTransactions[id] = signed }
    }

    /// Get App Transaction Info answers Apple's model for these ids, 404 for others.
    func knowAppTransactions(of transactions: Set<String>) {
        state.withLock { $0.appTransactions = transactions }
    }

    var appAccountTokens: [String: String] { state.withLock { $0.appAccountTokens } }
    var finished: [String] { state.withLock { $0.finished } }

    var requests: Int { state.withLock { $0.requests } }
    var refusedTokens: Int { state.withLock { $0.refusedTokens } }

    /// The credentials of the key the fake trusts (`key`).
    var credentials: AppStoreServerAPICredentials {
        AppStoreServerAPICredentials(privateKeyPEM: key.pemRepresentation, keyID: Self.keyID, issuerID: Self.issuerID, bundleID: Self.bundleID)
    }

    /// Runs the fake on a loopback port and `body` with its base URL.
    func run<R: Sendable>(_ body: @Sendable (String) async throws -> R) async throws -> R {
        let keys = JWTKeyCollection()
        await keys.add(ecdsa: try ES256PublicKey(pem: key.publicKey.pemRepresentation), kid: JWKIdentifier(string: Self.keyID))
        let router = Router()
        router.get("/inApps/v2/history/:id") { request, context in
            try await self.history(request, context: context, keys: keys)
        }
        router.get("/inApps/v1/subscriptions/:id") { request, context in
            try await self.statuses(request, context: context, keys: keys)
        }
        router.post("/inApps/v1/notifications/history") { request, context in
            try await self.notificationHistory(request, context: context, keys: keys)
        }
        router.get("/inApps/v1/lookup/:id") { request, context in
            try await self.lookUp(request, context: context, keys: keys)
        }
        router.put("/inApps/v2/transactions/consumption/:id") { request, context in
            try await self.consumption(request, context: context, keys: keys)
        }
        router.put("/inApps/v1/transactions/:id/appAccountToken") { request, context in
            try await self.setAppAccountToken(request, context: context, keys: keys)
        }
        router.get("/inApps/v1/transactions/appTransactions/:id") { request, context in
            try await self.appTransactionInfo(request, context: context, keys: keys)
        }
        router.post("/inApps/v1/transactions/:id/finish") { request, context in
            try await self.finish(request, context: context, keys: keys)
        }
        var logger = Logger(label: "fake-app-store")
        logger.logLevel = .error
        let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)), logger: logger)
        return try await app.test(.live) { client in
            guard let port = client.port else { throw FakeAppStoreError(description: "the fake App Store has no port") }
            return try await body("http://127.0.0.1:\(port)")
        }
    }

    private func history(_ request: Request, context: BasicRequestContext, keys: JWTKeyCollection) async throws -> Response {
        if let refusal = await refusal(of: request, keys: keys, takingFaults: true) { return refusal }
        let id = context.parameters.get("id") ?? ""
        if let misbehaviour = state.withLock({ $0.misbehaviour }) {
            return try Self.misbehaving(misbehaviour, request: request, signed: state.withLock { $0.histories[id] } ?? [])
        }
        guard let signed = state.withLock({ $0.histories[id] }) else { return Self.json(404, Self.transactionNotFound) }
        let start = request.uri.queryParameters["revision"].flatMap { Int($0.dropFirst("page-".count)) } ?? 0
        let page = Array(signed.dropFirst(start).prefix(pageSize))
        let hasMore = start + page.count < signed.count
        // Apple's `transactionHistoryResponse.json`, with this page.
        var body = try JSONSerialization.jsonObject(with: Data(Self.historyModel.utf8)) as? [String: Any] ?? [:]
        body["signedTransactions"] = page
        body["hasMore"] = hasMore
        body["revision"] = "page-\(start + page.count)"
        body["bundleId"] = Self.bundleID
        body["environment"] = "Sandbox"
        return Self.json(200, String(decoding: try JSONSerialization.data(withJSONObject: body), as: UTF8.self))
    }

    private static func misbehaving(_ misbehaviour: Misbehaviour, request: Request, signed: [String]) throws -> Response {
        func page(revision: String) throws -> String {
            var body = try JSONSerialization.jsonObject(with: Data(historyModel.utf8)) as? [String: Any] ?? [:]
            body["signedTransactions"] = signed
            body["hasMore"] = true
            body["revision"] = revision
            body["bundleId"] = bundleID
            body["environment"] = "Sandbox"
            return String(decoding: try JSONSerialization.data(withJSONObject: body), as: UTF8.self)
        }
        let asked = request.uri.queryParameters["revision"].map(String.init)
        switch misbehaviour {
        case .alternatingRevisions:
            return json(200, try page(revision: asked == "a" ? "b" : "a"))
        case .endlessPages:
            return json(200, try page(revision: (asked ?? "r") + "n"))
        case .slowBody(let interval):
            let text = try page(revision: "a")
            var headers = HTTPFields()
            headers[.contentType] = "application/json"
            return Response(status: .ok, headers: headers, body: ResponseBody(contentLength: text.utf8.count) { writer in
                for byte in text.utf8 {
                    try await writer.write(ByteBuffer(bytes: [byte]))
                    try await Task.sleep(for: interval)
                }
                try await writer.finish(nil)
            })
        case .garbage:
            return json(200, "\u{0}<html>not json")
        case .hugeBody(let bytes):
            return json(200, "{\"signedTransactions\": [\"" + String(repeating: "x", count: bytes) + "\"]}")
        }
    }

    /// Get All Subscription Statuses: Apple's `getAllSubscriptionStatusesResponse.json` shape,
    /// with the renewal info set for the subscription (none: no group).
    private func statuses(_ request: Request, context: BasicRequestContext, keys: JWTKeyCollection) async throws -> Response {
        if let refusal = await refusal(of: request, keys: keys, takingFaults: false) { return refusal }
        let id = context.parameters.get("id") ?? ""
        var data: [[String: Any]] = []
        if let renewal = state.withLock({ $0.renewals[id] }) {
            data = [["subscriptionGroupIdentifier": "55555", "lastTransactions": [
                ["status": 1, "originalTransactionId": id, "signedTransactionInfo": "", "signedRenewalInfo": renewal],
            ]]]
        }
        let body: [String: Any] = ["environment": "Sandbox", "bundleId": Self.bundleID, "data": data]
        return Self.json(200, String(decoding: try JSONSerialization.data(withJSONObject: body), as: UTF8.self))
    }

    private struct HistoryRequest: Decodable {
        var startDate: Int64
        var endDate: Int64
    }

    /// Get Notification History: the notifications sent between the body's dates, a page at a
    /// time (`paginationToken` is the offset of the next page).
    private func notificationHistory(_ request: Request, context: BasicRequestContext, keys: JWTKeyCollection) async throws -> Response {
        if let refusal = await refusal(of: request, keys: keys, takingFaults: false) { return refusal }
        let body = try await request.body.collect(upTo: 1 << 16)
        guard let asked = try? JSONDecoder().decode(HistoryRequest.self, from: Data(body.readableBytesView)) else {
            return Self.json(400, #"{"errorCode": 4000023, "errorMessage": "Invalid request."}"#)
        }
        let sent = state.withLock { $0.notifications.filter { (asked.startDate...asked.endDate).contains($0.sentAt) } }
        let start = request.uri.queryParameters["paginationToken"].flatMap { Int($0) } ?? 0
        let page = Array(sent.dropFirst(start).prefix(pageSize))
        let hasMore = start + page.count < sent.count
        var answer: [String: Any] = [
            "hasMore": hasMore,
            "notificationHistory": page.map { ["signedPayload": $0.signedPayload, "sendAttempts": [["attemptDate": $0.sentAt, "sendAttemptResult": "NO_RESPONSE"]]] },
        ]
        if hasMore { answer["paginationToken"] = String(start + page.count) }
        return Self.json(200, String(decoding: try JSONSerialization.data(withJSONObject: answer), as: UTF8.self))
    }

    /// Look Up Order ID: 200 with `status` 0 and the order's signed transactions, or `status` 1
    /// for an order id Apple does not know (Apple answers an invalid id so, not with a 404).
    private func lookUp(_ request: Request, context: BasicRequestContext, keys: JWTKeyCollection) async throws -> Response {
        if let refusal = await refusal(of: request, keys: keys, takingFaults: false) { return refusal }
        let id = context.parameters.get("id") ?? ""
        let signed = state.withLock { $0.orders[id] }
        let body: [String: Any] = signed.map { ["status": 0, "signedTransactions": $0] } ?? ["status": 1]
        return Self.json(200, String(decoding: try JSONSerialization.data(withJSONObject: body), as: UTF8.self))
    }

    /// Send Consumption Information (v2), checked as Apple documents the body: JSON,
    /// `customerConsented` true, a known `deliveryStatus`, `sampleContentProvided` present,
    /// `consumptionPercentage` within 0…100000 and a known `refundPreference` when present.
    /// 202 with no body when accepted; faults queued first, like the other endpoints.
    private func consumption(_ request: Request, context: BasicRequestContext, keys: JWTKeyCollection) async throws -> Response {
        if let refusal = await refusal(of: request, keys: keys, takingFaults: true) { return refusal }
        let id = context.parameters.get("id") ?? ""
        if let unknown = unknownTransaction(id) { return unknown }
        guard let (fields, body) = try await jsonBody(of: request) else { return Self.json(400, Self.badRequest) }
        guard fields["customerConsented"] as? Bool == true else {
            return Self.json(400, #"{"errorCode": 4000035, "errorMessage": "Invalid request. The customer consented field is invalid or doesn't indicate that the customer consented."}"#)
        }
        let deliveryStatuses = ConsumptionInformation.DeliveryStatus.allCases.map(\.rawValue)
        guard let delivery = fields["deliveryStatus"] as? String, deliveryStatuses.contains(delivery) else {
            return Self.json(400, #"{"errorCode": 4000036, "errorMessage": "Invalid request. The delivery status field is invalid."}"#)
        }
        let percentageValid = fields["consumptionPercentage"].map { ($0 as? Int).map { (0...100_000).contains($0) } ?? false } ?? true
        let preferences = ConsumptionInformation.RefundPreference.allCases.map(\.rawValue)
        let preferenceValid = fields["refundPreference"].map { ($0 as? String).map(preferences.contains) ?? false } ?? true
        guard fields["sampleContentProvided"] is Bool, percentageValid, preferenceValid else {
            return Self.json(400, Self.badRequest)
        }
        state.withLock { $0.consumptionAnswers.append((id, body)) }
        return Response(status: .accepted)
    }

    /// Set App Account Token, checked as Apple documents it: a JSON body whose `appAccountToken`
    /// is a UUID (else 4000183), an original transaction id (else 4000187), not a Family Sharing
    /// transaction (else 4000185); 200 with no body when set. Faults queued first.
    private func setAppAccountToken(_ request: Request, context: BasicRequestContext, keys: JWTKeyCollection) async throws -> Response {
        if let refusal = await refusal(of: request, keys: keys, takingFaults: true) { return refusal }
        let id = context.parameters.get("id") ?? ""
        guard let (fields, _) = try await jsonBody(of: request) else { return Self.json(400, Self.badRequest) }
        guard let token = fields["appAccountToken"] as? String, UUID(uuidString: token) != nil else {
            return Self.json(400, Self.model("invalidAppAccountTokenUUIDError"))
        }
        let (original, shared) = state.withLock { ($0.originals[id], $0.familyShared.contains(id)) }
        if original != nil { return Self.json(400, Self.model("transactionIdNotOriginalTransactionId")) }
        if shared { return Self.json(400, Self.model("familyTransactionNotSupportedError")) }
        state.withLock { $0.appAccountTokens[id] = token }
        return Response(status: .ok)
    }

    /// Get App Transaction Info: Apple's model for a known customer, 404 4040019 otherwise.
    private func appTransactionInfo(_ request: Request, context: BasicRequestContext, keys: JWTKeyCollection) async throws -> Response {
        if let refusal = await refusal(of: request, keys: keys, takingFaults: true) { return refusal }
        let id = context.parameters.get("id") ?? ""
        if let signed = state.withLock({ $0.signedAppTransactions[id] }) {
            return Self.json(200, #"{"signedAppTransactionInfo": ""# + signed + #""}"#)
        }
        guard state.withLock({ $0.appTransactions.contains(id) }) else { return Self.json(404, Self.model("appTransactionDoesNotExistError")) }
        return Self.json(200, Self.model("appTransactionInfoResponse"))
    }

    /// Finish Transaction: no body; a transaction Apple knows (`knowTransactions`) is finished,
    /// 404 4040010 otherwise. Faults queued first.
    private func finish(_ request: Request, context: BasicRequestContext, keys: JWTKeyCollection) async throws -> Response {
        if let refusal = await refusal(of: request, keys: keys, takingFaults: true) { return refusal }
        let id = context.parameters.get("id") ?? ""
        if let unknown = unknownTransaction(id) { return unknown }
        guard try await request.body.collect(upTo: 1 << 16).readableBytes == 0 else { return Self.json(400, Self.badRequest) }
        state.withLock { $0.finished.append(id) }
        return Response(status: .ok)
    }

    static let badRequest = #"{"errorCode": 4000000, "errorMessage": "Bad request."}"#
    static let transactionNotFound = #"{"errorCode": 4040010, "errorMessage": "Transaction id not found."}"#

    /// Apple's 404 for a transaction it does not know (`knowTransactions`); nil for one it knows.
    private func unknownTransaction(_ id: String) -> Response? {
        guard let known = state.withLock({ $0.knownTransactions }), !known.contains(id) else { return nil }
        return Self.json(404, Self.transactionNotFound)
    }

    /// A request's body as a JSON object and as sent; nil unless it is sent as JSON and is an object.
    private func jsonBody(of request: Request) async throws -> (fields: [String: Any], text: String)? {
        guard request.headers[.contentType] == "application/json" else { return nil }
        let bytes = try await request.body.collect(upTo: 1 << 16)
        guard let fields = try? JSONSerialization.jsonObject(with: Data(bytes.readableBytesView)) as? [String: Any] else { return nil }
        return (fields, String(buffer: bytes))
    }

    /// One of Apple's model files (Fixtures/models); a missing one fails the test that reads it.
    static func model(_ name: String) -> String {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/models/\(name).json")
        return (try? String(contentsOf: url, encoding: .utf8)) ?? "missing fixture \(name)"
    }

    /// What an endpoint answers before looking at the request, if anything: it counts the
    /// request, takes the next queued fault (where `takingFaults`), and refuses a token Apple
    /// would refuse (401) before serving the fault.
    private func refusal(of request: Request, keys: JWTKeyCollection, takingFaults: Bool) async -> Response? {
        let fault: Fault? = state.withLock { state in
            state.requests += 1
            return !takingFaults || state.faults.isEmpty ? nil : state.faults.removeFirst()
        }
        guard await authorized(request, keys: keys) else {
            state.withLock { $0.refusedTokens += 1 }
            return Self.json(401, #"{"errorCode": 4010000, "errorMessage": "Unauthorized"}"#)
        }
        guard let fault else { return nil }
        var response = Self.json(fault.status, fault.status == 429
            ? #"{"errorCode": 4290000, "errorMessage": "Rate limit exceeded."}"#
            : #"{"errorCode": 5000000, "errorMessage": "An unknown error occurred."}"#)
        if let retryAfter = fault.retryAfter { response.headers[HTTPField.Name("Retry-After")!] = retryAfter }
        return response
    }

    /// The token checks Apple makes.
    private func authorized(_ request: Request, keys: JWTKeyCollection) async -> Bool {
        guard let header = request.headers[.authorization], header.hasPrefix("Bearer ") else { return false }
        guard let claims = try? await keys.verify(String(header.dropFirst("Bearer ".count)), as: AppStoreServerAPIClaims.self) else { return false }
        return claims.bid == Self.bundleID && claims.iss.value == Self.issuerID
    }

    private static func json(_ status: Int, _ body: String) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        return Response(status: HTTPResponse.Status(code: status), headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: body)))
    }

    static let historyModel: String = {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/models/transactionHistoryResponse.json")
        return (try? String(contentsOf: url, encoding: .utf8)) ?? "{}"
    }()
}

struct FakeAppStoreError: Error, CustomStringConvertible {
    var description: String
}
