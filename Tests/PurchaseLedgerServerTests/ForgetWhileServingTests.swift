import Foundation
import HTTPTypes
import HummingbirdTesting
import Logging
import PurchaseLedger
@testable import PurchaseLedgerAppStore
@testable import PurchaseLedgerServer
import Synchronization
import Testing
import LedgerTestSupport

/// A customer forgotten through the running server leaves nothing of hers in anything the
/// server writes or answers afterwards (issue 41, points 2 and 3): not the feed's window (a page
/// from the start, a page after a cursor naming her), not a stream opened before the forget,
/// not a webhook delivery, not a log line, not the audit file of notifications whose signed
/// payload carried her token, not a file of the ledger once the server restarted (which
/// rewrites the data file). Her id has a quote, a slash and accented letters, so that each of
/// its encodings (JSON-escaped, base64url in the feed's cursors, inside a JWS) differs from it;
/// every one is searched (`Leaks`).
struct ForgetWhileServingTests {
    static let alice = "ali\"ce/\u{E9}t\u{E9}"
    static let token = "9f1c2b3a-4d5e-4f60-8a7b-1c2d3e4f5a6b"
    static let customer = "704293114472"
    static let names = [alice, token, customer]

    @Test func aForgottenCustomerIsInNothingTheServerWritesOrAnswersAfterward() async throws {
        guard let python = await WebhookTests.python() else {
            try #require(!AppleVerifier.isRequired, "standardwebhooks is not installed (tools/test installs it)")
            return
        }
        let signer = try TestAppStoreSigner()
        try await withTemporaryDirectory { directory in
            // Her changes (positions 1 to 4) are refused, and tried again and again: at the forget,
            // the endpoint's delivery holds them, her name in their bodies.
            let receiver = try await WebhookReceiver.start(python: python, rules: #"{"failPositions": [1, 2, 3, 4]}"#, in: directory)
            defer { receiver.stop() }
            var configuration = try LedgerServerTests.configuration(in: directory)
            configuration.deliverWebhooks(toPort: receiver.port, maxAttempts: 1000)
            // An attempt that hangs waits a minute for its answer (below: her last one before the forget).
            configuration.webhookTimeoutSeconds = 60
            let root = directory + "/root.der"
            try Data(try #require(Data(base64Encoded: try TestAppStoreSigner.der(signer.root)))).write(to: URL(fileURLWithPath: root))
            configuration.appStore = .init(bundleId: "com.example", appAppleId: 41234, environments: [.sandbox], trustedRoots: [root])
            let logs = CapturedLogs.Record()
            var logger = Logger(label: "test") { _ in CapturedLogs(record: logs) }
            logger.logLevel = .debug
            let streamed = directory + "/stream.txt"
            let app = try await LedgerServer.application(configuration: configuration, logger: logger)
            try await app.test(.live) { live in
                let client = PatientClient(port: try #require(live.port))
                let at = Timestamp(seconds: 1_767_225_600)
                // Her purchase from the device, Apple's report of it (its token and her customer id)
                // from a back office, and Bob's purchase.
                var report = StoreTransaction(transaction: "900", product: "com.example.hardwords", purchasedAt: at)
                (report.appAccountToken, report.appTransaction) = (Self.token, Self.customer)
                var renewal = RenewalInfo(originalTransaction: "900")
                (renewal.appAccountToken, renewal.appTransaction) = (Self.token, Self.customer)
                #expect(try await client.post(events: [
                    Event.paymentAdded(id: "a1", account: Self.alice, at: at, payment: "p1", product: "com.example.hardwords").jsonLine,
                    Event.transactionUpdated(id: "a2", account: Self.alice, at: at, TransactionUpdated(payment: "p1", state: .purchased, transaction: "900")).jsonLine,
                ]).allSatisfy { $0["outcome"] as? String == "appended" })
                #expect(try await client.post(events: [
                    Event.storeTransaction(id: "bo-1", account: Self.alice, signedAt: at, report).jsonLine,
                    Event.renewalInfo(id: "bo-2", account: Self.alice, signedAt: at, renewal).jsonLine,
                ], key: TestKeys.backOffice).allSatisfy { $0["outcome"] as? String == "appended" })
                _ = try await client.post(events: [Lines.added("b1", "bob", payment: "B1", product: "com.example.tenhints")])
                // Apple's notification of her transaction under her token: the token's account may
                // not hold it, so the report is refused and kept in the audit file, JWS and all.
                let notified = try await client.send(.post, "/v1/appstore/notifications", body: try AppStoreNotificationTests.notification(
                    "DID_CHANGE_RENEWAL_STATUS", uuid: "5b3f0c2a-0000-4000-8000-000000000001",
                    transaction: AppStoreNotificationTests.transaction([
                        "transactionId": "900", "originalTransactionId": "900", "appAccountToken": Self.token,
                        "appTransactionId": Self.customer, "productId": "com.example.hardwords",
                    ]), signer: signer))
                #expect(notified.status == .ok)
                let audit = directory + "/ledger/unattributed-notifications.jsonl"
                #expect(!Leaks.find([Self.token], in: try [UInt8](Data(contentsOf: URL(fileURLWithPath: audit)))).isEmpty)

