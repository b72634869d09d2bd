import Dispatch
import Logging
import Synchronization

/// A purchase ledger: an append-only, durable log of payment-queue events, and the projections
/// built from it (entitlements, balances, unfinished transactions), over a storage backend
/// (PurchaseLedgerLMDB's directory, PurchaseLedgerPostgres's database).
///
/// ```swift
/// let ledger = try Ledger.open(at: "/var/lib/store/ledger", catalog: catalog)
/// let outcome = try await ledger.append(event)          // durable when it returns
/// let owned = try ledger.projection(of: "user-42")
/// await ledger.close()
/// ```
///
/// - One writer: appends from any number of tasks are queued to a single writer, validated in
///   order against the state each leaves behind, and committed together; each caller resumes
///   after the commit that holds its event is on disk.
/// - Many readers: the accounts changed since the newest snapshot are in memory; the others are
///   read from that snapshot when asked for. Opening reads the newest snapshot and replays the
///   log after it, so it takes the time of that tail, not of the whole log.
/// - One process writes a ledger at a time (an advisory lock enforces it); any number may open
///   it read-only.
public final class Ledger: Sendable {
    public struct Configuration: Sendable {
        /// `.synchronous` by default: an append returns only once its commit is on disk.
        /// `.noSync` skips the flush, and may lose the last appends on an OS crash or power loss.
        public var durability: Durability = .synchronous
        /// Open for reading only: appends throw `StorageError.readOnly`.
        public var readOnly = false
        /// Most events committed in one transaction by group commit.
        public var maximumBatchEvents = 4096
        /// Most events waiting for the writer; beyond, submitters wait (in order) for room.
        public var maximumQueuedEvents = 65_536
        /// Open from the newest snapshot when there is a usable one (false: replay the whole
        /// log, the audit path).
        public var useSnapshots = true
        /// Write a snapshot once this many events were appended since the last one (nil: never
        /// by count). A snapshot holds only the accounts changed since the one before, and is
        /// written between commits a slice at a time (`snapshotSlice`).
        public var snapshotInterval: UInt64? = 100_000
        /// How long a slice of a periodic snapshot may hold the writer (appends wait meanwhile;
        /// zero: 32 accounts a slice).
        public var snapshotSlice: Duration = .milliseconds(5)
        /// How many snapshots to keep (at least 2).
        public var snapshotsKept = 3
        /// Write a snapshot when the ledger is closed, if anything changed since the last one.
        public var snapshotOnClose = true
        /// How many accounts unchanged since the newest snapshot stay decoded in memory (the
        /// others are read from the snapshot when asked for). Accounts changed since the
        /// snapshot are always in memory.
        public var cachedAccounts = 100_000
        public var logger = Logger(label: "PurchaseLedger")
        /// Called on the writer's thread after each write transaction (keep it quick): what
        /// it held and how long it took, for metrics.
        public var onCommit: (@Sendable (CommitReport) -> Void)? = nil
        /// Where the ledger does CPU work of its own off the writer: the proof tree's leaves,
        /// read and hashed a batch at a time (`extendProofTree()`, `followProofTree()`,
        /// `signCheckpoint(with:origin:)`). By default `defaultBackgroundExecutor`; nil, the
        /// calling task's executor. (`ledger-server` gives its own, by its `feedPriority`.)
        public var backgroundExecutor: (any TaskExecutor)? = Configuration.defaultBackgroundExecutor

        /// Threads of the ledger's own in Linux's idle class, one a core, started at their
        /// first job: a batch of leaves (milliseconds of CPU work without a suspension point)
        /// holds none of the cooperative pool's threads, which the appenders resume on, and on
        /// a saturated machine the tree lags instead of the appends slowing. A command that has
        /// nothing else to do (the `ledger` tool's proofs and checkpoints) takes nil instead.
        public static var defaultBackgroundExecutor: any TaskExecutor { BackgroundExecutor.shared }
        /// Opens (or creates) a ledger that `ledger copy` is copying into, whose format marker
        /// says so until `markCopyComplete()`; every other open refuses such a ledger.
        package var copying = false

