import Logging
import Synchronization

/// The change feed as an `AsyncSequence`: the changes after a cursor, derived from storage
/// (`ChangeDeriver`), catching up from the log and then, when following, the commits as they
/// come (on PostgreSQL, other processes' too). Memory stays bounded whatever the backlog: it
/// derives at most 4,096 of the log's events at a time (`eventsAFill`, even within one commit),
/// besides the accounts' state a replay keeps. A slow consumer
/// never holds the writer up: the feed reads committed storage, it is never told.
///
/// Following a `Ledger` open for writing, it also ticks the ledger's clock when the next
/// instant where some projection changes by time alone has passed, so that an expiry at 12:00
/// comes out at 12:00 with nothing appended.
public struct LedgerChanges: AsyncSequence, Sendable {
    public typealias Element = LedgerChange

    let storage: any LedgerStorage
    let after: FeedCursor
    let follow: Bool
    /// Leaves out the store's reports from these environments (a feed of some of them).
    var excluding: Set<StoreEnvironment> = []
    /// Records a tick of the clock (a ledger open for writing); nil otherwise.
    let tick: (@Sendable () async throws -> Void)?
    /// Resolves when the ledger may have committed (a commit of this process), so that a
    /// follower need not wait out its poll.
    let commits: CommitSignal?
    let pollInterval: Duration
    /// On storage other processes write too, what keeps the projections of the ledger this
    /// feed follows up with them: the feed reads no event the projections have not applied.
    /// Reading another process's forget renames the accounts this process knows
    /// (`AccountNames.reread`), and its projections must take in the events before the forget
    /// under the former names first: a refund read after the rename would be applied to the
    /// pseudonym's stored state and lost at the forget.
    var follower: OtherProcessesFollower?

    public func makeAsyncIterator() -> Iterator {
        Iterator(feed: self)
    }

    public struct Iterator: AsyncIteratorProtocol, Sendable {
        let feed: LedgerChanges
        private var deriver: ChangeDeriver?
        /// The changes derived and not yet handed out, the next one last: each is moved out,
        /// not copied.
        private var buffer: [LedgerChange] = []
        /// How many of the log's events this derivation applied so far: its cost.
        public private(set) var eventsDerived = 0
        /// How many account projections it built to judge changes.
        var projectionsBuilt: Int { deriver?.projectionsBuilt ?? 0 }
        /// The clock readings read and not yet followed whole, the next first.
        private var readings: [ClockReading] = []
        /// The most purchases one change's projection listed so far (and one more): what a fill
        /// expects of the changes it has yet to find.
        private var widestChange = 1
        /// What ended the derivation: a fill that throws may leave a reading half applied and
        /// its changes so far dropped, so the iterator throws it again rather than go on.
        private var failure: (any Error)?

        init(feed: LedgerChanges) {
            self.feed = feed
        }

        public mutating func next() async throws -> LedgerChange? {
            while buffer.isEmpty {
                guard try await fill() else { return nil }
            }
            return buffer.popLast()
        }

        /// What one step of a bounded read found: a change, or, once the derivation applied
        /// `budget` events more without finding one, how far it got.
        public enum Step: Sendable {
            case change(LedgerChange)
            /// No change after the feed's cursor up to here: the cursor to read on from. Every
            /// change at or before it was derived (and was not after the cursor asked for).
            case reached(FeedCursor)
            /// The end of the feed (not following).
            case end
        }

        /// The next change, unless finding it takes more than `budget` more of the log's events
        /// (it never applies more, even within one commit): then where the derivation got to,
        /// from which reading on continues it. For a reader whose work is bounded
        /// (`ChangeFeedHub`'s catch-ups).
        public mutating func next(within budget: Int) async throws -> Step {
            let limit = eventsDerived + budget
            while buffer.isEmpty {
                // Every event change through the position applied is derived, and no time
                // change lies at a position within a reading.
                if eventsDerived >= limit, let deriver {
                    return .reached(Swift.max(feed.after, FeedCursor(position: deriver.state.position)))
                }
                guard try await fill(maximumEvents: limit - eventsDerived) else { return .end }
            }
            return buffer.popLast().map(Step.change) ?? .end
        }

        /// Derives the next readings' changes into the buffer, applying at most `maximumEvents`
        /// of the log's events; false at the end when not following.
        private mutating func fill(maximumEvents: Int = eventsAFill) async throws -> Bool {
            if let failure { throw failure }
            do {
                return try await fillOnce(maximumEvents: maximumEvents)
            } catch {
                failure = error
                throw error
            }
        }

