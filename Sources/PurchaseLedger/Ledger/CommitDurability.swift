import Dispatch
import Logging
import Synchronization

/// The writer's commits between their commit and their last flush, and the answers that wait
/// for it: so that the writer judges its next batch while the flush runs (on storage that
/// `syncsCommitsLater`, LMDB's), and still answers nothing before it is durable.
///
/// A commit of LMDB flushes its pages, then writes the meta page that makes them the newest
/// state; the meta page's flush is this type's. The writer registers each commit as it returns
/// (`committed`), then flushes at once when nothing else waits (`sync(whileOthersWait:)`), or
/// hands the flush to a thread of its own and takes its next batch. A flush makes durable every
/// commit registered before it began, and then runs their answers and wakes the feeds.
///
/// Readers see a commit before its flush returns, as they saw one during LMDB's own flush of
/// its meta page: what a crash of the system may undo, and nothing before it. The change feed
/// of this process stops short of it (`undurableFrom`): what it delivers, linked servers keep.
///
/// On storage whose commits are durable as they return (PostgreSQL), `committed` answers at
/// once.
final class CommitDurability: Sendable {
    private struct Commit {
        /// The clock reading the commit recorded, if any.
        var reading: ClockReading?
        /// False for a write that stored nothing (its answers wait for the commits before it).
        var wrote: Bool
        /// Whether the feeds are woken once it is durable (it appended events).
        var appended: Bool
        /// What is done once it is durable, or once its flush failed.
        var answer: @Sendable (Result<Void, any Error>) -> Void
    }

    private struct State {
        /// The reading of the commit being written, if it records one: read by the feed before
        /// the commit returns.
        var committing: ClockReading?
        /// Registered and not yet flushed, oldest first.
        var waiting: [Commit] = []
        /// Taken by the flush that runs.
        var flushing: [Commit] = []
        /// Set by a flush that failed: what the file holds is no longer known, so every later
        /// answer fails too, until the ledger is opened again (as PostgreSQL stops at a failed
        /// fsync), and the feed holds back from the first commit not known durable.
        var failure: (error: any Error, from: ClockReading?)?
    }

    private let storage: any LedgerStorage
    private let committedSignal: CommitSignal
    private let state = Mutex(State())
    /// One flush at a time: a flush makes durable only what was written before it began, and
    /// the next must not answer before the one before it returned.
    private let flushes = Mutex(())
    private let flusher = DispatchQueue(label: "PurchaseLedger.flush", qos: .userInitiated)
    private let syncsLater: Bool
    private let logger: Logger

    init(storage: any LedgerStorage, committed: CommitSignal, logger: Logger) {
        self.storage = storage
        committedSignal = committed
        self.logger = logger
        syncsLater = storage.syncsCommitsLater
    }

    /// The writer is about to commit `reading` (inside its write): the feed holds back from
    /// it until it is durable.
    func committing(_ reading: ClockReading) {
        guard syncsLater else { return }
        state.withLock { $0.committing = reading }
    }

    /// The write failed: nothing of it was committed.
    func abandoned() {
        guard syncsLater else { return }
        state.withLock { $0.committing = nil }
    }

    /// A write returned: `answer` runs once it is durable (at once, on storage whose commits
    /// are durable as they return). `wrote` is false for a write that stored nothing: its
    /// answers still wait for the commits before it (a duplicate's answer says the event is
    /// in the log). `appended`: the feeds are woken once it is durable.
    func committed(wrote: Bool, appended: Bool, answer: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        guard syncsLater else {
            answer(.success(()))
            if appended { committedSignal.signal() }
            return
        }
        state.withLock { state in
            state.waiting.append(Commit(reading: state.committing, wrote: wrote, appended: appended, answer: answer))
            state.committing = nil
        }
    }

    /// Flushes what is registered: on this thread when nothing else waits for the writer (an
    /// appender waiting for each answer: a hand-off would cost it a thread's wake-up), on the
    /// flusher's thread otherwise, while the writer takes its next batch.
    func sync(whileOthersWait othersWait: Bool) {
        guard syncsLater else { return }
        if othersWait {
            flusher.async { self.flush() }
        } else {
            flush()
        }
    }

    /// Flushes what is registered and answers it (a close's last flush).
    func syncNow() {
        guard syncsLater else { return }
        flush()
    }

    /// The oldest clock reading that is not durable yet, if any: the change feed reads up to
    /// it, not from it on (readings are ordered, and a later one stands on it).
    func undurableFrom() -> ClockReading? {
        guard syncsLater else { return nil }
        return state.withLock { state in
            if let failure = state.failure { return failure.from }
            return state.flushing.lazy.compactMap(\.reading).first
                ?? state.waiting.lazy.compactMap(\.reading).first
                ?? state.committing
        }
    }

    private func flush() {
        flushes.withLock { _ in
            let taken = state.withLock { state in
                state.flushing = state.waiting
                state.waiting = []
                return state.flushing
            }
            guard !taken.isEmpty else { return }
            var outcome = Result<Void, any Error>.success(())
            if let failure = state.withLock({ $0.failure }) {
                outcome = .failure(failure.error)
            } else if taken.contains(where: \.wrote) {
                // A flush after writes that stored nothing has nothing to make durable: the
                // flush before this one returned before this one began.
                do {
                    try storage.syncCommits()
                } catch {
                    let failure = StorageErrors.map(error)
                    outcome = .failure(failure)
                    state.withLock { $0.failure = (failure, taken.lazy.compactMap(\.reading).first) }
                    logger.critical("flushing commits failed: every append is refused until the ledger is opened again", metadata: [
                        "error": "\(failure)",
                    ])
                }
            }
            state.withLock { $0.flushing = [] }
            for commit in taken { commit.answer(outcome) }
            if case .success = outcome, taken.contains(where: \.appended) { committedSignal.signal() }
        }
    }
}
