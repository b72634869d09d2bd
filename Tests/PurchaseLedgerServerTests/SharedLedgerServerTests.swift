import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import PurchaseLedger
import PurchaseLedgerPostgres
@testable import PurchaseLedgerAppStore
@testable import PurchaseLedgerServer
import Synchronization
import Testing
import LedgerTestSupport

/// PostgreSQL's test cluster (tools/test starts one), when there is one.
let testPostgresURL = ProcessInfo.processInfo.environment["PURCHASE_LEDGER_TEST_POSTGRES"].flatMap { $0.isEmpty ? nil : $0 }

/// Several `ledger-server` processes (the built binary) on loopback sharing one PostgreSQL
/// ledger, as behind a load balancer.
@Suite(.enabled(if: testPostgresURL != nil, "needs PURCHASE_LEDGER_TEST_POSTGRES (tools/test starts a cluster)"))
struct SharedLedgerServerTests {
    static let asOf = "2026-03-15T00:00:00Z"

    /// Three servers; clients post interleaved streams to all of them, and each store
    /// transaction of a contested pair to two servers at once (under different accounts, or the
    /// very same events). Exactly one of each pair credits; the other is answered
    /// `transactionAlreadyCredited` or `duplicate`. Every acknowledged event is in the log at
    /// its position, and every server, once caught up, answers what a sequential replay of the
    /// log gives.
    @Test func threeServersShareOneLedgerAndCreditEachTransactionOnce() async throws {
        try await withSharedDatabase { databaseURL, directory in
            let servers = try await (0..<3).asyncMap { try await ServerProcess.start(databaseURL: databaseURL, directory: directory, index: $0) }
            defer { for server in servers { server.stop() } }
            let seen = SharedRun()
            try await withThrowingTaskGroup(of: Void.self) { group in
                // Background traffic: each client its own account, on every server in turn.
                for client in 0..<6 {
                    group.addTask {
                        for request in 0..<15 {
                            let lines = (0..<4).flatMap { index -> [String] in
                                let payment = "P\(request)-\(index)"
                                return [
                                    Lines.added("bg\(client)-\(request)-\(index)a", "bg-\(client)", payment: payment, product: "com.example.tenhints"),
                                    Lines.purchased("bg\(client)-\(request)-\(index)b", "bg-\(client)", payment: payment, transaction: "bg\(client)-\(request)-\(index)"),
                                ]
                            }
                            let outcomes = try await servers[(client + request) % 3].post(lines)
                            for (line, outcome) in zip(lines, outcomes) {
                                let position = try #require(outcome["position"] as? Int, "\(outcome)")
                                seen.acknowledged.withLock { $0.append((line, position)) }
                            }
                        }
                    }
                }
                // Contested pairs: the same store transaction to two servers at once.
                for round in 0..<24 {
                    group.addTask {
                        let sameEvents = round % 2 == 1
                        let (first, second) = (servers[round % 3], servers[(round + 1) % 3])
                        func lines(_ side: String) -> [String] {
                            let tag = sameEvents ? "same" : side
                            // Two accounts: another entry of the same account would take the
                            // transaction too, without a second credit (1.1).
                            let account = sameEvents ? "contested-\(round)" : "contested-\(round)-\(side)"
                            return [
                                Lines.added("c\(round)-\(tag)-1", account, payment: "pay-\(tag)", product: "com.example.tenhints"),
                                Lines.purchased("c\(round)-\(tag)-2", account, payment: "pay-\(tag)", transaction: "T-\(round)"),
                            ]
                        }
                        async let a = first.post(lines("a"))
                        async let b = second.post(lines("b"))
                        let purchases = [try await a, try await b].map { outcomes in
                            (outcomes[1]["outcome"] as? String) == "appended" ? "appended" : (outcomes[1]["error"] as? String ?? outcomes[1]["outcome"] as? String ?? "?")
                        }
                        seen.contested.withLock { $0.append(purchases) }
                    }
                }
                try await group.waitForAll()
            }

            // Exactly one credit per contested transaction.
            for purchases in seen.contested.withLock({ $0 }) {
                #expect(purchases.filter { $0 == "appended" }.count == 1, "\(purchases)")
                #expect(purchases.allSatisfy { ["appended", "duplicate", "transactionAlreadyCredited"].contains($0) }, "\(purchases)")
            }

            // Both ways of losing happened: another event of the transaction, and the same event.
            let losers = Set(seen.contested.withLock { $0 }.flatMap { $0 }.filter { $0 != "appended" })
            #expect(losers == ["duplicate", "transactionAlreadyCredited"])

            // The log holds what was acknowledged, without a gap, and checks out.
            let log = try LedgerLog.open(postgres: databaseURL)
            defer { log.close() }
            let last = try log.lastPosition()
            var events: [Int: Event] = [:]
            try log.forEachRecord { events[Int($0.position)] = $0.event }
            #expect(events.count == Int(last))
            for (line, position) in seen.acknowledged.withLock({ $0 }) {
                #expect(events[position] == (try Event(jsonLine: line)))
            }
            #expect(log.verify().isIntact)

            // Every server answers what the sequential replay gives, once it has caught up.
            let replayed = try log.state(useSnapshots: false)
            let time = try #require(Timestamp(rfc3339: Self.asOf))
            let accounts = replayed.accountIDs
            for server in servers {
                try await server.waitForPosition(last)
                for account in accounts {
                    let expected = try #require(replayed.projection(of: account, asOf: time)).json(position: last)
                    let answer = try await server.get("/v1/accounts/\(account)?asOf=\(Self.asOf)")
                    #expect(answer == expected + "\n", "\(account) on server \(server.index)")
                }
                for round in 0..<24 {
                    let accounts = round % 2 == 1 ? ["contested-\(round)"] : ["contested-\(round)-a", "contested-\(round)-b"]
                    var credited = 0
                    for account in accounts {
                        let answer = try await server.get("/v1/accounts/\(account)?asOf=\(Self.asOf)")
                        if answer.contains(#""hints": 10"#) { credited += 1 }
                    }
                    #expect(credited == 1, "contested-\(round) is credited to one account")
                }
            }
        }
    }

    /// One of three servers is killed (SIGKILL) while clients append through all three. Every
    /// event any server acknowledged is in the log at its position; the other two go on, and
    /// a new server started in its place catches up with the whole log.
    @Test func killingOneServerMidAppendLosesNothingAcknowledged() async throws {
        try await withSharedDatabase { databaseURL, directory in
            let servers = try await (0..<3).asyncMap { try await ServerProcess.start(databaseURL: databaseURL, directory: directory, index: $0) }
            defer { for server in servers { server.stop() } }
            let seen = SharedRun()
            try await withThrowingTaskGroup(of: Void.self) { group in
                for client in 0..<9 {
                    let server = servers[client % 3]
                    group.addTask {
                        // The doomed server's clients post until it is gone; the others, 40 requests.
                        for request in 0..<(server.index == 0 ? 1_000_000 : 40) {
                            let lines = (0..<5).map { Lines.added("k\(client)-\(request)-\($0)", "kill-\(client)", payment: "P\(request)-\($0)", product: "com.example.tenhints") }
                            let outcomes: [[String: Any]]
                            do {
                                outcomes = try await server.post(lines)
                            } catch {
                                // Only the killed server's clients may fail, and only once it was killed.
                                #expect(server.index == 0 && seen.killed.load(ordering: .acquiring), "server \(server.index) failed a request: \(error)")
                                seen.failures.withLock { $0.append(server.index) }
                                return
                            }
                            for (line, outcome) in zip(lines, outcomes) {
                                let position = try #require(outcome["position"] as? Int, "\(outcome)")
                                seen.acknowledged.withLock { $0.append((line, position)) }
                            }
                            if server.index == 0 { seen.acknowledgedByDoomed.add(1, ordering: .releasing) }
                        }
                    }
                }
                group.addTask {
                    // Once the doomed server has answered some requests, with its three clients
                    // posting back to back: killed with appends in flight.
                    let deadline = ContinuousClock.now + .seconds(60)
                    while seen.acknowledgedByDoomed.load(ordering: .acquiring) < 15 && ContinuousClock.now < deadline {
                        try await Task.sleep(for: .milliseconds(5))
                    }
                    #expect(seen.acknowledgedByDoomed.load(ordering: .acquiring) >= 15, "server 0 answered too few requests")
                    seen.killed.store(true, ordering: .releasing)
                    servers[0].kill()
                }
                try await group.waitForAll()
            }
            #expect(seen.failures.withLock { $0 }.count == 3, "each of the killed server's clients was cut off")

            let log = try LedgerLog.open(postgres: databaseURL)
            defer { log.close() }
            var events: [Int: Event] = [:]
            try log.forEachRecord { events[Int($0.position)] = $0.event }
            let answered = seen.acknowledged.withLock { $0 }
            #expect(answered.count > 0)
            for (line, position) in answered {
                #expect(events[position] == (try Event(jsonLine: line)), "acknowledged at \(position)")
            }
            #expect(log.verify().isIntact)

            // A server started in the dead one's place opens the shared ledger and is current.
            let replacement = try await ServerProcess.start(databaseURL: databaseURL, directory: directory, index: 3)
            defer { replacement.stop() }
            let last = try log.lastPosition()
            for server in [replacement, servers[1], servers[2]] { try await server.waitForPosition(last) }
        }
    }

    /// Three servers on one ledger deliver an endpoint's webhooks: one at a time (only a
    /// server that took the lease ever attempts a delivery, by each server's metrics), and when
    /// the holder is killed mid-delivery another takes the lease over and every change of the
    /// feed is acknowledged, each account's first deliveries in order.
    @Test func threeServersDeliverAWebhookOneAtATimeAndTheHoldersDeathLosesNoChange() async throws {
        guard let python = await WebhookTests.python() else {
            try #require(!AppleVerifier.isRequired, "standardwebhooks is not installed (tools/test installs it)")
            return
        }
        try await withSharedDatabase { databaseURL, directory in
            let receiver = try await WebhookReceiver.start(python: python, rules: "{}", in: directory)
            defer { receiver.stop() }
            let configure: (inout ServerConfiguration) -> Void = {
                $0.deliverWebhooks(toPort: receiver.port, maxAttempts: 1000)
                $0.webhookLeaseSeconds = 3
            }
            let servers = try await (0..<3).asyncMap {
                try await ServerProcess.start(databaseURL: databaseURL, directory: directory, index: $0, configure: configure)
            }
            defer { for server in servers { server.stop() } }
            func append(_ round: Int, through server: ServerProcess) async throws {
                let lines = (0..<6).flatMap { index -> [String] in
                    let payment = "P\(round)-\(index)"
                    return [
                        Lines.added("r\(round)-\(index)a", "acct-\(index)", payment: payment, product: "com.example.tenhints"),
                        Lines.purchased("r\(round)-\(index)b", "acct-\(index)", payment: payment, transaction: "r\(round)-\(index)"),
                    ]
                }
                _ = try await server.post(lines)
            }
            for round in 0..<10 { try await append(round, through: servers[round % 3]) }
            // Killed while it delivers: once a delivery arrived.
            for _ in 0..<1500 {
                if !receiver.deliveries.isEmpty { break }
                try await Task.sleep(for: .milliseconds(20))
            }
            // The holder is the one server whose gauge says so; a server attempts only once it
            // took the lease, and another attempts only after a hand-over (a lease that could
            // not be renewed in time on a loaded machine).
            var before: [ServerProcess.WebhookLeaseMetrics] = []
            for _ in 0..<100 {
                before = try await servers.asyncMap { try await $0.webhookMetrics() }
                if before.filter(\.holdsLease).count == 1 { break }
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(before.filter(\.holdsLease).count == 1, "servers: \(before)")
            #expect(before.allSatisfy { $0.attempts == 0 || $0.leasesTaken > 0 }, "servers: \(before)")
            #expect(before.filter { $0.attempts > 0 }.count <= before.map(\.leasesTaken).reduce(0, +), "servers: \(before)")
            let holder = try #require(before.firstIndex { $0.holdsLease })
            servers[holder].kill()
            let survivors = servers.indices.filter { $0 != holder }.map { servers[$0] }
            for round in 10..<20 { try await append(round, through: survivors[round % 2]) }

            // Every change of the feed acknowledged, once the lease passed to a survivor: the
            // feed read from a survivor once it derived the whole log.
            let last = try await max(survivors[0].position(), survivors[1].position())
            var feed: [String] = []
            for _ in 0..<200 {
                feed = try await survivors[0].changeIDs()
                if let position = feed.last.flatMap({ UInt64($0.prefix { $0.isNumber }) }), position >= last { break }
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(feed.last.flatMap { UInt64($0.prefix { $0.isNumber }) } == last, "the feed ends at \(feed.last ?? "nothing"), the log at \(last)")
            for _ in 0..<1500 {
                if Set(receiver.deliveries.filter { $0.status == 204 }.compactMap(\.id)).isSuperset(of: feed) { break }
                try await Task.sleep(for: .milliseconds(20))
            }
            let delivered = receiver.deliveries
            // A killed holder may leave a request cut off mid-body (recorded as cut); every whole one
            // verifies.
            #expect(delivered.allSatisfy { $0.invalid == nil }, "not verified: \(delivered.compactMap(\.invalid))")
            let lost = Set(feed).subtracting(delivered.filter { $0.status == 204 }.compactMap(\.id))
            #expect(lost.isEmpty, "not delivered: \(lost.sorted().prefix(10))")
            let order = Dictionary(uniqueKeysWithValues: feed.enumerated().map { ($1, $0) })
            var seen: Set<String> = []
            for (account, deliveries) in Dictionary(grouping: delivered, by: { $0.account ?? "" }) {
                let firsts = deliveries.compactMap { delivery in delivery.id.flatMap { seen.insert($0).inserted ? order[$0] : nil } }
                #expect(firsts == firsts.sorted(), "\(account) first received out of order")
            }
            let after = try await survivors.asyncMap { try await $0.webhookMetrics() }
            #expect(after.contains { $0.attempts > 0 && $0.leasesTaken > 0 }, "the surviving servers: \(after)")
            #expect(after.allSatisfy { $0.attempts == 0 || $0.leasesTaken > 0 }, "the surviving servers: \(after)")
        }
    }

    /// A new database on the test cluster (made and dropped with psql) and a scratch directory.
    func withSharedDatabase(_ body: (String, String) async throws -> Void) async throws {
        let admin = try #require(testPostgresURL)
        let database = "ledger_servers_\(UInt64.random(in: 0...UInt64.max))"
        try psql(admin, "CREATE DATABASE \(database)")
        defer { try? psql(admin, "DROP DATABASE \(database) WITH (FORCE)") }
        try await withTemporaryDirectory { directory in
            try await body("\(admin[..<admin.lastIndex(of: "/")!])/\(database)", directory)
        }
    }

    private func psql(_ url: String, _ command: String) throws {
        let run = try runCommand(URL(fileURLWithPath: "/usr/bin/env"), ["psql", url, "-qc", command])
        guard run.status == 0 else { throw TestFailure("psql \(command) failed: \(run.error)") }
    }
}

/// What the clients of a shared-ledger test saw.
private final class SharedRun: Sendable {
    /// (event line, position) of every event a server acknowledged as appended.
    let acknowledged = Mutex<[(line: String, position: Int)]>([])
    /// The purchases' answers of each contested pair.
    let contested = Mutex<[[String]]>([])
    /// Servers whose requests failed.
    let failures = Mutex<[Int]>([])
    let killed = Atomic<Bool>(false)
    /// Requests the server to be killed has answered.
    let acknowledgedByDoomed = Atomic<Int>(0)
}

/// A `ledger-server` process on a loopback port, on a shared PostgreSQL ledger.
final class ServerProcess: Sendable {
    let index: Int
    let port: Int
    private let process: ChildProcess

    private init(index: Int, port: Int, process: ChildProcess) {
        self.index = index
        self.port = port
        self.process = process
    }

    static func start(
        databaseURL: String, directory: String, index: Int, configure: (inout ServerConfiguration) -> Void = { _ in }
    ) async throws -> ServerProcess {
        let port = try LedgerServerTests.freePort()
        try LedgerServerTests.catalogJSON.write(toFile: directory + "/catalog.json", atomically: true, encoding: .utf8)
        var configuration = ServerConfiguration(
            ledger: databaseURL, catalog: directory + "/catalog.json",
            bind: .init(host: "127.0.0.1", port: port), keys: TestKeys.configured)
        // Wide deadlines for reading a request and for an idle connection: on two cores loaded
        // by the rest of the suite, a server closed a test client's connection ("I/O on closed
        // channel" at the client, seen once in a full run), which the defaults (15 s, 30 s) allow.
        configuration.limits.requestTimeoutSeconds = 90
        configuration.limits.idleTimeoutSeconds = 600
        configure(&configuration)
        let process = try await BuiltServer.start(configuration, in: directory, name: "server-\(index).json")
        return ServerProcess(index: index, port: port, process: process)
    }

    func request(_ method: HTTPRequest.Method, _ path: String, key: String? = nil, body: String? = nil) async throws -> (HTTPResponse.Status, String) {
        // Generous: on two cores loaded by the rest of the suite, a server may wait long for a core.
        let answer = try await PatientClient(port: port, timeout: .seconds(90)).send(method, path, key: key, contentType: "application/x-ndjson", body: body)
        return (answer.status, answer.body)
    }

    /// Posts JSON Lines; the outcomes, or a failure when the server did not answer 200.
    func post(_ lines: [String]) async throws -> [[String: Any]] {
        let (status, body) = try await request(.post, "/v1/events", key: TestKeys.writer, body: lines.joined(separator: "\n") + "\n")
        guard status == .ok, let outcomes = try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [[String: Any]] else {
            throw TestFailure("POST /v1/events answered \(status): \(body)")
        }
        return outcomes
    }

    func get(_ path: String) async throws -> String {
        let (status, body) = try await request(.get, path, key: TestKeys.reader)
        guard status == .ok else { throw TestFailure("GET \(path) answered \(status): \(body)") }
        return body
    }

    /// Waits until the server's health reports `position` (it caught up with the others).
    func waitForPosition(_ position: UInt64) async throws {
        var last = ""
        for _ in 0..<200 {
            last = (try? await request(.get, "/v1/health"))?.1 ?? ""
            if last.contains("\"position\": \(position)}") { return }
            try await Task.sleep(for: .milliseconds(25))
        }
        throw TestFailure("server \(index) did not reach position \(position): \(last)")
    }

    func kill() {
        process.kill()
    }

    /// The log position this server's health reports.
    func position() async throws -> UInt64 {
        let (_, text) = try await request(.get, "/v1/health")
        guard let object = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any],
              let position = object["position"] as? Int else { throw TestFailure("GET /v1/health answered \(text)") }
        return UInt64(position)
    }

    /// This server's webhook metrics: attempts, leases taken, and whether it holds the lease.
    struct WebhookLeaseMetrics: CustomStringConvertible {
        var attempts = 0
        var leasesTaken = 0
        var holdsLease = false
        var description: String { "attempts \(attempts), leases taken \(leasesTaken)\(holdsLease ? ", holding" : "")" }
    }

    func webhookMetrics() async throws -> WebhookLeaseMetrics {
        let (status, text) = try await request(.get, "/metrics", key: TestKeys.metrics)
        guard status == .ok else { throw TestFailure("GET /metrics answered \(status)") }
        func value(_ name: String) -> Double {
            let line = text.split(separator: "\n").first { $0.hasPrefix(name + "{") }
            return line.flatMap { $0.split(separator: " ").last }.flatMap { Double($0) } ?? 0
        }
        return WebhookLeaseMetrics(
            attempts: Int(value("ledger_webhook_attempts_total")), leasesTaken: Int(value("ledger_webhook_leases_taken_total")),
            holdsLease: value("ledger_webhook_lease_held") == 1)
    }

    /// The ids of the whole feed, in order (`GET /v1/changes`, page after page).
    func changeIDs() async throws -> [String] {
        var ids: [String] = []
        var cursor = "0"
        while true {
            let (status, text) = try await request(.get, "/v1/changes?after=\(cursor)&limit=1000", key: TestKeys.feed)
            guard status == .ok, let page = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] else {
                throw TestFailure("GET /v1/changes answered \(status): \(text)")
            }
            let changes = page["changes"] as? [[String: Any]] ?? []
            guard let next = page["next"] as? String, !changes.isEmpty else { return ids }
            ids += changes.compactMap { $0["id"] as? String }
            cursor = next
        }
    }

    func stop() {
        process.stop()
    }
}

extension Sequence {
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var result: [T] = []
        for element in self { result.append(try await transform(element)) }
        return result
    }
}
