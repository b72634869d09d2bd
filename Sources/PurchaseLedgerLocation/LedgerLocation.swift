import Foundation
import Logging
@_exported import PurchaseLedgerLMDB
@_exported import PurchaseLedgerPostgres

/// Where a ledger is, as tools and servers are told: a directory (the LMDB backend, one
/// writing process) or a `postgres://USER@HOST[:PORT]/DATABASE` URL (the PostgreSQL backend,
/// any number of processes). The one place that picks the backend: a directory is opened by
/// PurchaseLedgerLMDB alone, a URL by PurchaseLedgerPostgres alone.
public enum LedgerLocation: Sendable, Hashable, CustomStringConvertible {
    case directory(String)
    case postgres(url: String)

    public init(_ text: String) {
        self = PostgresLocation.isPostgresURL(text) ? .postgres(url: text) : .directory(text)
    }

    /// How messages and logs name it: a URL without its password.
    public var description: String {
        switch self {
        case .directory(let path): path
        case .postgres(let url): PostgresLocation.redacting(url)
        }
    }

    /// The ledger's directory; nil for a database, which has none (files beside the ledger,
    /// such as the audit file of unattributed notifications, must then be named).
    public var directory: String? {
        if case .directory(let path) = self { path } else { nil }
    }

    /// Checks the location without opening it: a `postgres://` URL that names no database, or
    /// has a port out of range, throws `StorageError`.
    public func validate() throws {
        if case .postgres(let url) = self { _ = try PostgresLocation(url: url) }
    }

    /// The PostgreSQL options a process uses by default: the password from its `PGPASSWORD`
    /// when the URL has none.
    public static var processOptions: PostgresOptions {
        var options = PostgresOptions()
        options.environment["PGPASSWORD"] = ProcessInfo.processInfo.environment["PGPASSWORD"]
        return options
    }

    /// Opens the ledger here; `lmdb` applies to a directory, `options` to PostgreSQL.
    public func openLedger(
        catalog: Catalog? = nil, configuration: Ledger.Configuration = .init(), lmdb: LMDBOptions = .init(),
        options: PostgresOptions = processOptions
    ) throws -> Ledger {
        switch self {
        case .directory(let path): try Ledger.open(at: path, catalog: catalog, configuration: configuration, options: lmdb)
        case .postgres(let url): try Ledger.open(postgres: url, catalog: catalog, configuration: configuration, options: options)
        }
    }

    /// After a forget, with the ledger closed by every process: rewrites a directory's data
    /// file so that no stale page holds what the forget removed (`Ledger.rewriteDataFile(at:)`);
    /// returns its size before and after. Nil for PostgreSQL, whose dead rows go with VACUUM
    /// (docs/POSTGRES.md, "Forgetting a customer").
    public func rewriteDataFile() throws -> (before: Int, after: Int)? {
        switch self {
        case .directory(let path): try Ledger.rewriteDataFile(at: path)
        case .postgres: nil
        }
    }

    public func openLog(logger: Logger = Logger(label: "PurchaseLedger"), options: PostgresOptions = processOptions) throws -> LedgerLog {
        try openLog(logger: logger, options: options, copying: false)
    }

    /// Opens the ledger here for reading; `copying`: a copy `ledger copy` has not marked
    /// complete (to verify it).
    package func openLog(logger: Logger, options: PostgresOptions, copying: Bool) throws -> LedgerLog {
        switch self {
        case .directory(let path): try LedgerLog.open(at: path, logger: logger, copying: copying)
        case .postgres(let url): try LedgerLog.open(postgres: url, logger: logger, options: options, copying: copying)
        }
    }
}

extension Ledger {
    /// Opens a ledger by location: a `postgres://` URL, or else a directory (`LedgerLocation`).
    public static func open(
        location: String, catalog: Catalog? = nil, configuration: Configuration = .init(),
        options: PostgresOptions = LedgerLocation.processOptions
    ) throws -> Ledger {
        try LedgerLocation(location).openLedger(catalog: catalog, configuration: configuration, options: options)
    }
}

extension LedgerLog {
    /// Opens a ledger for reading by location: a `postgres://` URL, or else a directory.
    public static func open(
        location: String, logger: Logger = Logger(label: "PurchaseLedger"), options: PostgresOptions = LedgerLocation.processOptions
    ) throws -> LedgerLog {
        try LedgerLocation(location).openLog(logger: logger, options: options)
    }
}
