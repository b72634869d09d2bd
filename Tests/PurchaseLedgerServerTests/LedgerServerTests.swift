import Foundation
import Synchronization
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import PurchaseLedger
@testable import PurchaseLedgerAppStore
@testable import PurchaseLedgerServer
import Testing
@testable import PurchaseLedgerLMDB
import LedgerTestSupport

/// The `ledger-server` application as its configuration builds it, live on loopback, and the
/// built binary under SIGTERM.
struct LedgerServerTests {
    static let catalogJSON = #"{"products": [{"id": "com.example.tenhints", "type": "consumable", "grants": {"hints": 10}}, {"id": "com.example.hardwords", "type": "nonConsumable"}]}"#

    /// A test server's configuration. Its deadlines for reading a request and for an idle
    /// connection are wide: on two cores loaded by the whole suite a test can sit longer than
    /// the defaults (15 s, 30 s) between two requests on one connection, and the server then
    /// closes it ("I/O on closed channel" at the test's next request, seen in full runs). The
    /// tests of those deadlines set their own.
    static func configuration(in directory: String, port: Int = 0) throws -> ServerConfiguration {
        try catalogJSON.write(toFile: directory + "/catalog.json", atomically: true, encoding: .utf8)
        var configuration = ServerConfiguration(
            ledger: directory + "/ledger", catalog: directory + "/catalog.json",
            bind: .init(host: "127.0.0.1", port: port), keys: TestKeys.configured)
        configuration.limits.requestTimeoutSeconds = 90
        configuration.limits.idleTimeoutSeconds = 600
        return configuration
    }

    @Test func aConfiguredServerIsFilledAndQueriedOnLoopbackThenClosesItsLedger() async throws {
        try await withTemporaryDirectory { directory in
            var logger = Logger(label: "test")
            logger.logLevel = .warning
            let app = try await LedgerServer.application(configuration: try Self.configuration(in: directory), logger: logger)
            try await app.test(.live) { client in
                #expect(try await client.send(.get, "/v1/accounts/ana").status == .unauthorized)
                let outcomes = try await client.post(events: [
                    Lines.added("e1", "ana", payment: "A1", product: "com.example.tenhints"),
                    Lines.purchased("e2", "ana", payment: "A1", transaction: "t1"),
                    Lines.finished("e3", "ana", payment: "A1"),
                ])
                #expect(outcomes.map { $0["position"] as? Int } == [1, 2, 3])
                let projection = try await client.account("ana")
                #expect(projection["balances"] as? [String: Int] == ["hints": 10])
                let health = try await client.send(.get, "/v1/health")
                #expect(try health.object["position"] as? Int == 3)
            }
            // The application's shutdown closed the ledger: it opens again, whole, from the
            // snapshot written on close.
            let reopened = try Ledger.open(at: directory + "/ledger")
            #expect(reopened.position == 3)
            #expect(reopened.statistics().snapshotPosition == 3)
            #expect(try reopened.balances(of: "ana") == ["hints": 10])
            await reopened.close()
        }
    }

    // MARK: Configuration

