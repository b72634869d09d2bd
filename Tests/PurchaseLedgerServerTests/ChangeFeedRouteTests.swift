import Foundation
import HTTPTypes
import HummingbirdTesting
import Logging
import NIOCore
import PurchaseLedger
@testable import PurchaseLedgerServer
import LedgerTestSupport
import Testing

/// The change feed over HTTP (docs/FEEDS.md), on the application `ledger-server` builds, live
/// on loopback: pages, a long poll, server-sent events resumed with `Last-Event-ID`, and reading
/// one's own write with `minPosition`.
struct ChangeFeedRouteTests {
    static func changes(_ answer: Answer) throws -> (ids: [String], accounts: [String], next: String) {
        let object = try answer.object
        let changes = try #require(object["changes"] as? [[String: Any]])
        return (changes.compactMap { $0["id"] as? String }, changes.compactMap { $0["account"] as? String },
                try #require(object["next"] as? String))
    }

    @Test func theFeedIsReadInPagesAndALongPollEndsWithTheNextChange() async throws {
        try await withTemporaryDirectory { directory in
            var logger = Logger(label: "test")
            logger.logLevel = .warning
            let app = try await LedgerServer.application(configuration: try LedgerServerTests.configuration(in: directory), logger: logger)
            try await app.test(.live) { client in
                _ = try await client.post(events: [
                    Lines.added("e1", "ana", payment: "A1", product: "com.example.hardwords"),
                    Lines.purchased("e2", "ana", payment: "A1", transaction: "t1"),
                    Lines.added("e3", "ben", payment: "B1", product: "com.example.tenhints"),
                ])
                #expect(try await client.send(.get, "/v1/changes", key: TestKeys.reader).status == .forbidden)
                #expect(try await client.send(.get, "/v1/changes?after=x1", key: TestKeys.feed).status == .badRequest)
                #expect(try await client.send(.get, "/v1/changes?limit=0", key: TestKeys.feed).status == .badRequest)
                #expect(try await client.send(.get, "/v1/changes?wait=26", key: TestKeys.feed).status == .badRequest)

                // Once the hub has derived the last of the three (a long poll after position 2
                // answers with it), the pages below are the window's, not what the hub had
                // reached when each was asked for.
                let last = try Self.changes(try await client.send(.get, "/v1/changes?after=2&wait=10", key: TestKeys.feed))
                #expect(last.ids == ["3.YmVu"])
                let first = try Self.changes(try await client.send(.get, "/v1/changes?limit=2&wait=10", key: TestKeys.feed))
                #expect(first.accounts == ["ana", "ana"])
                let rest = try Self.changes(try await client.send(.get, "/v1/changes?after=\(first.next)&wait=10", key: TestKeys.feed))
                #expect(rest.accounts == ["ben"])
                #expect(first.ids + rest.ids == ["1.YW5h", "2.YW5h", "3.YmVu"])

                // A long poll from the end (on a connection of its own) answers with the next
                // change once it is committed.
                let port = try #require(client.port)
                let poller = TestClient(host: "127.0.0.1", port: port, configuration: .init(timeout: .seconds(30)))
                poller.connect()
                var headers = HTTPFields()
                headers[.authorization] = "Bearer \(TestKeys.feed)"
                async let waiting = poller.execute(.init(
                    "/v1/changes?after=\(rest.next)&wait=20", method: .get, authority: "localhost", headers: headers))
                try await Task.sleep(for: .milliseconds(300))
                _ = try await client.post(events: [Lines.purchased("e4", "ben", payment: "B1", transaction: "t2")])
                let polled = try await waiting
                let next = try Self.changes(Answer(
                    status: polled.status, headers: polled.headers, body: polled.body.map { String(buffer: $0) } ?? ""))
                try await poller.shutdown()
                #expect(next.ids == ["4.YmVu"])
                let body = try await client.send(.get, "/v1/changes?after=3&wait=1", key: TestKeys.feed).object
                let change = try #require((body["changes"] as? [[String: Any]])?.first)
                #expect((change["differences"] as? [[String: Any]])?.map { $0["kind"] as? String } == ["balance", "transactionUnfinished"])
                #expect((change["projection"] as? [String: Any])?["balances"] as? [String: Int] == ["hints": 10])

                // Read one's own write: the projection has reached the position asked for.
                let own = try await client.send(.get, "/v1/accounts/ben?minPosition=4", key: TestKeys.reader)
                #expect(try own.object["position"] as? Int == 4)
                let future = try await client.send(.get, "/v1/accounts/ben?minPosition=99", key: TestKeys.reader)
                #expect(future.status == .serviceUnavailable)
                #expect(future.errorCode == "positionNotReached")
                #expect(try await client.send(.get, "/v1/accounts/ben?minPosition=-1", key: TestKeys.reader).status == .badRequest)
                // One value a parameter: which of two would be read is not the client's guess.
                for path in ["/v1/accounts/ben?minPosition=4&minPosition=99", "/v1/changes?after=3&wait=0&after=0",
                             "/v1/accounts/ben?asOf=2026-01-01T00:00:00Z&asOf=2020-01-01T00:00:00Z"] {
                    let repeated = try await client.send(.get, path, key: path.hasPrefix("/v1/changes") ? TestKeys.feed : TestKeys.reader)
                    #expect(repeated.status == .badRequest, "\(path)")
                    #expect(repeated.errorCode == "badRequest")
                }
                let environments = try await client.send(
                    .get, "/v1/accounts/ben?environment=Production&environment=Sandbox", key: TestKeys.reader)
                #expect(environments.status == .ok)
                // An empty piece names no parameter.
                #expect(try await client.send(.get, "/v1/accounts/ben?minPosition=4&&", key: TestKeys.reader).status == .ok)

                // Server-sent events, read by a client that is not ours, resumed where it left off.
                let events = try await Self.readEvents(port: port, count: 2, lastEventID: nil)
                #expect(events.map(\.id) == ["1.YW5h", "2.YW5h"])
                let resumed = try await Self.readEvents(port: port, count: 2, lastEventID: "2.YW5h")
                #expect(resumed.map(\.id) == ["3.YmVu", "4.YmVu"])
                #expect(resumed.allSatisfy { $0.event == "change" && $0.data.hasPrefix("{\"id\":\"\($0.id)\"") })
            }
        }
    }

    struct StreamedEvent: Decodable {
        var id: String
        var event: String
        var data: String
    }

    /// The first `count` server-sent events of `GET /v1/changes/stream`, read by Python's
    /// standard library in a child process (at most ten seconds). Its output goes to a file and
    /// its end is awaited without blocking a thread: the server it reads from runs in this
    /// process, on the same two threads, and a pipe could be held open by another test's child.
    static func readEvents(port: Int, count: Int, lastEventID: String?) async throws -> [StreamedEvent] {
        let script = """
            import http.client, json, sys
            connection = http.client.HTTPConnection("127.0.0.1", \(port), timeout=60)
            headers = {"Authorization": "Bearer \(TestKeys.feed)", "Accept": "text/event-stream"}
            if sys.argv[1]: headers["Last-Event-ID"] = sys.argv[1]
            connection.request("GET", "/v1/changes/stream", headers=headers)
            response = connection.getresponse()
            assert response.status == 200, response.status
            assert response.getheader("Content-Type") == "text/event-stream"
            events, current = [], {}
            while len(events) < \(count):
                line = response.readline().decode("utf-8").rstrip("\\n")
                if line == "":
                    if current: events.append(current)
                    current = {}
                elif not line.startswith(":"):
                    field, _, value = line.partition(": ")
                    current[field] = value
            with open(sys.argv[2], "w") as output:
                json.dump(events, output)
            """
        return try await withTemporaryDirectory { directory in
            let outputPath = directory + "/events.json", errorPath = directory + "/reader.err"
            let reader = try ChildProcess(
                "/usr/bin/env", ["python3", "-c", script, lastEventID ?? "", outputPath], error: .file(errorPath))
            // It ends by itself within its socket timeout (a minute: the full run loads two cores,
            // and a reader that exited 1 once there left no trace, so its error is kept now);
            // killed if this task is cancelled first.
            do {
                while reader.isRunning { try await Task.sleep(for: .milliseconds(20)) }
            } catch {
                reader.kill()
                throw error
            }
            let termination = reader.waitUntilExit()
            guard termination == .exited(0) else {
                let said = (try? String(contentsOfFile: errorPath, encoding: .utf8)) ?? ""
                throw TestFailure("the event stream's reader \(termination): \(said)")
            }
            return try JSONDecoder().decode([StreamedEvent].self, from: Data(contentsOf: URL(fileURLWithPath: outputPath)))
        }
    }
}