        private mutating func fillOnce(maximumEvents: Int) async throws -> Bool {
            try Task.checkCancellation()
            let log = LogReader(storage: feed.storage)
            if deriver == nil {
                guard let catalog = try log.currentCatalog() else {
                    guard feed.follow else { return false }
                    try await wait()
                    return true
                }
                deriver = try Self.seeded(before: feed.after, log: log, catalog: catalog, excluding: feed.excluding)
                    ?? ChangeDeriver(catalog: catalog, excluding: feed.excluding)
                // What the reader has is not judged again.
                deriver!.silentThrough = feed.after
            }
            if readings.isEmpty {
                // And the catalogs, in the same reading of the storage: one recorded meanwhile (by
                // another process) governs some of them, and it is recorded before the events it governs.
                let catalogs: [(effectiveFrom: UInt64, json: [UInt8])]?
                (readings, catalogs) = try feed.storage.read { [last = deriver!.lastReading] reader in
                    let readings = try reader.clockReadings(after: last, limit: 4)
                    return (readings, readings.isEmpty ? nil : try reader.catalogs())
                }
                if let catalogs { try deriver!.refreshCatalogs(recorded: catalogs, log: log) }
            }
            if let follower = feed.follower, let last = readings.last?.position, last > follower.appliedPosition {
                // Not waited for here: a catch-up queued behind a busy writer could wait long.
                // The readings past the projections are read again at the next fill.
                follower.scheduleCatchUp()
                let applied = follower.appliedPosition
                readings.removeAll { $0.position > applied }
                if readings.isEmpty {
                    // Until the projections move (this process's commit, or a catch-up), however
                    // the feed ends: one that does not follow ends at the head, not before it.
                    try await wait()
                    return true
                }
            }
            guard !readings.isEmpty else {
                guard feed.follow else { return false }
                if let tick = feed.tick, let due = deriver!.nextDueInstant(), due <= .now() {
                    try await tick()
                } else {
                    try await wait()
                }
                return true
            }
            let after = feed.after
            var changes: [LedgerChange] = []
            // At most `eventsAFill` events, even within one commit: between fills a bounded read
            // stops and a cancelled one ends.
            var left = Swift.max(1, Swift.min(maximumEvents, Self.eventsAFill))
            // And few changes, listing few purchases in all: each holds its account's
            // projection, which for a long subscriber lists every purchase. No call may take
            // the fill far past its bound, were its changes as wide as the widest seen yet.
            var purchases = 0
            var widest = widestChange
            defer { widestChange = widest }
            while let reading = readings.first, left > 0, changes.count < Self.changesAFill, purchases < Self.purchasesAFill {
                let from = deriver!.state.position
                let room = Swift.max(1, (Self.purchasesAFill - purchases) / widest)
                let followed = try deriver!.advance(
                    to: reading, log: log, maximumEvents: Swift.min(left, Self.changesAFill, room),
                    maximumTimeChanges: Swift.min(Self.changesAFill - changes.count, room)
                ) { change in
                    guard change.cursor > after else { return }
                    let listed = 1 + change.projection.storeTransactions.count
                    changes.append(change)
                    purchases += listed
                    widest = Swift.max(widest, listed)
                }
                let applied = Int(truncatingIfNeeded: deriver!.state.position &- from)
                eventsDerived += applied
                left -= Swift.max(1, applied)
                if followed { readings.removeFirst() }
            }
            // Reversed in place: each change moved, not copied.
            changes.reverse()
            buffer = changes
            return true
        }

        /// The most events one fill applies.
        static let eventsAFill = 4_096
        /// A fill stops applying events once it holds this many changes,
        static let changesAFill = 256
        /// or once their projections list this many purchases (each change counting one more).
        static let purchasesAFill = 16_384

        /// A derivation that starts at the newest snapshot before `cursor` instead of the log's
        /// start (`ChangeDeriver.init(seed:after:)`): the snapshot's state at the clock reading of
        /// its position (the commit it was taken after). Nil when there is none (no snapshot far
        /// enough back, a ledger older than its clock, a snapshot another schema wrote): the
        /// derivation then starts from the log's start.
        static func seeded(
            before cursor: FeedCursor, log: LogReader, catalog: Catalog, excluding: Set<StoreEnvironment>
        ) throws -> ChangeDeriver? {
            guard cursor.position > 0 else { return nil }
            let storage = log.storage
            let candidates = try storage.read { reader in
                try SnapshotStates.headers(reader).compactMap { try? $0.header.get() }.map(\.position)
            }
            // Changes at or before the snapshot's position (after every account's there) are not derived.
            for position in candidates.sorted(by: >) where FeedCursor(position: position) <= cursor && position > 0 {
                let reading = try storage.read { reader in
                    try reader.clockReadings(after: ClockReading(position: position - 1, time: .latest), limit: 1).first
                }
                guard let reading, reading.position == position else { continue }
                let state = try log.state(at: position, catalog: catalog, useSnapshots: true, logger: Logger(label: "PurchaseLedger"))
                guard state.position == position else { continue }
                return ChangeDeriver(seed: state, after: reading, catalog: catalog, excluding: excluding)
            }
            return nil
        }

        private func wait() async throws {
            if let commits = feed.commits {
                await commits.wait(timeout: feed.pollInterval)
            } else {
                try await Task.sleep(for: feed.pollInterval)
            }
            try Task.checkCancellation()
        }
    }
}

/// Wakes the feeds that follow a ledger when it commits: each waiter resumes at the next
/// commit or after its timeout, whichever comes first.
final class CommitSignal: Sendable {
    private let waiters = Mutex<[UInt64: CheckedContinuation<Void, Never>]>([:])
    private let nextID = Atomic<UInt64>(0)

    init() {}

    func signal() {
        let resumed = waiters.withLock { waiters in
            defer { waiters.removeAll() }
            return Array(waiters.values)
        }
        for waiter in resumed { waiter.resume() }
    }

    func wait(timeout: Duration) async {
        let id = nextID.add(1, ordering: .relaxed).newValue
        // Registered before the timer starts, and resumed once by whichever comes first.
        await withCheckedContinuation { continuation in
            waiters.withLock { $0[id] = continuation }
            Task {
                try? await Task.sleep(for: timeout)
                self.resume(id)
            }
        }
    }

    private func resume(_ id: UInt64) {
        waiters.withLock { $0.removeValue(forKey: id) }?.resume()
    }
}