        public init() {}
    }

    /// Where the ledger is: its directory, or (PostgreSQL) its database URL without a password.
    public let location: String
    let configuration: Configuration
    let storage: any LedgerStorage
    let log: LogReader
    let live: LiveProjections
    /// Nil when read-only.
    let writer: LedgerWriter?
    /// Wakes the change feeds that follow this ledger when it commits.
    let commitSignal = CommitSignal()
    /// One extension of the proof tree at a time (`extendProofTree()`).
    let proofTreeTurns = ProofTreeTurns()
    /// What extending the proof tree keeps between its batches, used in its turns.
    let proofTreeAccounts = Mutex(ProofTreeAccounts())
    /// Shared storage only: catches up with other processes.
    /// Internal, not private: a test stops its watching to choose what one catch-up reads.
    let follower: OtherProcessesFollower?
    let isClosed = Atomic<Bool>(false)

    /// The catalog in force: the one given or recorded at open, or a larger one another
    /// process sharing the ledger recorded since.
    public var catalog: Catalog {
        live.catalog
    }

    /// Opens the ledger held by `storage`: each backend's entry point (`Ledger.open(at:)` in
    /// PurchaseLedgerLMDB, `Ledger.open(postgres:)` in PurchaseLedgerPostgres). Takes ownership
    /// of `storage`: it is closed when this throws, or when the ledger closes.
    package init(location: String, storage: any LedgerStorage, catalog newCatalog: Catalog?, configuration: Configuration) throws {
        let clock = ContinuousClock()
        let started = clock.now
        self.location = location
        self.configuration = configuration
        self.storage = storage
        let logger = configuration.logger
        let catalogVersion: CatalogVersion
        do {
            log = LogReader(storage: storage)
            let catalog: Catalog
            (catalog, catalogVersion) = try Self.establishCatalog(newCatalog, storage: storage, location: location, copying: configuration.copying, logger: logger)
            let opening = try Opening.projections(storage: storage, catalog: catalog, configuration: configuration)
            live = opening.live
            if !configuration.readOnly, !configuration.copying { try Self.startClock(storage) }
            logger.info("opened ledger", metadata: [
                "location": "\(location)", "events": "\(live.position)", "from": "\(opening.source)",
                "took": "\(clock.now - started)", "readOnly": "\(configuration.readOnly)",
            ])
        } catch {
            storage.close()
            throw error
        }
        // The one serial queue where the projections change: the writer's thread, or a
        // read-only follower's.
        let changes = DispatchQueue(label: configuration.readOnly ? "PurchaseLedger.follower" : "PurchaseLedger.writer", qos: .userInitiated)
        follower = storage.isShared
            ? OtherProcessesFollower(
                storage: storage, live: live, catalogVersion: catalogVersion, changes: changes, caughtUp: commitSignal, logger: logger)
            : nil
        writer = configuration.readOnly
            ? nil
            : LedgerWriter(
                storage: storage, live: live, changes: changes, follower: follower, configuration: configuration,
                committed: commitSignal)
        follower?.startWatching()
    }

    /// Closes the ledger: waits for queued appends to commit, writes a snapshot (by policy),
    /// then closes the storage. Later appends throw `StorageError.closed`.
    public func close() async {
        guard !isClosed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        await follower?.stop()
        if configuration.snapshotOnClose, let writer {
            _ = try? await writer.submit(.snapshot).results()
        }
        await writer?.close()
        storage.close()
    }

    // MARK: Appending

    /// Appends one event: `.appended(position:)` once its commit is durable, or `.duplicate(of:)`
    /// when the log already holds it (nothing is written). Throws `LedgerError` when a rule
    /// rejects it (nothing is written), `StorageError` when the storage fails.
    @discardableResult
    public func append(_ event: Event) async throws -> AppendOutcome {
        let results = try await append(contentsOf: [event])
        return try results[0].get()
    }

