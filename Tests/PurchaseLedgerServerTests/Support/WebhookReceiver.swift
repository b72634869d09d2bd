import Foundation
import LedgerTestSupport
@testable import PurchaseLedgerServer

/// `Scripts/webhook_receiver.py` on a loopback port: it verifies every delivery with Python's
/// `standardwebhooks` and records each request as a JSON line in `record`; `rules` (JSON, read
/// at each request) says which deliveries it refuses.
final class WebhookReceiver: Sendable {
    let port: Int
    let record: String
    let rules: String
    private let child: ChildProcess

    private init(port: Int, record: String, rules: String, child: ChildProcess) {
        self.port = port
        self.record = record
        self.rules = rules
        self.child = child
    }

    /// Starts the receiver with `python` (one that has `standardwebhooks`), writing its files in
    /// `directory`, on `port` or one it chooses, and waits until it listens.
    static func start(python: String, rules: String, in directory: String, port: Int? = nil) async throws -> WebhookReceiver {
        let record = directory + "/deliveries.jsonl"
        let rulesPath = directory + "/rules.json"
        let portFile = directory + "/port"
        try? FileManager.default.removeItem(atPath: portFile)
        try rules.write(toFile: rulesPath, atomically: true, encoding: .utf8)
        let child = try ChildProcess(
            python, [WebhookTests.receiver, WebhookTests.secret, record, rulesPath, portFile] + (port.map { ["\($0)"] } ?? []))
        for _ in 0..<500 {
            if let port = (try? String(contentsOfFile: portFile, encoding: .utf8)).flatMap({ Int($0) }) {
                return WebhookReceiver(port: port, record: record, rules: rulesPath, child: child)
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        child.kill()
        throw TestFailure("the webhook receiver did not start")
    }

    /// What it received so far, in order.
    var deliveries: [WebhookTests.Delivery] { WebhookTests.deliveries(record) }

    /// Rules for the requests from now on.
    func setRules(_ rules: String) throws {
        try rules.write(toFile: self.rules, atomically: true, encoding: .utf8)
    }

    func stop() { child.kill() }
}

extension ServerConfiguration {
    /// Webhooks to the test receiver on `port` (the endpoint "receiver"), the first retry after
    /// 50 ms. The idle timeout is ten minutes: a test's client keeps one connection, idle while
    /// it watches the receiver's record, and on a loaded machine (the whole suite on two cores)
    /// that wait can pass the default 30 s: the server then closes the connection and the
    /// test's next request fails ("I/O on closed channel", seen once in a full run).
    mutating func deliverWebhooks(toPort port: Int, maxAttempts: Int) {
        webhooks = [.init(name: "receiver", url: "http://127.0.0.1:\(port)/hook", secret: WebhookTests.secret, maxAttempts: maxAttempts)]
        webhookFirstRetrySeconds = 0.05
        limits.idleTimeoutSeconds = 600
    }
}
