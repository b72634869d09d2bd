import Logging
import PurchaseLedger

/// Options of the PostgreSQL backend, beside the ledger's own `Ledger.Configuration`.
public struct PostgresOptions: Sendable {
    /// Most connections open at once for reads (each read holds one for its transaction).
    public var readerConnections = 8
    /// How often to look for other processes' appends when no notification came (a lost
    /// listening connection, or an engine without LISTEN/NOTIFY).
    public var pollInterval: Duration = .seconds(1)
    /// Whether each commit notifies the other processes (`pg_notify`) and this one listens.
    /// Turn it off on an engine without LISTEN/NOTIFY (CockroachDB, YugabyteDB): the poll then
    /// wakes the other processes alone.
    public var notifications = true
    /// The environment `PGPASSWORD` is read from when the URL has no password.
    public var environment: [String: String] = [:]

    public init() {}
}

extension Ledger {
    /// Opens (creating its tables and, given a catalog, the ledger itself) the ledger in the
    /// PostgreSQL database at `url`. Any number of processes may open the same database and
    /// append: each validates its appends against the database, under its lock, and follows
    /// the others' appends. See `PostgresLocation` for the URL.
    ///
    /// `configuration.durability` `.noSync` turns `synchronous_commit` off for the writer's
    /// connection: a crash of PostgreSQL may then lose the last acknowledged appends.
    public static func open(
        postgres url: String, catalog: Catalog? = nil, configuration: Configuration = .init(), options: PostgresOptions = .init()
    ) throws -> Ledger {
        let location = try PostgresLocation(url: url, environment: options.environment)
        let storage = try PostgresLedgerStorage(
            location: location, readOnly: configuration.readOnly, synchronousCommit: configuration.durability == .synchronous,
            options: options, logger: configuration.logger)
        return try Ledger(location: location.description, storage: storage, catalog: catalog, configuration: configuration)
    }
}

extension LedgerLog {
    /// Opens the ledger in the PostgreSQL database at `url` for reading.
    public static func open(postgres url: String, logger: Logger = Logger(label: "PurchaseLedger"), options: PostgresOptions = .init()) throws -> LedgerLog {
        try open(postgres: url, logger: logger, options: options, copying: false)
    }

    /// Opens the ledger at `url` for reading; `copying`: a copy not yet marked complete.
    package static func open(postgres url: String, logger: Logger, options: PostgresOptions, copying: Bool) throws -> LedgerLog {
        let location = try PostgresLocation(url: url, environment: options.environment)
        let storage = try PostgresLedgerStorage(location: location, readOnly: true, synchronousCommit: true, options: options, logger: logger)
        return try LedgerLog(location: location.description, storage: storage, logger: logger, copying: copying)
    }
}
