#if canImport(Glibc)
import Glibc
#endif
import Logging
import NIOCore
import NIOPosix
import PostgresNIO
import PurchaseLedgerLMDB
import PurchaseLedgerPostgres

/// PostgreSQL for the benchmarks: `BENCH_POSTGRES` names a server (tools/bench starts a
/// throwaway cluster on loopback and sets it); without it the PostgreSQL suites are not
/// registered. Each benchmark gets a database of its own; the replay fixture is kept.
public enum PostgresBench {
    public static var url: String? {
        guard let value = getenv("BENCH_POSTGRES").map({ String(cString: $0) }), !value.isEmpty else { return nil }
        return value
    }

    static let logger = Logger(label: "bench")

    static func connect(_ url: String) async throws -> PostgresConnection {
        let location = try PostgresLocation(url: url)
        return try await PostgresConnection.connect(
            on: MultiThreadedEventLoopGroup.singleton.next(),
            configuration: .init(host: location.host, port: location.port, username: location.username,
                                 password: location.password, database: location.database, tls: .disable),
            id: 1, logger: logger)
    }

    /// The URL of database `name` on the benchmark server.
    public static func databaseURL(_ name: String) -> String {
        let admin = url!
        return "\(admin[..<admin.lastIndex(of: "/")!])/\(name)"
    }

    /// Creates database `name` (dropping one of that name first unless `keep`); returns its URL
    /// and whether it existed already.
    @discardableResult
    public static func createDatabase(_ name: String, keepExisting: Bool = false) async throws -> (url: String, existed: Bool) {
        let admin = try await connect(url!)
        defer { Task { try? await admin.close() } }
        let exists = try await admin.query("SELECT 1 FROM pg_database WHERE datname = \(name)", logger: logger)
            .collect().count > 0
        if exists && keepExisting { return (databaseURL(name), true) }
        if exists { try await admin.query("DROP DATABASE \(unescaped: name) WITH (FORCE)", logger: logger) }
        try await admin.query("CREATE DATABASE \(unescaped: name)", logger: logger)
        return (databaseURL(name), false)
    }

    public static func dropDatabase(_ name: String) async {
        guard let admin = try? await connect(url!) else { return }
        _ = try? await admin.query("DROP DATABASE IF EXISTS \(unescaped: name) WITH (FORCE)", logger: logger)
        try? await admin.close()
    }

    /// A PostgreSQL ledger holding the first `events` events of the LMDB replay fixture
    /// (copied from it once, in 10,000-event commits, and kept), with no snapshot.
    public static func replayFixture(events: UInt64) async throws -> String {
        let name = "bench_fixture_v1_\(events)"
        let (url, existed) = try await createDatabase(name, keepExisting: true)
        if existed, let log = try? LedgerLog.open(postgres: url), (try? log.lastPosition()) == events {
            log.close()
            return url
        }
        try await createDatabase(name)
        let source = try LedgerLog.open(at: try await LedgerFixtures.ledger(events: 1_000_000, tail: 0))
        defer { source.close() }
        var configuration = LedgerFixtures.quiet
        configuration.snapshotInterval = nil
        configuration.snapshotOnClose = false
        configuration.maximumBatchEvents = 20_000
        let ledger = try Ledger.open(postgres: url, catalog: try source.catalog(), configuration: configuration)
        var next: UInt64 = 1
        while next <= events {
            var batch: [Event] = []
            try source.forEachRecord(from: next, through: min(events, next + 9_999)) { batch.append($0.event) }
            _ = try await ledger.append(contentsOf: batch)
            next += 10_000
        }
        await ledger.close()
        return url
    }
}

/// The raw floor on PostgreSQL: the same rows in an events table with the ledger's indexes
/// (unique event id, account + position), written with one multi-row INSERT per transaction
/// and read with one ordered SELECT, through postgres-nio. Commits are durable
/// (`synchronous_commit` on, the default).
public final class PostgresPeer: @unchecked Sendable {
    private let connection: PostgresConnection
    private var next: Int64 = 1

    public init(url: String) async throws {
        connection = try await PostgresBench.connect(url)
        try await connection.query("""
            CREATE TABLE IF NOT EXISTS events (
                position bigint PRIMARY KEY, id text NOT NULL UNIQUE, account text NOT NULL, body text NOT NULL)
            """, logger: PostgresBench.logger)
        try await connection.query("CREATE INDEX IF NOT EXISTS events_by_account ON events (account, position)", logger: PostgresBench.logger)
        let last = try await connection.query("SELECT coalesce(max(position), 0) FROM events", logger: PostgresBench.logger)
            .collect().first?.decode(Int64.self) ?? 0
        next = last + 1
    }

    /// Inserts the rows in one statement, hence one transaction.
    public func insert(_ rows: [(id: String, account: String, body: String)]) async throws {
        let positions = (0..<Int64(rows.count)).map { next + $0 }
        try await connection.query("""
            INSERT INTO events (position, id, account, body)
            SELECT * FROM unnest(\(positions)::bigint[], \(rows.map(\.id))::text[], \(rows.map(\.account))::text[], \(rows.map(\.body))::text[])
            """, logger: PostgresBench.logger)
        next += Int64(rows.count)
    }

    /// Reads every body in position order; returns the bytes seen.
    public func scan() async throws -> Int {
        var total = 0
        for try await body in try await connection.query("SELECT body FROM events ORDER BY position", logger: PostgresBench.logger).decode(String.self) {
            total &+= body.utf8.count
        }
        return total
    }

    public func close() async {
        try? await connection.close()
    }
}