                // A stream open from the start, read into a file as it comes.
                let reader = try ChildProcess("/usr/bin/env", ["python3", "-c", Self.streamReader(port: client.port), streamed])
                defer { reader.kill() }
                // Until Bob's change is delivered, her first tried twice (her later ones wait behind
                // it: in order per account), and her three (her renewal info changes no answer) and
                // Bob's one streamed.
                try await Self.waitFor("Bob's change delivered") { WebhookTests.deliveries(receiver.record).filter { $0.status == 204 }.count == 1 }
                try await Self.waitFor("her first change tried twice") {
                    WebhookTests.deliveries(receiver.record).filter { $0.position == 1 }.count >= 2
                }
                try await Self.waitFor("the stream caught up") { ((try? String(contentsOfFile: streamed, encoding: .utf8)) ?? "").components(separatedBy: "\nid: ").count >= 5 }
                // The search finds her before: in the feed, the stream, a delivery, the log.
                let page = try await client.send(.get, "/v1/changes?after=0&limit=100", key: TestKeys.feed).body
                #expect(!Leaks.find([Self.alice], in: Array(page.utf8)).isEmpty)
                #expect(!Leaks.find([Self.alice], in: try Self.bytes(streamed)).isEmpty)
                #expect(!Leaks.find([Self.alice], in: try Self.bytes(receiver.record)).isEmpty)
                #expect(!Leaks.find([Self.alice], in: Array(logs.text.utf8)).isEmpty, "the failed deliveries were logged with her change's id")
                let oldCursor = FeedCursor(position: 2, account: Self.alice).description
                // Her next attempt is recorded and then never answered: at the forget, the one
                // delivery of hers in flight began before it, and no retry of hers can begin before
                // the forget commits, however long that takes on a loaded machine (a retry landing
                // between this point and the commit is no leak, yet the search would count it).
                let hang = try JSONSerialization.data(withJSONObject: ["failPositions": [1, 2, 3, 4], "hangAccounts": [Self.alice: 1000]])
                try receiver.setRules(String(decoding: hang, as: UTF8.self))
                try await Self.waitFor("her attempt hanging") {
                    WebhookTests.deliveries(receiver.record).contains { $0.account == Self.alice && $0.status == 0 }
                }

                let (logged, delivered, streamedBefore) = (logs.count, try Self.bytes(receiver.record).count, try Self.bytes(streamed).count)
                let encoded = Self.alice.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
                let forgotten = try await client.send(.delete, "/v1/accounts/\(encoded)?requestedBy=ticket-9", key: TestKeys.forgetter)
                #expect(forgotten.status == .ok, "\(forgotten.body)")

