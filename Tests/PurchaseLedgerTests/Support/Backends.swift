import Logging
import PostgresNIO
import Testing
@testable import PurchaseLedger
@testable import PurchaseLedgerPostgres
@testable import PurchaseLedgerLMDB
import PurchaseLedgerLocation
import LedgerTestSupport

/// The storage backends a test runs on: LMDB always; PostgreSQL when `tools/test` started a
/// throwaway cluster and exported its URL in `PURCHASE_LEDGER_TEST_POSTGRES` (without it, the
/// PostgreSQL cases are not generated and the rest of the suite runs as before).
enum Backend: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case lmdb
    case postgres

    static let postgresURL: String? = {
        guard let url = getenv("PURCHASE_LEDGER_TEST_POSTGRES") else { return nil }
        let value = String(cString: url)
        return value.isEmpty ? nil : value
    }()

    static var available: [Backend] {
        postgresURL == nil ? [.lmdb] : [.lmdb, .postgres]
    }

    var testDescription: String { rawValue }
}

/// A new, empty PostgreSQL database on the test cluster, dropped (connections and all) when
/// `body` returns: the PostgreSQL counterpart of a temporary directory.
func withTemporaryDatabase<R>(_ body: (String) async throws -> R) async throws -> R {
    // Tests run in parallel, each ledger holds a few connections: a few tests with databases
    // at a time keep the cluster under its connection limit. A test holds one slot however
    // many databases it nests (a copy's source and its destination): were a nested database to
    // ask for a slot of its own, every slot could be held by a test waiting for its second,
    // and the whole run would wait forever.
    if DatabaseSlots.isHeld { return try await withNewDatabase(body) }
    await DatabaseSlots.shared.acquire()
    defer { Task { await DatabaseSlots.shared.release() } }
    return try await DatabaseSlots.$isHeld.withValue(true) { try await withNewDatabase(body) }
}

private func withNewDatabase<R>(_ body: (String) async throws -> R) async throws -> R {
    guard let adminURL = Backend.postgresURL else { throw TestFailure("no PostgreSQL test cluster") }
    let admin = try PostgresLocation(url: adminURL)
    let name = "ledger_test_\(UInt64.random(in: 0...UInt64.max))"
    let connection = try BlockingConnection.connect(admin, logger: Logger(label: "test"))
    defer { connection.close() }
    try connection.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"))
    defer { _ = try? connection.query(PostgresQuery(unsafeSQL: "DROP DATABASE \(name) WITH (FORCE)")) }
    var location = admin
    location.database = name
    return try await body(location.description)
}

/// Where a ledger for a test lives on `backend`: a new directory or a new database.
func withLocation<R>(on backend: Backend, _ body: (String) async throws -> R) async throws -> R {
    switch backend {
    case .lmdb:
        try await withTemporaryDirectory { directory in try await body(directory + "/ledger") }
    case .postgres:
        try await withTemporaryDatabase(body)
    }
}

/// Opens a ledger on `backend` in a new location, runs `body`, closes it.
func withLedger<R>(
    on backend: Backend, catalog: Catalog = wordGameCatalog, configuration: Ledger.Configuration = .testing,
    _ body: (Ledger, String) async throws -> R
) async throws -> R {
    try await withLocation(on: backend) { location in
        let ledger = try Ledger.open(location: location, catalog: catalog, configuration: configuration)
        do {
            let result = try await body(ledger, location)
            await ledger.close()
            return result
        } catch {
            await ledger.close()
            throw error
        }
    }
}

/// At most `limit` tests with temporary databases at once, let in in order of asking.
actor DatabaseSlots {
    static let limit = 6
    static let shared = DatabaseSlots(limit: limit)
    /// The current task (a test, and the tasks it starts) holds a slot.
    @TaskLocal static var isHeld = false
    private var free: Int
    private var waiting: [CheckedContinuation<Void, Never>] = []

    init(limit: Int) {
        free = limit
    }

    func acquire() async {
        if free > 0 {
            free -= 1
            return
        }
        await withCheckedContinuation { waiting.append($0) }
    }

    func release() {
        if waiting.isEmpty {
            free += 1
        } else {
            waiting.removeFirst().resume()
        }
    }
}

extension Backend {
    /// The backend's storage at `location`, opened directly, without a `Ledger` over it: the
    /// door `StorageContractTests` goes through. A new backend adds its case here, and the
    /// contract suite then proves it with the same tests.
    func openStorage(_ location: String, readOnly: Bool = false) throws -> any LedgerStorage {
        var configuration = Ledger.Configuration.testing
        configuration.readOnly = readOnly
        switch self {
        case .lmdb:
            return try LedgerDirectory.open(location, creating: !readOnly, configuration: configuration, options: LMDBOptions())
        case .postgres:
            return try PostgresLedgerStorage(
                location: try PostgresLocation(url: location), readOnly: readOnly, synchronousCommit: true,
                options: PostgresOptions(), logger: configuration.logger)
        }
    }
}