    /// Appends events in order, in one durable transaction, each checked against the state the
    /// ones before it left: one result per event. A rejected event rejects only itself. Throws
    /// when the storage fails (nothing of the batch was written), and `CancellationError` when
    /// the task was cancelled before the writer took the events (nothing was written either).
    /// `duplicates` says what an id already in the log answers: the format's `duplicate`
    /// whatever the event there (`.byID`), or only when it is the same fact (`.sameFact`, for
    /// the ids a component makes itself: `OwnEventIDs`).
    public func append(contentsOf events: [Event], duplicates: DuplicatePolicy = .byID) async throws -> [AppendResult] {
        try await submit(contentsOf: events, duplicates: duplicates).results()
    }

    /// Appends facts in order, in one durable transaction, each fact's events all or none: when
    /// the rules refuse one event of a fact, none of its events is appended, and each answers
    /// the refusal (the refused event with its own error, the others with its code and a
    /// message naming it). One result per event, fact by fact. For what is one fact in several
    /// events: a transfer and the restore that asked for it, a purchase and its finish. A
    /// `forgotten` event among them is refused unless it is the only event (a forget commits
    /// alone).
    public func append(facts: [[Event]], duplicates: DuplicatePolicy = .byID) async throws -> [[AppendResult]] {
        var events: [Event] = []
        var runs: [Range<Int>] = []
        for fact in facts {
            if fact.count > 1 { runs.append(events.count..<events.count + fact.count) }
            events += fact
        }
        let results = try await submit(WriteQueue.Appends(events: events, duplicates: duplicates, facts: runs)).results()
        var answered: [[AppendResult]] = []
        var next = results[...]
        for fact in facts {
            answered.append(Array(next.prefix(fact.count)))
            next = next.dropFirst(fact.count)
        }
        return answered
    }

    /// Queues events behind everything submitted before and returns once they are queued;
    /// `results()` waits for the commit. Submissions are checked and logged in the order they
    /// were made, so a producer can pipeline (submit the next batch while the previous one
    /// commits) without reordering its events. When `maximumQueuedEvents` are already waiting,
    /// this waits, in order of arrival, for room.
    public func submit(contentsOf events: [Event], duplicates: DuplicatePolicy = .byID) async throws -> PendingAppends {
        try await submit(WriteQueue.Appends(events: events, duplicates: duplicates))
    }

    func submit(_ appends: WriteQueue.Appends) async throws -> PendingAppends {
        guard let writer else {
            throw StorageError(.readOnly, "the ledger at \(location) is open read-only")
        }
        let events = appends.events
        guard !events.isEmpty else { return PendingAppends(results: []) }
        // Facts of several events go whole: a forget among them is refused (it commits alone).
        guard events.count > 1, appends.facts.isEmpty, events.contains(where: { $0.type == .forgotten }) else {
            return try await writer.submit(.append(appends))
        }
        // A forget commits in a write of its own (`Forgetting`): the events before it, it, and
        // the events after it go in three submissions, in order. (A fact of several events
        // never holds a forget: `Forgetting` refuses one that is not alone.)
        var parts: [PendingAppends] = []
        var run: [Event] = []
        func submitRun() async throws {
            guard !run.isEmpty else { return }
            parts.append(try await writer.submit(.append(WriteQueue.Appends(events: run, duplicates: appends.duplicates))))
            run = []
        }
        for event in events {
            if event.type == .forgotten {
                try await submitRun()
                parts.append(try await writer.submit(.append(WriteQueue.Appends(events: [event], duplicates: appends.duplicates))))
            } else {
                run.append(event)
            }
        }
        try await submitRun()
        return PendingAppends(joining: parts)
    }

