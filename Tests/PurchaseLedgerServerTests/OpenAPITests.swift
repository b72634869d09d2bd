import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import PurchaseLedger
import PurchaseLedgerLocation
@testable import PurchaseLedgerServer
import LedgerTestSupport
import Testing

/// `docs/openapi.yaml` against the running server: schemathesis (PyPI; not this project's code)
/// reads the document and fuzzes every operation with what it generates from it, valid and
/// invalid, with a key of every scope. Every answer must be one the document lists for the
/// operation, with its content type, headers and body schema; none is a 5xx; and the ledger is
/// unchanged by all of it (the document's own examples are events the ledger already holds,
/// answered `duplicate`, and nothing else it sends is a valid event).
struct OpenAPITests {
    static let document = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("docs/openapi.yaml").path
    static let scripts = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Scripts").path
    static let everyScope = "fuzz-key-0123456789abcdef0123456789abcd"

    /// The Python with schemathesis (tools/test's virtual environment), when there is one.
    static func python() async -> String? {
        await LedgerTestSupport.python(importing: "schemathesis")
    }

    @Test func everyAnswerIsOneTheDocumentDescribesAndNothingRefusedChangesTheLedger() async throws {
        guard let python = await Self.python() else {
            try #require(!AppleVerifier.isRequired, "schemathesis is not installed (tools/test installs it)")
            return
        }
        try await withTemporaryDirectory { directory in
            var configuration = try LedgerServerTests.configuration(in: directory, port: try LedgerServerTests.freePort())
            // Every scope but forgetting, whose answer changes the ledger by design: its route
            // is fuzzed for the 403 a key without it gets (RouteTests forgets for real).
            configuration.keys.append(.init(name: "fuzz", key: Self.everyScope, scopes: Scope.allCases.filter { $0 != .accountsForget }))
            // The App Store routes mounted, verifying with a root of the test fixtures.
            configuration.appStore = .init(
                bundleId: "com.example", appAppleId: 1234, environments: [.sandbox],
                trustedRoots: [Self.scripts + "/../Fixtures/certs/testCA.der"],
                unattributedNotifications: directory + "/unattributed.jsonl")
            // The built server in a process of its own: answers are timed, and in this process
            // other suites' tests may hold Swift concurrency's threads for seconds.
            let server = try await BuiltServer.start(configuration, in: directory)
            defer { server.kill() }
            let port = configuration.bind.port
            // The events of the document's examples, so that sending them changes nothing.
            let seeded = await BuiltServer.post([
                #"{"id":"e1","type":"paymentAdded","account":"ana","at":"2026-03-14T08:00:00Z","payment":"A1","product":"com.example.tenhints"}"#,
                #"{"id":"e2","type":"transactionUpdated","account":"ana","at":"2026-03-14T08:00:01Z","payment":"A1","state":"purchased","transaction":"t1"}"#,
            ], port: port)
            try #require(seeded == .ok, "seeding the examples' events answered \(seeded.map { "\($0)" } ?? "nothing")")

            let fuzz = try ChildProcess(
                python, [Self.scripts + "/openapi_fuzz.py", Self.document, "http://127.0.0.1:\(port)", Self.everyScope, directory],
                output: .file(directory + "/schemathesis.txt"), error: .file(directory + "/schemathesis.err"))
            let termination = await fuzz.exit()
            let output = (try? String(contentsOfFile: directory + "/schemathesis.txt", encoding: .utf8)) ?? ""
            let errors = (try? String(contentsOfFile: directory + "/schemathesis.err", encoding: .utf8)) ?? ""
            #expect(termination == .exited(0), "schemathesis \(termination):\n\(output.suffix(12000))\n\(errors.suffix(2000))")

            // Nothing it sent was appended.
            let probe = TestClient(host: "127.0.0.1", port: port, configuration: .init(timeout: .seconds(60)))
            probe.connect()
            defer { Task { try? await probe.shutdown() } }
            let health = try await probe.execute(.init("/v1/health", method: .get, authority: "localhost"))
            let text = health.body.map { String(buffer: $0) } ?? ""
            #expect(text.contains("\"position\": 2}"), "\(text)")
        }
    }
}
