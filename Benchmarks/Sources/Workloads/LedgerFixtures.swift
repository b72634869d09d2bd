import Logging
import PurchaseLedgerLMDB

/// Ledgers the open and replay benchmarks read: `events` generated events, a snapshot, then a
/// tail of `tail` more events after it. Built once and kept under `Scratch.root`.
public enum LedgerFixtures {
    public static var quiet: Ledger.Configuration {
        var configuration = Ledger.Configuration()
        configuration.logger.logLevel = .error
        return configuration
    }

    /// The path of the fixture, building it first when needed.
    public static func ledger(events: Int, tail: Int) async throws -> String {
        let path = "\(Scratch.root)/fixture-v2-\(events)-\(tail)"
        let done = path + ".complete"
        if Scratch.exists(done), try snapshotsAreUsable(path) { return path }
        Scratch.remove(path)
        var configuration = quiet
        configuration.snapshotInterval = nil
        configuration.snapshotOnClose = false
        configuration.maximumBatchEvents = 20_000
        let ledger = try Ledger.open(at: path, catalog: BenchmarkEvents.catalog, configuration: configuration)
        // About twenty events per account whatever the length, so that the accounts a tail
        // touches hold as much state in a short log as in a long one.
        var generator = BenchmarkEvents(accounts: max(1000, (events + tail) / 20))
        var written = 0
        while written < events + tail {
            if written == events {
                try await ledger.writeSnapshot()
            }
            let count = min(10_000, (written < events ? events : events + tail) - written)
            let results = try await ledger.append(contentsOf: generator.next(count))
            precondition(results.allSatisfy { if case .success(.appended) = $0 { true } else { false } }, "fixture events must all append")
            written += count
        }
        if tail == 0 { try await ledger.writeSnapshot() }
        await ledger.close()
        Scratch.touch(done)
        return path
    }

    /// A ledger of `events` store reports (`StoreBenchmarkEvents`, twenty an account), without
    /// snapshots: what the books and a full replay read alike.
    public static func storeLedger(events: Int) async throws -> String {
        let path = "\(Scratch.root)/store-fixture-\(events)"
        let done = path + ".complete"
        if Scratch.exists(done) { return path }
        Scratch.remove(path)
        var configuration = quiet
        configuration.snapshotInterval = nil
        configuration.snapshotOnClose = false
        configuration.maximumBatchEvents = 20_000
        let ledger = try Ledger.open(at: path, catalog: StoreBenchmarkEvents.catalog, configuration: configuration)
        var generator = StoreBenchmarkEvents(accounts: max(1000, events / 20))
        var written = 0
        while written < events {
            let count = min(10_000, events - written)
            let results = try await ledger.append(contentsOf: generator.next(count))
            precondition(results.allSatisfy { if case .success = $0 { true } else { false } }, "fixture events must all append")
            written += count
        }
        await ledger.close()
        Scratch.touch(done)
        return path
    }

    /// A fixture written before the snapshot format last changed has snapshots this version
    /// ignores (the open benchmarks would then replay the whole log): it is built again.
    /// Whether the fixture is of the format this version writes, with usable snapshots; an
    /// older one is built again (a replay of it would measure the old format).
    private static func snapshotsAreUsable(_ path: String) throws -> Bool {
        let log = try LedgerLog.open(at: path)
        defer { log.close() }
        guard !log.isOfOlderFormat else { return false }
        let snapshots = try log.snapshots()
        return !snapshots.isEmpty && snapshots.allSatisfy { $0.problem == nil }
    }
}