    /// Forgets a customer (docs/FORMAT.md, "Forgetting a customer"): appends a `forgotten`
    /// event, in a commit of its own that renames the account to its pseudonym
    /// (`forgotten/<handle>`) wherever the ledger stores it; returns the outcome and the
    /// pseudonym. The account's books stay, as the pseudonym's; a later event of `account`
    /// starts a new account. `requestedBy` says who asked (1–128 bytes), nothing about the
    /// person. Nil when the ledger has no event of `account`; throws `LedgerError` when the
    /// event is refused (`requestedBy` out of bounds).
    public func forget(
        _ account: String, requestedBy: String, at time: Timestamp = .now()
    ) async throws -> (outcome: AppendOutcome, pseudonym: String)? {
        guard EventLimits.keyBytes.contains(account.utf8.count),
              let handle = try storage.read({ try $0.accountHandle(of: account) }),
              try live.withAccount(UTF8Key(account), { _, _, _ in true }) == true
        else { return nil }
        let pseudonym = Forgotten.pseudonym(ofHandle: handle)
        // The id is the handle's (`forget/<handle>`). No event but this forget can hold it now
        // (`OwnEventIDs`), but a ledger written before may hold it under another event: then
        // the next form (`forget/<handle>/2`, …). Never taken for "already forgotten" unless
        // the event there is this handle's forget (another request's, just before).
        for attempt in 1...Self.forgetIDAttempts {
            let id = OwnEventIDs.forgetID(handle: handle, attempt: attempt)
            if let existing = try position(ofEventID: id) {
                if try isForget(of: handle, at: existing) { return nil }
                continue
            }
            let event = Event(id: id, account: account, at: time, payload: .forgotten(Forgotten(requestedBy: requestedBy)))
            switch try await append(contentsOf: [event], duplicates: .sameFact)[0] {
            case .success(let outcome):
                return (outcome, pseudonym)
            case .failure(let error):
                // The id taken meanwhile (by this handle's forget: the account is forgotten).
                guard let existing = try position(ofEventID: id) else { throw error }
                if try isForget(of: handle, at: existing) { return nil }
            }
        }
        throw StorageError(.io, "the ledger holds \(Self.forgetIDAttempts) forms of this account's forget id under other events")
    }

    /// How many forms of a forget's id `forget` tries.
    static let forgetIDAttempts = 16

    /// Whether the record at `position` is the forget of the account with `handle`.
    private func isForget(of handle: UInt64, at position: UInt64) throws -> Bool {
        try storage.read { reader in
            var forgets = false
            _ = try reader.record(at: position) { bytes in
                let event = try LogReader.decode(bytes, at: position, reader: reader, names: storage.accountNames, readingProofs: false)
                forgets = event.type == .forgotten && Forgotten.handle(ofPseudonym: event.account) == handle
            }
            return forgets
        }
    }

    /// Writes a snapshot of the projections now (between commits, in its own transaction) and
    /// returns the position it reflects; nil when nothing changed since the last one. On shared
    /// storage another process may have written a newer one meanwhile: this one is then dropped,
    /// and the position returned is that of the newer one, which the ledger now reads from.
    @discardableResult
    public func writeSnapshot() async throws -> UInt64? {
        guard let writer else {
            throw StorageError(.readOnly, "the ledger at \(location) is open read-only")
        }
        let before = live.snapshot?.position
        _ = try await writer.submit(.snapshot).results()
        let after = live.snapshot?.position
        return after == before ? nil : after
    }

    /// Shared storage (PostgreSQL): applies now what other processes appended, instead of at
    /// their next notification or poll; returns the position caught up to. Other storage has
    /// one writer, this one, so there is nothing to catch up with.
    @discardableResult
    public func catchUp() async throws -> UInt64 {
        try await follower?.catchUpNow()
        return position
    }

    /// Runs `body` on the writer, between commits (for tests that drive its steps).
    func onWriter<R>(_ body: () throws -> R) throws -> R {
        guard let writer else { throw StorageError(.readOnly, "the ledger at \(location) is open read-only") }
        return try writer.onWriter(body)
    }

    // MARK: Queries

    /// The position of the last appended event.
    public var position: UInt64 {
        live.position
    }

    /// The position of the last record storage holds: ahead of `position` from a commit until
    /// its projections are published, and on shared storage by what other processes appended
    /// and this one has not caught up with.
    public func storedPosition() throws -> UInt64 {
        try storage.read { try $0.lastPosition() }
    }