                // More happens: Bob buys, time passes; what the server writes of it is searched.
                _ = try await client.post(events: [
                    Lines.purchased("b2", "bob", payment: "B1", transaction: "t-b"), Lines.finished("b3", "bob", payment: "B1"),
                ])
                try await Self.waitFor("Bob's new changes delivered") { WebhookTests.deliveries(receiver.record).filter { $0.status == 204 }.count == 3 }
                // And her changes tried again since the forget (as the pseudonym's).
                try await Self.waitFor("her changes tried after the forget") {
                    let since = String(decoding: try Self.bytes(receiver.record).dropFirst(delivered), as: UTF8.self)
                    return since.split(separator: "\n").contains { line in
                        (try? JSONDecoder().decode(WebhookTests.Delivery.self, from: Data(line.utf8))).map { ($0.position ?? 0) <= 3 } ?? false
                    }
                }
                try await Self.waitFor("the stream caught up again") { ((try? String(contentsOfFile: streamed, encoding: .utf8)) ?? "").components(separatedBy: "\nid: ").count >= 7 }
                var answers: [String] = [forgotten.body]
                answers.append(try await client.send(.get, "/v1/changes?after=0&limit=1000", key: TestKeys.feed).body)
                let afterOld = try await client.send(.get, "/v1/changes?after=\(oldCursor)&limit=1000", key: TestKeys.feed)
                #expect(afterOld.status == .ok)
                #expect(try (afterOld.object["changes"] as? [[String: Any]])?.isEmpty == false, "a cursor that named her is lowered, not refused")
                answers.append(afterOld.body)
                // A cursor naming her past the log's end: nothing after it, and the answer's `next`
                // does not echo it.
                let head = try #require(UInt64(exactly: try await client.send(.get, "/v1/health").object["position"] as? Int ?? 0))
                let atEnd = FeedCursor(position: head + 1, account: Self.alice)
                answers.append(try await client.send(.get, "/v1/changes?after=\(atEnd.description)&limit=1000", key: TestKeys.feed).body)
                answers.append(try await client.send(.get, "/v1/accounts/bob", key: TestKeys.reader).body)
                answers.append(try await client.send(.get, "/v1/accounts/forgotten%2F1/history", key: TestKeys.reader).body)
                answers.append(try await client.send(.get, "/metrics", key: TestKeys.metrics).body)
                for answer in answers { #expect(Leaks.find(Self.names, in: Array(answer.utf8)) == [], "\(answer.prefix(300))") }
                #expect(Leaks.find(Self.names, in: Array(try Self.bytes(streamed).dropFirst(streamedBefore))) == [], "the stream after the forget")
                #expect(Leaks.find(Self.names, in: Array(try Self.bytes(receiver.record).dropFirst(delivered))) == [], "deliveries after the forget")
                for line in logs.all.dropFirst(logged) {
                    #expect(Leaks.find(Self.names, in: Array(line.utf8)) == [], "log line after the forget: \(line)")
                }
                // The ledger's other files (its data file is rewritten at the next start).
                for file in try FileManager.default.contentsOfDirectory(atPath: directory + "/ledger") where file != "data.mdb" {
                    #expect(Leaks.find(Self.names, in: try Self.bytes(directory + "/ledger/" + file)) == [], "\(file)")
                }
            }
            // Restarted, the server rewrites the data file first: no file of the ledger names her.
            var quiet = Logger(label: "quiet")
            quiet.logLevel = .critical
            let restarted = try await LedgerServer.application(configuration: configuration, logger: quiet)
            try await restarted.test(.live) { live in
                let health = try await PatientClient(port: try #require(live.port)).send(.get, "/v1/health")
                #expect(health.status == .ok)
            }
            let leftInFiles = try Leaks.find(Self.names, inFilesUnder: directory + "/ledger")
            #expect(leftInFiles == [])
        }
    }

    static func bytes(_ path: String) throws -> [UInt8] {
        (try? [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))) ?? []
    }

    static func waitFor(_ what: String, _ condition: () async throws -> Bool) async throws {
        for _ in 0..<1500 {
            if try await condition() { return }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw TestFailure("timed out waiting for \(what)")
    }

    /// Reads `GET /v1/changes/stream` from the start and appends what it receives to the file
    /// `argv[1]`, line by line, as it comes.
    static func streamReader(port: Int) -> String {
        """
        import http.client, sys
        connection = http.client.HTTPConnection("127.0.0.1", \(port), timeout=120)
        connection.request("GET", "/v1/changes/stream?after=0", headers={"Authorization": "Bearer \(TestKeys.feed)"})
        response = connection.getresponse()
        with open(sys.argv[1], "ab") as output:
            while True:
                line = response.readline()
                if not line: break
                output.write(line)
                output.flush()
        """
    }
}

/// What the server logged, each line with its metadata, in order: a handler per logger (its
/// metadata its own), one record of lines for all.
struct CapturedLogs: LogHandler {
    final class Record: Sendable {
        let lines = Mutex<[String]>([])
    }

    let record: Record
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    init(record: Record) {
        self.record = record
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let all = metadata.merging(event.metadata ?? [:]) { $1 }
        let text = "\(event.level) \(event.message) " + all.map { "\($0.key)=\($0.value)" }.sorted().joined(separator: " ")
        record.lines.withLock { $0.append(text) }
    }
}

extension CapturedLogs.Record {
    var all: [String] { lines.withLock { $0 } }
    var count: Int { lines.withLock { $0.count } }
    var text: String { all.joined(separator: "\n") }
}
