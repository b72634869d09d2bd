import ArgumentParser

/// `ledger`: the audit tool of a purchase ledger.
///
/// Exit codes, for scripts: 0 success; 1 `verify` found damage; 2 the command could not do its
/// job (unreadable input, unusable ledger directory or database, bad catalog); 64 bad usage.
@main
struct LedgerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ledger",
        abstract: "Import, replay, export and verify a purchase ledger.",
        discussion: """
            A ledger is an append-only log of StoreKit payment-queue events (interchange format v1) and \
            the catalog in force, held in a directory (LMDB) or a PostgreSQL database (a postgres:// URL).
            Exit status: 0 success; 1 damage (or a failed store proof) found by verify, or lines rejected by \
            import --strict; 2 the command could not do its job; 64 bad usage.
            """,
        version: "1.0.0",
        subcommands: [Import.self, Replay.self, Export.self, Verify.self, History.self, Changes.self, Webhooks.self, Stats.self, Snapshot.self, Copy.self, Attribute.self, Transfer.self, Forget.self, Rewrite.self, Reconcile.self, CheckpointKey.self, Checkpoint.self, Checkpoints.self, Prove.self, BooksCommand.self]
    )
}
