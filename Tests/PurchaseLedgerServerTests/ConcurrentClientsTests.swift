import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import PurchaseLedger
@testable import PurchaseLedgerAppStore
@testable import PurchaseLedgerServer
import Testing
@testable import PurchaseLedgerLMDB
import LedgerTestSupport

/// Fifty clients on loopback post interleaved events at once (shared accounts, contested store
/// transactions, ids sent by every client): what the server acknowledged is exactly the log,
/// and the live projections equal a sequential replay of it.
struct ConcurrentClientsTests {
    static let clients = 50
    static let requestsPerClient = 8
    static let asOf = "2026-06-01T00:00:00Z"

    /// One client's requests: flows on shared and own accounts; transactions from a pool all
    /// clients draw from; each request also repeats an id every client sends.
    static func requests(client: Int) -> [[String]] {
        (0..<requestsPerClient).map { request in
            let shared = "shared-\((client + request) % 5)"
            let own = "client-\(client)"
            let payment = "c\(client)-r\(request)"
            let transaction = "t\((client * 7 + request * 3) % 60)"
            let product = request % 2 == 0 ? "com.example.tenhints" : "com.example.hardwords"
            return [
                Lines.added("\(payment)-add", shared, payment: payment, product: product),
                Lines.purchased("\(payment)-buy", shared, payment: payment, transaction: transaction),
                Lines.consumed("\(payment)-use", shared, item: "hints", amount: 1 + client % 4),
                Lines.added("everyone-\(request)", own, payment: "E\(request)", product: "com.example.tenhints"),
                Lines.finished("\(payment)-done", shared, payment: payment),
            ]
        }
    }

    struct Acknowledged: Sendable {
        var line: String
        var position: Int
    }

    @Test func fiftyConcurrentClientsEqualASequentialReplay() async throws {
        try await ServerHarness.run(.live) { harness, client in
            let port = try #require(client.port)
            let acknowledged = try await withThrowingTaskGroup(of: [Acknowledged].self) { group in
                for index in 0..<Self.clients {
                    group.addTask {
                        let connection = TestClient(host: "localhost", port: port, configuration: .init(timeout: .seconds(120)))
                        connection.connect()
                        var appended: [Acknowledged] = []
                        do {
                            for lines in Self.requests(client: index) {
                                var headers = HTTPFields()
                                headers[.authorization] = "Bearer \(TestKeys.writer)"
                                headers[.contentType] = "application/x-ndjson"
                                headers[.connection] = "keep-alive"
                                let response = try await connection.execute(.init(
                                    "/v1/events", method: .post, authority: "localhost", headers: headers,
                                    body: ByteBuffer(string: lines.joined(separator: "\n"))))
                                guard response.status == .ok, let body = response.body else { throw TestFailure("answered \(response.status)") }
                                let outcomes = try #require(try JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [[String: Any]])
                                #expect(outcomes.count == lines.count)
                                for (line, outcome) in zip(lines, outcomes) where outcome["outcome"] as? String == "appended" {
                                    appended.append(Acknowledged(line: line, position: try #require(outcome["position"] as? Int)))
                                }
                            }
                        } catch {
                            try? await connection.shutdown()
                            throw error
                        }
                        try await connection.shutdown()
                        return appended
                    }
                }
                return try await group.reduce(into: []) { $0 += $1 }
            }

            // What was acknowledged is the log, position for position.
            let last = harness.ledger.position
            #expect(acknowledged.map(\.position).sorted() == Array(1...Int(last)))
            var log: [Event] = []
            for try await record in harness.ledger.records() { log.append(record.event) }
            #expect(log.count == Int(last))
            for item in acknowledged {
                #expect(log[item.position - 1] == (try Event(jsonLine: item.line)))
            }
            // Each id every client sent was appended once; no transaction went to two accounts
            // (several entries of one account may hold it, spec 1.1; that it credits once there
            // is the rules' to prove, and the replay below checks the server applied them).
            #expect(Set(log.map(\.id)).count == log.count)
            var holders: [String: Set<String>] = [:]
            for event in log {
                if case .transactionUpdated(let update) = event.payload, update.state == .purchased, let transaction = update.transaction {
                    holders[transaction, default: []].insert(event.account)
                }
            }
            #expect(holders.values.allSatisfy { $0.count == 1 }, "\(holders.filter { $0.value.count > 1 })")
            #expect(holders.count <= 60)

            // A fresh ledger fed the log one event at a time projects the same.
            try await withTemporaryDirectory { directory in
                let replay = try Ledger.open(at: directory + "/replay", catalog: serverTestCatalog)
                for event in log {
                    let outcome = try await replay.append(event)
                    #expect(outcome == .appended(position: replay.position))
                }
                let live = try harness.ledger.currentState()
                let sequential = try replay.currentState()
                #expect(live == sequential)
                let time = Timestamp(rfc3339: Self.asOf)!
                for account in sequential.accountIDs {
                    let projection = try await client.account(account, asOf: Self.asOf)
                    let expected = try JSONSerialization.jsonObject(with: Data(try #require(sequential.projection(of: account, asOf: time)).json(position: last).utf8))
                    #expect(NSDictionary(dictionary: projection).isEqual(expected), "\(account)")
                }
                await replay.close()
            }
        }
    }
}
