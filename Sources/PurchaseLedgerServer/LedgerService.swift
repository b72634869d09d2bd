import PurchaseLedger
import ServiceLifecycle

/// Keeps a ledger open for the life of a `ServiceGroup` and closes it on graceful shutdown.
///
/// Put it before the HTTP server in the group: services shut down in reverse order, so the
/// server stops accepting and finishes its in-flight requests first, and only then does the
/// ledger close: queued appends commit, a snapshot is written, LMDB closes cleanly.
public struct LedgerService: Service {
    public let ledger: Ledger

    public init(ledger: Ledger) {
        self.ledger = ledger
    }

    public func run() async throws {
        // Returns when shutdown begins (or throws when the group is cancelled): close either way,
        // in a task of its own, so that a cancelled group still commits what is queued and
        // writes the closing snapshot.
        try? await gracefulShutdown()
        let ledger = self.ledger
        await Task { await ledger.close() }.value
    }
}