    /// What `account` owns as of `time`; nil when the ledger has no event of that account.
    public func projection(of account: String, asOf time: Timestamp = .now()) throws -> AccountProjection? {
        try live.projection(of: UTF8Key(account), asOf: time).projection
    }

    /// What `account` owns as of `time` (nil when the ledger has no event of it), with the log
    /// position the answer reflects: both read from one consistent view. `excluding` leaves out
    /// the store's reports from those environments (sandbox purchases, say), and the credits of
    /// consumables bought only there; `timeline` adds the account's timeline.
    public func projectionAndPosition(
        of account: String, asOf time: Timestamp = .now(), excluding environments: Set<StoreEnvironment> = [],
        timeline: Bool = false
    ) throws -> (projection: AccountProjection?, position: UInt64) {
        try live.projection(of: UTF8Key(account), asOf: time, excluding: environments, timeline: timeline)
    }

    /// The sorted product ids `account` is entitled to as of `time`.
    public func entitlements(of account: String, asOf time: Timestamp = .now()) throws -> [String] {
        try projection(of: account, asOf: time)?.entitlements ?? []
    }

    /// `account`'s consumable balances.
    public func balances(of account: String) throws -> [String: Int64] {
        try projection(of: account)?.balances ?? [:]
    }

    /// `account`'s entries not yet finished, in the order opened.
    public func unfinished(of account: String) throws -> [UnfinishedTransaction] {
        try projection(of: account)?.unfinished ?? []
    }

    /// The current projections of every account, decoded in full (O(accounts): for audits and
    /// tests; `projection(of:)` is the per-account query).
    public func currentState() throws -> LedgerState {
        try live.materialize()
    }

    /// The projections after the first `position` events: from the newest snapshot at or before
    /// it, and the log after that snapshot.
    public func state(at position: UInt64) throws -> LedgerState {
        let last = self.position
        guard position <= last else {
            throw StorageError(.damaged, "position \(position) is beyond the end of the log (\(last))", position: position)
        }
        return try log.state(at: position, catalog: live.catalog, useSnapshots: true, logger: configuration.logger)
    }

    /// `account`'s events after `position` (from the first when 0), at most `limit`, in order.
    public func history(account: String, after position: UInt64 = 0, limit: Int = .max) throws -> [LogRecord] {
        try log.history(account: account, after: position, limit: limit)
    }

    /// The account whose entry holds store transaction `transaction` (ids are global: at most
    /// one account does); nil when no entry does. For a store notification that names a
    /// transaction but no account.
    public func account(holdingTransaction transaction: String) throws -> String? {
        // An id no event could carry is held by no one: not looked up at all.
        guard EventLimits.nameBytes.contains(transaction.utf8.count) else { return nil }
        return try storage.read { try $0.holder(ofTransaction: transaction) }?.entry.account
    }

    /// The account that owns a store transaction now: the account holding it (else its original
    /// transaction `chain`), followed through the chain's transfers; nil when none holds either.
    public func owner(ofTransaction transaction: String, chain: String) throws -> String? {
        guard let holder = try account(holdingTransaction: transaction) ?? account(holdingTransaction: chain) else { return nil }
        return try account(owningChain: chain, namedBy: holder)
    }

    /// The account that owns the chain `originalTransaction` names now, starting from
    /// `account` (Apple's token, say): where its transfers took it, or `account` itself.
    public func account(owningChain originalTransaction: String, namedBy account: String) throws -> String {
        guard EventLimits.nameBytes.contains(originalTransaction.utf8.count) else { return account }
        let chain = UTF8Key(originalTransaction)
        return try Rules.owner(of: chain, heldBy: account) { owner in
            try live.withAccount(owner) { state, _, _ in state.transfers[chain] } ?? nil
        }
    }

    /// The handle the account table gives `name` (an account, a customer's token or app
    /// transaction id); nil when it has none. For ids that must name a customer without
    /// holding the name (`AppStoreCall.eventID`).
    package func accountHandle(of name: String) throws -> UInt64? {
        guard (1...256).contains(name.utf8.count) else { return nil }
        if let cached = storage.accountNames.cachedHandle(of: name) { return cached }
        return try storage.read { try $0.accountHandle(of: name) }
    }

