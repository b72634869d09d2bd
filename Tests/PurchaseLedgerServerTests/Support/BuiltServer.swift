import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
@testable import PurchaseLedgerServer
import LedgerTestSupport

/// The built `ledger-server`, in a process of its own on a loopback port.
enum BuiltServer {
    /// Starts the server in `directory` with `configuration` (written to the file `name` there)
    /// and waits for its health to answer.
    static func start(_ configuration: ServerConfiguration, in directory: String, name: String = "config.json") async throws -> ChildProcess {
        let path = directory + "/" + name
        try JSONEncoder().encode(configuration).write(to: URL(fileURLWithPath: path))
        let process = try ChildProcess(LedgerServerTests.binary("ledger-server"), ["--config", path, "--log-level", "error"])
        for _ in 0..<400 {
            let probe = TestClient(host: "127.0.0.1", port: configuration.bind.port, configuration: .init(timeout: .seconds(2)))
            probe.connect()
            let up = (try? await probe.execute(.init("/v1/health", method: .get, authority: "localhost")))?.status == .ok
            try? await probe.shutdown()
            if up { return process }
            try await Task.sleep(for: .milliseconds(25))
        }
        process.kill()
        throw TestFailure("ledger-server did not start")
    }

    /// Posts JSON Lines with the writer's key; the answer's status, nil when none came. The wait is long: a
    /// durable commit on a machine running every suite at once can take seconds (a server
    /// killed meanwhile fails the request at once, when its socket closes).
    static func post(_ lines: [String], port: Int) async -> HTTPResponse.Status? {
        let client = TestClient(host: "127.0.0.1", port: port, configuration: .init(timeout: .seconds(60)))
        client.connect()
        defer { Task { try? await client.shutdown() } }
        var headers = HTTPFields()
        headers[.authorization] = "Bearer \(TestKeys.writer)"
        headers[.contentType] = "application/x-ndjson"
        let response = try? await client.execute(.init(
            "/v1/events", method: .post, authority: "localhost", headers: headers, body: ByteBuffer(string: lines.joined(separator: "\n"))))
        return response?.status
    }
}
