import PostgresNIO
import PurchaseLedger

/// The ledger's tables, created and upgraded by the library: numbered migrations, each applied
/// once, in order, in its own transaction, recorded in `ledger_migrations`.
///
/// Applying is safe from several processes at once without an advisory lock: each migration
/// first inserts its own row, so a second process waits on that row's key until the first
/// commits, then finds it and skips the migration (`ON CONFLICT DO NOTHING`).
///
/// Keys (event ids, accounts, store transactions) are `bytea`: the rules allow any UTF-8, NUL
/// included, which `text` refuses. The SQL is plain PostgreSQL that CockroachDB and YugabyteDB
/// also accept, but for `pg_notify` (see `PostgresLedgerStorage`).
enum PostgresSchema {
    struct Migration {
        let version: Int
        let description: String
        let statements: [String]
    }

    static let migrations: [Migration] = [
        Migration(version: 1, description: "the log, its indexes, catalogs and snapshots", statements: [
            // The one row appends lock: it serializes writers and holds the last position.
            "CREATE TABLE ledger_head (id integer PRIMARY KEY CHECK (id = 1), position bigint NOT NULL)",
            "INSERT INTO ledger_head (id, position) VALUES (1, 0)",
            "CREATE TABLE ledger_meta (key text PRIMARY KEY, value text NOT NULL)",
            // Positions are gap-free (the head row hands them out under its lock); event ids are
            // unique (idempotency); (account, position) is each account's history.
            """
            CREATE TABLE ledger_events (
                position bigint PRIMARY KEY CHECK (position > 0),
                event_id bytea NOT NULL UNIQUE,
                account bytea NOT NULL,
                record bytea NOT NULL
            )
            """,
            "CREATE INDEX ledger_events_by_account ON ledger_events (account, position)",
            """
            CREATE TABLE ledger_transactions (
                transaction_id bytea PRIMARY KEY,
                account bytea NOT NULL,
                payment bytea NOT NULL,
                position bigint NOT NULL,
                credits_consumable boolean NOT NULL
            )
            """,
            "CREATE TABLE ledger_revocations (transaction_id bytea PRIMARY KEY, position bigint NOT NULL)",
            "CREATE TABLE ledger_catalogs (effective_from bigint PRIMARY KEY, catalog bytea NOT NULL)",
            "CREATE TABLE ledger_snapshots (position bigint PRIMARY KEY, header bytea NOT NULL)",
            """
            CREATE TABLE ledger_account_states (
                account bytea NOT NULL,
                version bigint NOT NULL,
                state bytea NOT NULL,
                PRIMARY KEY (account, version)
            )
            """,
        ]),
        Migration(version: 2, description: "the ledger's clock and its feeds' consumers", statements: [
            "CREATE TABLE ledger_feeds (key bytea PRIMARY KEY, value bytea NOT NULL)",
            """
            CREATE TABLE ledger_clock (
                position bigint NOT NULL CHECK (position >= 0),
                seconds bigint NOT NULL,
                nanoseconds integer NOT NULL CHECK (nanoseconds >= 0 AND nanoseconds < 1000000000),
                PRIMARY KEY (position, seconds, nanoseconds)
            )
            """,
        ]),
        Migration(version: 3, description: "the customers' app transactions", statements: [
            "CREATE TABLE ledger_app_transactions (app_transaction bytea PRIMARY KEY, account bytea NOT NULL)",
        ]),
        // Records of format 2 name accounts (and tokens) by handle: dense, from 1, in order of
        // first mention; and keep Apple's proofs apart, by the record's position.
        Migration(version: 4, description: "the account table and the proofs", statements: [
            "CREATE TABLE ledger_accounts (handle bigint PRIMARY KEY CHECK (handle > 0), account bytea NOT NULL UNIQUE)",
            "CREATE TABLE ledger_proofs (position bigint PRIMARY KEY CHECK (position > 0), proof bytea NOT NULL)",
        ]),
        // An account's commitment no longer keeps its newest leaf's position (docs/FORMAT.md,
        // "The proof tree"): a version from before would take a position left stale as that
        // leaf's, and sign a tree its records do not make. Rewritten here, and refused by it.
        Migration(version: 5, description: "the proof tree's account commitments without a position", statements: [
            """
            UPDATE ledger_feeds SET value = substring(value FROM 1 FOR 32) || substring(value FROM 41)
            WHERE key >= 'proof/account/'::bytea AND key < 'proof/account0'::bytea AND length(value) IN (40, 72)
            """,
        ]),
    ]

    /// The newest schema this version knows.
    static var latestVersion: Int { migrations.last!.version }

    /// Applies the migrations not applied yet; returns the versions applied now.
    static func migrate(_ connection: BlockingConnection) throws -> [Int] {
        // Two processes creating it at once: one of them fails on PostgreSQL's own catalog
        // (unique_violation) once the other committed, and then finds the table there.
        for attempt in 1...3 {
            do {
                try connection.query("""
                    CREATE TABLE IF NOT EXISTS ledger_migrations (
                        version integer PRIMARY KEY, description text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now()
                    )
                    """)
                break
            } catch where attempt < 3 && ["23505", "42P07"].contains(PostgresErrors.sqlState(of: error)) {
                continue
            }
        }
        let newest = try connection.query("SELECT max(version) FROM ledger_migrations").first?.decode(Int?.self) ?? nil
        if let newest, newest > latestVersion {
            throw StorageError(.unsupportedFormat, "the database holds ledger schema \(newest); this version knows up to \(latestVersion)")
        }
        var applied: [Int] = []
        for migration in migrations where migration.version > (newest ?? 0) {
            try connection.query("BEGIN")
            do {
                let claimed = try connection.query("""
                    INSERT INTO ledger_migrations (version, description) VALUES (\(migration.version), \(migration.description))
                    ON CONFLICT (version) DO NOTHING RETURNING version
                    """)
                if claimed.rows.isEmpty {
                    try connection.query("ROLLBACK")
                    continue
                }
                for statement in migration.statements {
                    try connection.query(PostgresQuery(unsafeSQL: statement))
                }
                try connection.query("COMMIT")
                applied.append(migration.version)
            } catch {
                if !connection.isBroken { _ = try? connection.query("ROLLBACK") }
                throw error
            }
        }
        return applied
    }
}