    /// When the chain `originalTransaction` names came to `account` from another account (its
    /// last `transferred` of the chain joined it, or a `shared` gave it): the event's `at`; nil
    /// when the chain did not come to it (it bought it, or holds none of it, or moved it away).
    public func arrival(ofChain originalTransaction: String, in account: String) throws -> Timestamp? {
        guard EventLimits.nameBytes.contains(originalTransaction.utf8.count), EventLimits.keyBytes.contains(account.utf8.count),
              let position = try live.withAccount(UTF8Key(account), { state, _, _ -> UInt64? in
                  guard let last = state.transfers[UTF8Key(originalTransaction)], last.side != .leaving else { return nil }
                  return last.position
              }) ?? nil
        else { return nil }
        return try storage.read { reader in
            var at: Timestamp?
            _ = try reader.record(at: position) { bytes in
                at = try LogReader.decode(bytes, at: position, reader: reader, names: storage.accountNames, readingProofs: false).at
            }
            return at
        }
    }

    /// Whether `owner` shared the chain `originalTransaction` names with `account` (a `shared`
    /// event), and no transfer of it to or from `account` came since.
    public func account(_ account: String, sharesChain originalTransaction: String, from owner: String) throws -> Bool {
        guard EventLimits.nameBytes.contains(originalTransaction.utf8.count) else { return false }
        return try live.withAccount(UTF8Key(account)) { state, _, _ in
            state.transfers[UTF8Key(originalTransaction)].map { $0.side == .sharing && sameBytes($0.other, owner) } ?? false
        } ?? false
    }

    /// The account of the first store report that named Apple's `appTransactionId` (one per
    /// customer and app), nil when none did: for a notification without `appAccountToken`
    /// about a transaction no account holds yet.
    public func account(ofAppTransaction appTransaction: String) throws -> String? {
        guard (1...256).contains(appTransaction.utf8.count) else { return nil }
        return try storage.read { try $0.account(ofAppTransaction: appTransaction) }
    }

    /// The position of the event with this id, nil when the log has none: whether an event was
    /// already appended (a notification the ledger may have missed, say).
    public func position(ofEventID id: String) throws -> UInt64? {
        guard EventLimits.keyBytes.contains(id.utf8.count) else { return nil }
        return try storage.read { try $0.position(ofEventID: id) }
    }

    /// The log's records from `position` on, read in chunks as the sequence is iterated. The
    /// sequence ends at the last record committed when iteration reaches it.
    public func records(from position: UInt64 = 1) -> LogRecords {
        LogRecords(log: log, start: position)
    }

    /// Counts and sizes, for `ledger stats` (counters: no scan).
    public func statistics() -> LedgerStatistics {
        let counts = live.counts
        let snapshot = live.snapshot
        return LedgerStatistics(
            events: counts.position, accounts: counts.accounts, entries: counts.entries,
            unfinishedEntries: counts.unfinished, products: catalog.products.count,
            fileSize: storage.sizeOnDisk(), snapshotPosition: snapshot?.position, snapshotCreatedAt: snapshot?.createdAt,
            accountsInMemory: counts.inMemory, accountsChangedSinceSnapshot: counts.changed)
    }
}

/// Counts and sizes of a ledger.
public struct LedgerStatistics: Sendable, Hashable {
    public var events: UInt64
    public var accounts: Int
    public var entries: Int
    public var unfinishedEntries: Int
    public var products: Int
    /// Bytes of the data file.
    public var fileSize: Int
    /// The position the newest snapshot reflects, and when it was written.
    public var snapshotPosition: UInt64?
    public var snapshotCreatedAt: Timestamp?
    /// Accounts decoded in memory: those changed since the newest snapshot, and cached ones.
    public var accountsInMemory: Int
    /// Accounts changed since the newest snapshot: what the next one writes.
    public var accountsChangedSinceSnapshot: Int
}
