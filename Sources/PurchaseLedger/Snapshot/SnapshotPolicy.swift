import Logging
import Synchronization

/// When the writer writes snapshots: every `snapshotInterval` events, a slice at a time
/// between commits, so that a busy writer pauses appends for one slice (`snapshotSlice`) at a
/// time, never for a whole snapshot, and an idle one finishes promptly. Runs on the writer's
/// thread only.
final class SnapshotPolicy: Sendable {
    private let interval: UInt64?
    private let slice: Duration
    /// How many snapshots to keep (at least 2: a reader may still be on the one before).
    let kept: Int
    private let logger: Logger
    /// After a periodic snapshot failed, no new one before this position.
    private let notBefore = Atomic<UInt64>(0)

    init(_ configuration: Ledger.Configuration) {
        interval = configuration.snapshotInterval
        slice = configuration.snapshotSlice
        kept = max(2, configuration.snapshotsKept)
        logger = configuration.logger
    }

    /// After a commit: begins a snapshot when one is due, and writes a slice of the snapshot
    /// under way, and more slices while `appendsWaiting` says none waits. True when it wrote
    /// slices without failing.
    func afterCommit(_ live: LiveProjections, appendsWaiting: () -> Bool) -> Bool {
        do {
            if !live.isWritingSnapshot {
                guard let interval, interval > 0,
                      live.position - (live.snapshot?.position ?? 0) >= interval,
                      live.position >= notBefore.load(ordering: .relaxed), live.beginSnapshot()
                else { return false }
            }
            repeat {
                try live.writeSnapshotSlice(keep: kept, budget: slice)
            } while live.isWritingSnapshot && !appendsWaiting()
            return true
        } catch {
            // Appends go on; another interval later a snapshot is tried again (not at every
            // commit: a full disk would make each one pay for a doomed snapshot), and meanwhile
            // an open replays a longer tail.
            live.abandonSnapshot()
            notBefore.store(live.position + (interval ?? 0), ordering: .relaxed)
            logger.error("snapshot failed", metadata: ["error": "\(StorageErrors.map(error))"])
            return false
        }
    }
}