    @Test(arguments: [
        (#"{"catalog": "c.json"}"#, "missing \"ledger\""),
        (#"{"ledger": "l", "keys": [{"name": "k", "key": "short", "scopes": ["events:write"]}]}"#, "at least 32 characters"),
        (#"{"ledger": "l", "keys": [{"name": "k", "key": "0123456789abcdef0123456789abcdef", "scopes": ["events:delete"]}]}"#, "keys.0.scopes.0"),
        (#"{"ledger": "l", "keys": [{"name": "a", "key": "0123456789abcdef0123456789abcdef", "scopes": ["events:write"]}, {"name": "b", "key": "0123456789abcdef0123456789abcdef", "scopes": ["accounts:read"]}]}"#, "listed twice"),
        (#"{"ledger": "l", "keys": [{"name": "k", "key": "0123456789abcdef0123456789abcdef", "scopes": []}]}"#, "has no scopes"),
        (#"{"ledger": "l", "limits": {"bodyBytes": 0}}"#, "must be positive"),
        (#"{"ledger": "l", "bind": {"port": 70000}}"#, "bind.port"),
        (#"{"ledger": "l", "appStore": {"bundleId": "com.example", "environment": "Production", "trustedRoots": ["root.cer"]}}"#, "appAppleId"),
        (#"{"ledger": "l", "appStore": {"bundleId": "com.example", "environment": "Sandbox", "trustedRoots": []}}"#, "trustedRoots"),
        (#"{"ledger": "l", "appStore": {"bundleId": "com.example", "environment": "Staging", "trustedRoots": ["r"]}}"#, "appStore.environment"),
        (#"{"ledger": "l", "bind": {"host": "0.0.0.0"}, "appStore": {"bundleId": "com.example", "environment": "Xcode", "trustedRoots": []}}"#, "unsigned"),
        (#"{"ledger": "l", "feedPriority": "urgent"}"#, "feedPriority"),
        (#"{"ledger": "l", "checkpoints": {"keyFile": "/nonexistent/checkpoint.key"}}"#, "checkpoints.keyFile"),
        (#"{"ledger": "l", "checkpoints": {"keyFile": "/proc/version"}}"#, "holds no signer key"),
        (#"{"ledger": "l", "checkpoints": {"keyFile": "k", "everySeconds": 0}}"#, "checkpoints.everySeconds"),
        (#"{"ledger": "l", "checkpoints": {"everySeconds": 60}}"#, "checkpoints.keyFile"),
        ("not json", "config.json"),
    ])
    func aBadConfigurationSaysWhatToFix(_ text: String, _ expected: String) async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/config.json"
            try text.write(toFile: path, atomically: true, encoding: .utf8)
            do {
                _ = try ServerConfiguration.load(path: path)
                Issue.record("\(text) was accepted")
            } catch {
                #expect("\(error)".contains(expected), "\(error)")
            }
        }
    }

    @Test func aMissingConfigurationFileIsNamed() {
        #expect(throws: ServerConfigurationError.self) { try ServerConfiguration.load(path: "/nonexistent/ledger-server.json") }
    }

    @Test func defaultsFillWhatTheFileLeavesOut() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/config.json"
            try #"{"ledger": "/var/lib/ledger"}"#.write(toFile: path, atomically: true, encoding: .utf8)
            let configuration = try ServerConfiguration.load(path: path)
            #expect(configuration.bind.host == "127.0.0.1")
            #expect(configuration.bind.port == 8080)
            #expect(configuration.limits.bodyBytes == 1 << 20)
            #expect(configuration.limits.eventsPerRequest == 1000)
            #expect(configuration.keys.isEmpty)
        }
    }

    // MARK: The binary under SIGTERM

    /// An executable of this package, next to the test bundle in the build folder.
    static func binary(_ name: String) -> URL {
        builtExecutable(name)
    }

    /// A TCP port nothing listens on now (the kernel's pick for port 0).
    static func freePort() throws -> Int {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, length) == 0 && getsockname(descriptor, $0, &length) == 0 }
        }
        guard bound else { throw TestFailure("no free port") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// The built `ledger-server` serving a new ledger in `directory` on a free loopback port,
    /// its standard error piped.
    static func launch(in directory: String, logLevel: String) throws -> (process: ChildProcess, port: Int) {
        let port = try freePort()
        try JSONEncoder().encode(try configuration(in: directory, port: port)).write(to: URL(fileURLWithPath: directory + "/config.json"))
        let process = try ChildProcess(binary("ledger-server"), ["--config", directory + "/config.json", "--log-level", logLevel], error: .pipe)
        return (process, port)
    }

    /// Clients append while the server gets SIGTERM: it stops accepting, answers what it took,
    /// commits it, closes LMDB and exits 0; every acknowledged event is in the ledger after.
    @Test func sigtermDrainsInFlightAppendsAndLosesNothingAcknowledged() async throws {
        try await withTemporaryDirectory { directory in
            let (process, port) = try Self.launch(in: directory, logLevel: "warning")
            defer { process.kill() }

            // Up when health answers.
            var up = false
            for _ in 0..<200 where !up {
                let probe = TestClient(host: "127.0.0.1", port: port, configuration: .init(timeout: .seconds(2)))
                probe.connect()
                up = (try? await probe.execute(.init("/v1/health", method: .get, authority: "localhost")))?.status == .ok
                try? await probe.shutdown()
                if !up { try await Task.sleep(for: .milliseconds(50)) }
            }
            try #require(up, "ledger-server did not start")

            let run = ClientsRun()
            try await withThrowingTaskGroup(of: Void.self) { group in
                for client in 0..<8 {
                    group.addTask {
                        var request = 0
                        while true {
                            request += 1
                            let lines = (0..<5).map { Lines.added("c\(client)-\(request)-\($0)", "acct-\(client)", payment: "P\(request)-\($0)", product: "com.example.tenhints") }
                            let connection = TestClient(host: "127.0.0.1", port: port, configuration: .init(timeout: .seconds(60)))
                            connection.connect()
                            var headers = HTTPFields()
                            headers[.authorization] = "Bearer \(TestKeys.writer)"
                            headers[.contentType] = "application/x-ndjson"
                            let response = try? await connection.execute(.init(
                                "/v1/events", method: .post, authority: "localhost", headers: headers,
                                body: ByteBuffer(string: lines.joined(separator: "\n"))))
                            try? await connection.shutdown()
                            guard let response, response.status == .ok, let body = response.body,
                                  let outcomes = try? JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [[String: Any]]
                            else {
                                // Refused or cut off: only once the server was told to stop.
                                let afterSignal = run.signalled.load(ordering: .acquiring)
                                #expect(afterSignal, "a request failed before SIGTERM")
                                return
                            }
                            for (line, outcome) in zip(lines, outcomes) {
                                let position = try #require(outcome["position"] as? Int)
                                run.acknowledged.withLock { $0.append((line, position)) }
                            }
                        }
                    }
                }
                group.addTask {
                    // Signal mid-stream: once appends are being answered (a loaded machine may
                    // take seconds for the first), then a little later.
                    let deadline = ContinuousClock.now + .seconds(60)
                    while run.acknowledged.withLock({ $0.isEmpty }), ContinuousClock.now < deadline {
                        try await Task.sleep(for: .milliseconds(20))
                    }
                    try await Task.sleep(for: .milliseconds(300))
                    run.signalled.store(true, ordering: .releasing)
                    process.send(SIGTERM)
                }
                try await group.waitForAll()
            }
            let stderr = String(decoding: process.error?.readDataToEndOfFile() ?? Data(), as: UTF8.self)
            let termination = await process.exit()
            #expect(termination == .exited(0), "\(termination): \(stderr)")

            let ledger = try Ledger.open(at: directory + "/ledger")
            let answered = run.acknowledged.withLock { $0 }
            #expect(answered.count > 0)
            var log: [Event] = []
            for try await record in ledger.records() { log.append(record.event) }
            for (line, position) in answered {
                let sent = try Event(jsonLine: line)
                #expect(position <= log.count && log[position - 1] == sent)
            }
            await ledger.close()
        }
    }
}

/// What the clients of the SIGTERM test saw.
private final class ClientsRun: Sendable {
    /// (event line, position) of every event the server acknowledged as appended.
    let acknowledged = Mutex<[(String, Int)]>([])
    let signalled = Atomic<Bool>(false)
}
