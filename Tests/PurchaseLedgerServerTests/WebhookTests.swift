import Foundation
import HTTPTypes
import HummingbirdTesting
import Logging
import PurchaseLedger
import PurchaseLedgerLocation
@testable import PurchaseLedgerServer
import LedgerTestSupport
import Testing

/// Webhooks (docs/FEEDS.md) delivered by the application `ledger-server` builds to a receiver
/// on loopback that verifies every delivery with Python's `standardwebhooks` package: at least
/// once, in order per account, retried, and parked after the last attempt while the account's
/// later changes go on.
struct WebhookTests {
    static let secret = "whsec_" + Data((0..<32).map { UInt8($0 &* 7 &+ 3) }).base64EncodedString()
    static let receiver = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Scripts/webhook_receiver.py").path

    /// The Python with `standardwebhooks` (tools/test's virtual environment), when there is one.
    static func python() async -> String? {
        await LedgerTestSupport.python(importing: "standardwebhooks")
    }

    struct Delivery: Decodable {
        var id: String?
        var webhookId: String?
        var account: String?
        var position: Int?
        var attempt: Int?
        var status: Int?
        var body: String?
        var invalid: String?
        /// A request whose sender closed the connection before its body ended ("N of M bytes"):
        /// only a killed server, or an attempt cancelled because its lease passed, leaves one.
        var cut: String?
        /// When the receiver got it (seconds since 1970).
        var at: Double?
    }

    static func deliveries(_ path: String) -> [Delivery] {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { try? JSONDecoder().decode(Delivery.self, from: Data($0.utf8)) }
    }

