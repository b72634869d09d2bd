@_exported import PurchaseLedger
import Logging

// The embedded backend's entry points: a ledger in a directory, one writing process at a time.
// `import PurchaseLedgerLMDB` brings the whole library (it re-exports PurchaseLedger).

/// What only the LMDB backend has to be told (PurchaseLedgerPostgres has `PostgresOptions`).
public struct LMDBOptions: Sendable {
    /// The map size to start with; the map grows by itself beyond it. The map is address
    /// space, not disk (the data file grows by the pages written), and a growth waits for
    /// every read under way: a generous start keeps growths rare.
    public var initialMapSize = 1 << 30
    /// The largest the data file may grow to; appends beyond throw `StorageError.storageFull`.
    public var maximumSize: Int? = nil

    public init() {}
}

extension Ledger {
    /// Opens the ledger in `directory`, creating it (and the directory) when it does not exist
    /// yet: from the newest usable snapshot and the log after it, or by replaying the whole log
    /// (then, when writable, writing a fresh snapshot). One process at a time may open it for
    /// writing (`writer.lock`); any number read-only.
    ///
    /// - Parameter catalog: required to create a ledger. For an existing one it may be omitted;
    ///   given, it must keep every product the ledger has unchanged, and new products are added
    ///   to the ledger's catalog from the next position on.
    public static func open(
        at directory: String, catalog: Catalog? = nil, configuration: Configuration = .init(), options: LMDBOptions = .init()
    ) throws -> Ledger {
        let storage = try LedgerDirectory.open(directory, creating: catalog != nil, configuration: configuration, options: options)
        return try Ledger(location: directory, storage: storage, catalog: catalog, configuration: configuration)
    }
}

extension Ledger {
    /// Rewrites the data file of the ledger in `directory` entry by entry, so that it holds
    /// only what its tables hold: after a forget, no freed or stale page keeps the forgotten
    /// id's bytes (docs/FORMAT.md, "Forgetting a customer"). Throws `ledgerInUse` while another
    /// process has the ledger open (a reader of the old file would read the lock file of the new
    /// one); a forget through a server leaves it to the next open for writing. Returns the file's
    /// size before and after.
    @discardableResult
    public static func rewriteDataFile(at directory: String) throws -> (before: Int, after: Int) {
        try DataFileRewrite.rewrite(directory: directory)
    }
}

extension LedgerLog {
    /// Opens the ledger in `directory` for reading.
    public static func open(at directory: String, logger: Logger = Logger(label: "PurchaseLedger")) throws -> LedgerLog {
        try open(at: directory, logger: logger, copying: false)
    }

    /// Opens the ledger in `directory` for reading; `copying`: a copy not yet marked complete.
    package static func open(at directory: String, logger: Logger, copying: Bool) throws -> LedgerLog {
        var configuration = Ledger.Configuration()
        configuration.readOnly = true
        let storage = try LedgerDirectory.open(directory, creating: false, configuration: configuration, options: LMDBOptions())
        return try LedgerLog(location: directory, storage: storage, logger: logger, copying: copying)
    }
}