    /// At either `feedPriority`: on the idle class's threads (the default) and on the server's own.
    @Test(arguments: [FeedPriority.background, .normal])
    func everyChangeReachesAVerifyingReceiverInOrderAndOneAlwaysRefusedIsParked(at priority: FeedPriority) async throws {
        guard let python = await Self.python() else {
            try #require(!AppleVerifier.isRequired, "standardwebhooks is not installed (tools/test installs it)")
            return
        }
        try await withTemporaryDirectory { directory in
            // Position 5 (doomed's first change) is always refused; fl's changes twice each.
            let receiver = try await WebhookReceiver.start(
                python: python, rules: #"{"failPositions": [5], "flakyAccounts": {"fl": 2}}"#, in: directory)
            defer { receiver.stop() }
            let (record, receiverPort) = (receiver.record, receiver.port)

            var configuration = try LedgerServerTests.configuration(in: directory)
            configuration.deliverWebhooks(toPort: receiverPort, maxAttempts: 3)
            configuration.feedPriority = priority
            // Not a test of leases (SharedLedgerServerTests and WebhookKillTests are): one that
            // outlasts the test, so that a machine too loaded to renew it in time (a whole CI
            // run on two cores) cannot end a delivery session midway and start its attempts again (a
            // restarted session counts its attempts from one, and the receiver saw five).
            configuration.webhookLeaseSeconds = 600
            var logger = Logger(label: "test")
            logger.logLevel = .error
            let app = try await LedgerServer.application(configuration: configuration, logger: logger)
            try await app.test(.live) { client in
                _ = try await client.post(events: [
                    Lines.added("e1", "ana", payment: "A1", product: "com.example.hardwords"),
                    Lines.purchased("e2", "ana", payment: "A1", transaction: "t1"),
                    Lines.added("e3", "fl", payment: "F1", product: "com.example.tenhints"),
                    Lines.finished("e4", "ana", payment: "A1"),
                    Lines.added("e5", "doomed", payment: "D1", product: "com.example.tenhints"),
                    Lines.purchased("e6", "doomed", payment: "D1", transaction: "t2"),
                    Lines.purchased("e7", "fl", payment: "F1", transaction: "t3"),
                ])
                // The feed as derived so far, page after page: a long poll answers as soon as
                // one change is there, and the idle class may derive the rest later.
                var expected: [String] = []
                var cursor = "0"
                for _ in 0..<12 where expected.count < 7 {
                    let page = try await client.send(.get, "/v1/changes?after=\(cursor)&limit=100&wait=5", key: TestKeys.feed).object
                    expected += try #require(page["changes"] as? [[String: Any]]).compactMap { $0["id"] as? String }
                    cursor = page["next"] as? String ?? cursor
                }
                #expect(expected.count == 7)

                // Until every change was answered 2xx, or parked (position 5).
                var delivered: [Delivery] = []
                for _ in 0..<1500 {
                    delivered = Self.deliveries(record)
                    let acknowledged = Set(delivered.filter { $0.status == 204 }.compactMap(\.id))
                    let parkedTries = delivered.filter { $0.position == 5 }.count
                    if acknowledged.count == 6, parkedTries == 3 { break }
                    try await Task.sleep(for: .milliseconds(20))
                }
                #expect(delivered.allSatisfy { $0.invalid == nil && $0.cut == nil }, "every delivery whole and verified: \(delivered.compactMap { $0.invalid ?? $0.cut })")
                let acknowledged = Set(delivered.filter { $0.status == 204 }.compactMap(\.id))
                #expect(acknowledged == Set(expected).subtracting([expected[4]]))
                // The same change: the same id (header and body) and the same body on every attempt.
                for (id, attempts) in Dictionary(grouping: delivered.filter { $0.id != nil }, by: { $0.id! }) {
                    #expect(Set(attempts.compactMap(\.body)).count == 1, "\(id)")
                    #expect(attempts.allSatisfy { $0.webhookId == id })
                }
                // In order per account: an account's change is first sent after its earlier ones were done.
                for (account, attempts) in Dictionary(grouping: delivered, by: { $0.account ?? "" }) {
                    let firsts = attempts.filter { $0.attempt == 1 }.compactMap(\.position)
                    #expect(firsts == firsts.sorted(), "\(account): \(firsts)")
                }
                #expect(delivered.filter { $0.account == "fl" && $0.status == 204 }.allSatisfy { $0.attempt == 3 })
                // Parked after the last of three attempts; the account's later change went on.
                #expect(delivered.filter { $0.position == 5 }.map(\.status) == [500, 500, 500])
                #expect(delivered.contains { $0.position == 6 && $0.status == 204 })
                // The endpoint's metrics are the server's (GET /metrics); the last change is
                // counted done just after the receiver answered it.
                var metrics = ""
                for _ in 0..<250 {
                    metrics = try await client.send(.get, "/metrics", key: TestKeys.metrics).body
                    if metrics.contains(#"ledger_webhook_done_total{endpoint="receiver"} 7"#) { break }
                    try await Task.sleep(for: .milliseconds(20))
                }
                #expect(metrics.contains(#"ledger_webhook_parked_total{endpoint="receiver"} 1"#), "\(metrics)")
                #expect(metrics.contains(#"ledger_webhook_done_total{endpoint="receiver"} 7"#), "\(metrics)")
                #expect(metrics.contains(#"ledger_webhook_failures_total{endpoint="receiver"} 7"#), "\(metrics)")
            }
            // What was parked is in the ledger, with its last error; the checkpoint is past it.
            do {
                let log = try LedgerLog.open(location: directory + "/ledger")
                defer { log.close() }
                let progress = try log.feedStates(prefix: "webhooks/receiver/progress")
                let checkpoint = try JSONSerialization.jsonObject(with: Data(try #require(progress.first?.value))) as? [String: Any]
                #expect(checkpoint?["checkpoint"] as? String == "7.Zmw")
            }
            let ledgerTool = builtExecutable("ledger")
            let listed = try await awaitCommand(ledgerTool, ["webhooks", "parked", "-j", directory + "/ledger"])
            #expect(listed.status == 0, "\(listed.error)")
            let parked = listed.text.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            #expect(parked.map { $0["id"] as? String } == ["5.ZG9vbWVk"])
            #expect(parked.first?["attempts"] as? Int == 3)
            #expect(parked.first?["error"] as? String == "HTTP 500")

            // Sent again once the endpoint accepts it: asked for by the tool, sent by the next server.
            #expect(try await awaitCommand(ledgerTool, ["webhooks", "retry", "--endpoint", "receiver", "--all", directory + "/ledger"]).status == 0)
            #expect(try await awaitCommand(ledgerTool, ["webhooks", "parked", "-j", directory + "/ledger"]).text.isEmpty)
            try receiver.setRules("{}")
            let again = try await LedgerServer.application(configuration: configuration, logger: logger)
            try await again.test(.live) { _ in
                for _ in 0..<500 {
                    if Self.deliveries(record).contains(where: { $0.position == 5 && $0.status == 204 }) { break }
                    try await Task.sleep(for: .milliseconds(20))
                }
            }
            let retried = Self.deliveries(record).filter { $0.position == 5 }
            #expect(retried.map(\.status) == [500, 500, 500, 204])
            // Nothing done before was sent again by the second server.
            #expect(Self.deliveries(record).filter { $0.status == 204 }.count == 7)
        }
    }
    /// The endpoint is down while changes are appended, then hangs without answering, trickles
    /// a 2xx answer's body, or answers slowly: once it is back every change is acknowledged, in
    /// order per account; a hung attempt is given up after `webhookTimeoutSeconds` and retried;
    /// a 2xx head acknowledges however slowly its body comes, and holds up none of the account's
    /// later changes.
    @Test func anEndpointDownHangingOrTricklingGetsEveryChangeOnceItIsBack() async throws {
        guard let python = await Self.python() else {
            try #require(!AppleVerifier.isRequired, "standardwebhooks is not installed (tools/test installs it)")
            return
        }
        try await withTemporaryDirectory { directory in
            let receiverPort = try LedgerServerTests.freePort()
            var configuration = try LedgerServerTests.configuration(in: directory)
            configuration.deliverWebhooks(toPort: receiverPort, maxAttempts: 1000)
            // Long enough for the trickled answer's head to arrive on a loaded machine, where
            // delivery runs in the idle class (1 s once missed it in CI, and the change was sent
            // again); the hanging attempts wait it out.
            configuration.webhookTimeoutSeconds = 4
            var logger = Logger(label: "test")
            logger.logLevel = .error
            let app = try await LedgerServer.application(configuration: configuration, logger: logger)
            try await app.test(.live) { client in
                // Nothing listens yet: every attempt is refused a connection.
                _ = try await client.post(events: [
                    Lines.added("e1", "h", payment: "H1", product: "com.example.tenhints"),
                    Lines.added("e2", "t", payment: "T1", product: "com.example.tenhints"),
                    Lines.added("e3", "s", payment: "S1", product: "com.example.tenhints"),
                    Lines.purchased("e4", "t", payment: "T1", transaction: "t1"),
                    Lines.purchased("e5", "h", payment: "H1", transaction: "t2"),
                    Lines.purchased("e6", "s", payment: "S1", transaction: "t3"),
                ])
                try await Task.sleep(for: .milliseconds(800))
                let receiver = try await WebhookReceiver.start(
                    python: python, rules: #"{"hangAccounts": {"h": 1}, "trickleAccounts": {"t": 1}, "slowAccounts": {"s": 0.3}}"#,
                    in: directory, port: receiverPort)
                defer { receiver.stop() }
                var delivered: [Delivery] = []
                for _ in 0..<3000 {
                    delivered = receiver.deliveries
                    if Set(delivered.filter { [200, 204].contains($0.status) }.compactMap(\.id)).count == 6 { break }
                    try await Task.sleep(for: .milliseconds(20))
                }
                #expect(delivered.allSatisfy { $0.invalid == nil && $0.cut == nil }, "\(delivered.compactMap { $0.invalid ?? $0.cut })")
                let acknowledged = delivered.filter { [200, 204].contains($0.status) }
                #expect(Set(acknowledged.compactMap(\.position)) == [1, 2, 3, 4, 5, 6], "\(delivered.map { ($0.position, $0.status) })")
                for (account, attempts) in Dictionary(grouping: delivered, by: { $0.account ?? "" }) {
                    let firsts = attempts.filter { $0.attempt == 1 }.compactMap(\.position)
                    #expect(firsts == firsts.sorted(), "\(account): \(firsts)")
                }
                // Each of h's changes hung once, then was acknowledged on the next attempt (and,
                // on a machine so loaded that the answer's head came after the attempt's
                // timeout, once more: at least once).
                for position in [1, 5] {
                    let statuses = delivered.filter { $0.position == position }.map(\.status)
                    #expect(statuses.first == 0 && statuses.count >= 2 && statuses.dropFirst().allSatisfy { $0 == 204 }, "\(position): \(statuses)")
                }
                // t's first change was acknowledged by the head of an answer whose body takes
                // 200 s, and its next change came after the attempt's timeout (4 s; a loaded
                // machine's idle class may take seconds more), long before the body could end. (On
                // a machine so loaded that the head came after the attempt's timeout, the change
                // is sent once more, acknowledged then: at least once, as for h. Seen once in CI.)
                let trickledStatuses = delivered.filter { $0.position == 2 }.map(\.status)
                #expect(trickledStatuses.first == 200 && trickledStatuses.dropFirst().allSatisfy { $0 == 204 }, "\(trickledStatuses)")
                let trickled = try #require(delivered.first { $0.position == 2 }?.at)
                let next = try #require(delivered.first { $0.position == 4 }?.at)
                #expect(next - trickled < 60, "t's next change waited \(next - trickled) s for a trickled body")
                #expect(delivered.filter { $0.account == "s" }.allSatisfy { $0.status == 204 })
            }
        }
    }
}
