/// Derives the change feed from storage alone: the log, and the ledger's clock readings
/// (`ClockReading`) that say when the log reached each position and when time passed with
/// nothing appended. Deriving it again gives the same changes, in the same order, with the same
/// ids: that is how a consumer resumes from a cursor, and how a feed seen live is checked.
///
/// For each reading, in order, with the feed's clock F (the latest reading's time so far):
/// 1. the instants where some account's projection changes by time alone that lie in
///    (F, the reading's time], in order (then by account), each judged on the log as it stood
///    before the reading's events: a change at cursor (position then, instant, account);
/// 2. the events up to the reading's position, each judged as of the reading's time: a change
///    at cursor (position, account) for each account whose projection it changed.
///
/// It keeps the whole state of the log it has read (a replay's), and, per account, the next
/// instant where its projection changes by time alone.
struct ChangeDeriver {
    private(set) var state = LedgerState()
    private var catalog: Catalog
    /// The feed's clock: the latest reading's time so far.
    private(set) var clock = Timestamp.earliest
    private(set) var lastReading: ClockReading?
    /// The reading `advance` stopped within, the time its changes are judged at, and whether
    /// time's changes before its events are still being judged (they come first).
    private var following: (reading: ClockReading, time: Timestamp, judgingInstants: Bool)?
    private var due = DueInstants()
    /// The environments whose reports the projections leave out (a feed scoped to some).
    private let excluded: Set<StoreEnvironment>
    /// Each account's projection as the feed last judged it (after its last event, or at the
    /// last instant where time changed it): the next event's "before", instead of building it
    /// again. It stays right until the account's next event or next instant, both of which
    /// replace it (an instant up to a reading's time is judged before the reading's events), or
    /// a revocation, which may change any account that names the transaction and empties it.
    /// At most `cachedProjections` accounts; emptied when full.
    private var projections: [UTF8Key: AccountProjection?] = [:]
    static let cachedProjections = 65_536
    /// The named entitlements of each catalog the log recorded, by the first position it
    /// governed: a projection is judged with the catalog in force at its position, so that
    /// deriving again gives the same bytes however the catalog grew since. Read at the first
    /// reading, and again when an event names a product the catalog read lacks.
    private var entitlementHistory: [(effectiveFrom: UInt64, entitlements: [Catalog.Entitlement])]?
    /// The catalogs as recorded when `entitlementHistory` was read: another recorded since
    /// (by another process on shared storage) is read when `refreshCatalogs` is shown it.
    private var recordedCatalogs: [(effectiveFrom: UInt64, json: [UInt8])] = []
    /// The last position applied: a catalog that changes the named entitlements taking effect
    /// after it empties `projections` (each "before" is then judged with the definitions in
    /// force, as a derivation started anywhere judges it).
    private var appliedThrough: UInt64 = 0
    /// The changes at or before this cursor are not judged, only their accounts' next instants
    /// kept: a reader after it never sees them, and judging one builds its account's whole
    /// projection (every purchase: for a long subscriber, work that grows with its history). A
    /// change after it is judged as always, its "before" built afresh (`projections` forgets
    /// an account whose change went unjudged).
    var silentThrough = FeedCursor.start
    /// The accounts whose silent changes were not judged and whose next instants are not
    /// known yet; and whether instants were passed over in silence (their accounts are still due
    /// at them). Both settled by `scheduleUnscheduled` where the silence ends.
    private var unscheduled: Set<UTF8Key> = []
    private var skippedInstants = false
    /// How many projections this derivation built to judge changes: its cost beside the events.
    private(set) var projectionsBuilt = 0

    init(catalog: Catalog, excluding excluded: Set<StoreEnvironment> = []) {
        self.catalog = catalog
        self.excluded = excluded
    }

    /// A derivation that starts where one from the log's start would be once it followed
    /// `reading`: `state` is the log's through `reading.position` (a snapshot's, read whole),
    /// the feed's clock is the reading's time, and each account's next instant is its first
    /// after that time. What it derives after `reading` is what one from the start derives after
    /// it, change for change and byte for byte: the projections it remembered are only a cache
    /// (the one thing they could tell apart, the named entitlements in force, is cleared at
    /// every catalog that changes them: `apply`).
    init(seed state: LedgerState, after reading: ClockReading, catalog: Catalog, excluding excluded: Set<StoreEnvironment> = []) {
        precondition(state.position == reading.position, "a seed is the log's state at its reading")
        self.catalog = catalog
        self.excluded = excluded
        self.state = state
        clock = reading.time
        lastReading = reading
        appliedThrough = reading.position
        for account in state.accounts.keys { schedule(account, view: view(of: account, at: reading.position), after: reading.time) }
    }

    /// Follows one reading: reads its events from `log` (those after the last reading, up to
    /// its position, in order) and hands each change to `emit`; at most `maximumEvents` of them,
    /// and at most `maximumTimeChanges` of time's changes before them, a call. Returns true once
    /// the reading is followed whole; false when it stopped within it (a commit of many events,
    /// an import's; a reading long after the last, when the instants of many renewals passed),
    /// where the next call, with the same reading, goes on: so that a bounded read stops within
    /// a commit, holds few changes (each holds its account's projection, which for a long
    /// subscriber lists every purchase), and a cancelled one stops soon. After a throw the
    /// deriver is spent (a reading may be half applied): `LedgerChanges` never calls it again.
    @discardableResult
    mutating func advance(
        to reading: ClockReading, log: LogReader, maximumEvents: Int = .max, maximumTimeChanges: Int = .max,
        emit: (consuming LedgerChange) throws -> Void
    ) throws -> Bool {
        if entitlementHistory == nil { try readEntitlements(from: log) }
        if let following {
            precondition(following.reading == reading, "a reading is followed whole before the next")
        } else {
            let position = state.position
            following = (reading, max(clock, reading.time), judgingInstants: true)
            // Before the cursor's position every time change is silent: none is judged, and
            // the accounts' next instants are found once, where the silence ends.
            if position < silentThrough.position { skippedInstants = true }
            if position >= silentThrough.position { scheduleUnscheduled() }
        }
        let time = following!.time
        if following!.judgingInstants {
            let position = state.position
            var judged = 0
            while position >= silentThrough.position, let (instant, account) = due.first(notAfter: time) {
                if judged >= max(1, maximumTimeChanges) { return false }
                due.remove(account)
                if let change = timeChange(of: account, at: instant, position: position) {
                    try emit(change)
                    judged += 1
                }
                schedule(account, view: view(of: account, at: position), after: instant)
            }
            following!.judgingInstants = false
        }
        let start = state.position
        let end = min(reading.position, start &+ UInt64(clamping: max(1, maximumEvents)))
        if end > start {
            try log.forEachRecord(from: start + 1, through: end) { record in
                try apply(record, asOf: time, log: log, emit: emit)
            }
        }
        guard state.position >= reading.position else { return false }
        following = nil
        clock = time
        lastReading = reading
        return true
    }

    /// The next instant where an account's projection changes by time alone, if any.
    mutating func nextDueInstant() -> Timestamp? {
        scheduleUnscheduled()
        return due.earliest
    }

    // MARK: Changes

    private mutating func apply(_ record: LogRecord, asOf time: Timestamp, log: LogReader, emit: (consuming LedgerChange) throws -> Void) throws {
        let event = record.event
        // A forget this process read before this deriver reached it (its writer committed it,
        // or its projections caught up with it) renamed the names the records decode with: an
        // event before the forget names the pseudonym of an account this deriver holds under
        // its former name. The account moves now, so that the event applies to its state, not
        // to a new account the forget's rename would then overwrite.
        let early = event.accountsNamed.compactMap { name -> Forgetting.Rename? in
            guard let handle = Forgotten.handle(ofPseudonym: name), state.accounts[UTF8Key(name)] == nil,
                  let former = log.storage.accountNames.formerName(of: handle), state.accounts[UTF8Key(former)] != nil
            else { return nil }
            return Forgetting.Rename(handle: handle, old: former, new: name)
        }
        if !early.isEmpty { take(early) }
        if event.type == .forgotten {
            // What this deriver read before the forget under the former names is the
            // pseudonyms' now, as a feed derived again reads it; the forget itself changes no
            // projection.
            let renames = try log.renames(ofForgetAt: record.position)
            if !renames.isEmpty { take(renames) }
        }
        // The accounts an event can change: its own, and for a revocation the one holding the
        // transaction (its credit is taken back there).
        var accounts = [UTF8Key(event.account)]
        if case .revoked(let revoked) = event.payload, let holder = state.holders[UTF8Key(revoked.transaction)] {
            let key = UTF8Key(holder.entry.account)
            if key != accounts[0] { accounts.append(key) }
        }
        accounts.sort()
        if definitionsChange(after: appliedThrough, through: record.position) { projections.removeAll(keepingCapacity: true) }
        appliedThrough = record.position
        let named = entitlements(at: record.position)
        let judged = accounts.map { isJudged(position: record.position, instant: nil, account: $0) }
        let before = zip(accounts, judged).map { account, judged in
            judged ? projections[account] ?? state.projection(of: account, asOf: time, excluding: excluded, entitlements: named) : nil
        }
        do {
            try state.apply(event, at: record.position, catalog: catalog)
        } catch {
            // A product added to the catalog after this deriver read it. (Nothing was applied:
            // the product is looked up first. Any other inconsistency is damage, and may have
            // changed part of the state: it is thrown, not tried again.)
            let inconsistency: ProjectionInconsistency = error
            guard inconsistency.kind == .productNotInCatalog, let newest = try log.currentCatalog(), newest != catalog else {
                throw inconsistency.damage(at: record.position)
            }
            catalog = newest
            try readEntitlements(from: log)
            do {
                try state.apply(event, at: record.position, catalog: catalog)
            } catch {
                throw error.damage(at: record.position)
            }
        }
        // A revocation counts in every account that names the transaction, not only those
        // listed: their projections computed earlier in this reading may no longer hold.
        if case .revoked = event.payload { projections.removeAll(keepingCapacity: true) }
        let cause = LedgerChange.Cause.event(id: event.id, type: event.type)
        for ((account, before), judged) in zip(zip(accounts, before), judged) {
            guard judged else {
                // Nor its next instant: building its view grows with its history.
                projections[account] = nil
                unscheduled.insert(account)
                continue
            }
            // One view of the account for both its next instant and its projection.
            let view = self.view(of: account, at: record.position)
            // Rescheduled even when nothing shows yet: a purchase dated later starts later.
            schedule(account, view: view, after: time)
            let after = view.map { AccountProjection(view: $0, asOf: time) }
            projectionsBuilt += 1
            remember(after, of: account)
            guard let after, after != before else { continue }
            try emit(LedgerChange(
                cursor: FeedCursor(position: record.position, account: account.string), account: account.string,
                position: record.position, cause: cause, asOf: time,
                differences: ChangeDifference.between(before, after, cause: cause), projection: after))
        }
    }

    /// A forget's renames, in everything this deriver holds by name.
    private mutating func take(_ renames: [Forgetting.Rename]) {
        state.rename(renames)
        projections.removeAll(keepingCapacity: true)
        for rename in renames {
            due.rename(UTF8Key(rename.old), to: UTF8Key(rename.new))
            if unscheduled.remove(UTF8Key(rename.old)) != nil { unscheduled.insert(UTF8Key(rename.new)) }
        }
    }

    /// Each account's next instant after the clock, as a derivation that judged every change
    /// would hold it at this reading: for the accounts whose changes went unjudged and those
    /// whose instants passed in silence (still due at or before the clock). Every other
    /// account's next instant is past the clock and its state unchanged since it was found.
    private mutating func scheduleUnscheduled() {
        guard skippedInstants || !unscheduled.isEmpty else { return }
        var accounts = unscheduled
        while let (_, account) = due.first(notAfter: clock) {
            due.remove(account)
            accounts.insert(account)
        }
        for account in accounts.sorted() { schedule(account, view: view(of: account, at: state.position), after: clock) }
        unscheduled = []
        skippedInstants = false
    }

    /// Whether the change at this place is after `silentThrough` (a cursor built only at its position).
    private func isJudged(position: UInt64, instant: Timestamp?, account: UTF8Key) -> Bool {
        guard position == silentThrough.position else { return position > silentThrough.position }
        return FeedCursor(position: position, instant: instant, account: account.string) > silentThrough
    }

    private mutating func remember(_ projection: AccountProjection?, of account: UTF8Key) {
        if projections.count >= Self.cachedProjections, projections[account] == nil {
            projections.removeAll(keepingCapacity: true)
        }
        projections[account] = .some(projection)
    }

    private mutating func timeChange(of account: UTF8Key, at instant: Timestamp, position: UInt64) -> LedgerChange? {
        guard isJudged(position: position, instant: instant, account: account) else {
            projections[account] = nil
            return nil
        }
        let remembered = projections[account]
        let named = entitlements(at: position)
        projectionsBuilt += 1
        let after = state.projection(of: account, asOf: instant, excluding: excluded, entitlements: named)
        remember(after, of: account)
        guard let after,
              let before = remembered ?? state.projection(of: account, asOf: instant.justBefore, excluding: excluded, entitlements: named),
              after != before else { return nil }
        let cause = LedgerChange.Cause.time(instant)
        return LedgerChange(
            cursor: FeedCursor(position: position, instant: instant, account: account.string), account: account.string,
            position: position, cause: cause, asOf: instant,
            differences: ChangeDifference.between(before, after, cause: cause), projection: after)
    }

    /// The account's state in the feed's view of environments, with the named entitlements in
    /// force at `position`; nil for an account with none.
    private func view(of account: UTF8Key, at position: UInt64) -> AccountView? {
        guard let accountState = state.accounts[account] else { return nil }
        let named = entitlements(at: position)
        // No lookup (and no hashing) per transaction while nothing was revoked.
        if state.revocations.isEmpty {
            return AccountView(account: account.string, state: accountState, excluding: excluded, entitlements: named, catalog: catalog) { _ in false }
        }
        return AccountView(account: account.string, state: accountState, excluding: excluded, entitlements: named, catalog: catalog) {
            state.revocations[$0] != nil
        }
    }

    /// The named entitlements of the catalog in force at `position` (the first catalog's
    /// before any governed; the deriver's own before the log's were read).
    private func entitlements(at position: UInt64) -> [Catalog.Entitlement] {
        guard let history = entitlementHistory, let first = history.first else { return catalog.entitlements }
        return history.last { $0.effectiveFrom <= position }?.entitlements ?? first.entitlements
    }

    /// Whether the named entitlements in force differ somewhere in (`start`, `end`].
    private func definitionsChange(after start: UInt64, through end: UInt64) -> Bool {
        guard let history = entitlementHistory, history.count > 1 else { return false }
        for index in history.indices.dropFirst() where history[index].effectiveFrom > start && history[index].effectiveFrom <= end {
            if history[index].entitlements != history[index - 1].entitlements { return true }
        }
        return false
    }

    /// Reads the catalogs again when one was recorded since they were read: another process
    /// on shared storage, opened with a catalog that names more, records it while this one
    /// follows, and the changes after it are judged with it, as a derivation started later
    /// judges them. (Without this a follower read them again only when an event named a
    /// product it lacked.)
    mutating func refreshCatalogs(recorded: [(effectiveFrom: UInt64, json: [UInt8])], log: LogReader) throws {
        guard entitlementHistory != nil else { return }
        guard !recorded.elementsEqual(recordedCatalogs, by: { $0.effectiveFrom == $1.effectiveFrom && $0.json == $1.json }) else { return }
        if let newest = try log.currentCatalog() { catalog = newest }
        try readEntitlements(from: log)
    }

    private mutating func readEntitlements(from log: LogReader) throws {
        recordedCatalogs = try log.storage.read { try $0.catalogs() }
        let history = try log.catalogHistory().map { ($0.effectiveFrom, $0.catalog.entitlements) }
        // Projections judged with other definitions are not a "before" any more.
        if let known = entitlementHistory, !known.elementsEqual(history, by: { $0.0 == $1.0 && $0.1 == $1.1 }) {
            projections.removeAll(keepingCapacity: true)
        }
        entitlementHistory = history
    }

    private mutating func schedule(_ account: UTF8Key, view: AccountView?, after time: Timestamp) {
        guard let view else { return }
        if let next = view.firstInstant(after: time) {
            due.schedule(account, at: next)
        } else {
            due.remove(account)
        }
    }
}

/// Per account, the next instant its projection changes by time alone; the earliest first. A
/// binary heap ordered by (instant, account) whose entries go stale when an account is
/// rescheduled: a stale one is dropped when it reaches the top.
struct DueInstants {
    private var byAccount: [UTF8Key: Timestamp] = [:]
    private var heap = Heap<(instant: Timestamp, account: UTF8Key)> { a, b in
        a.instant != b.instant ? a.instant < b.instant : a.account < b.account
    }

    var earliest: Timestamp? {
        mutating get {
            dropStale()
            return heap.top?.instant
        }
    }

    mutating func first(notAfter time: Timestamp) -> (Timestamp, UTF8Key)? {
        dropStale()
        guard let top = heap.top, top.instant <= time else { return nil }
        return (top.instant, top.account)
    }

    mutating func schedule(_ account: UTF8Key, at instant: Timestamp) {
        guard byAccount[account] != instant else { return }
        byAccount[account] = instant
        heap.push((instant, account))
    }

    mutating func remove(_ account: UTF8Key) {
        byAccount[account] = nil
    }

    /// The account's next instant is its new name's (a forget).
    mutating func rename(_ account: UTF8Key, to new: UTF8Key) {
        guard let instant = byAccount[account] else { return }
        remove(account)
        // A new name is new to the ledger; were it due already, the earlier instant would hold.
        schedule(new, at: byAccount[new].map { min($0, instant) } ?? instant)
    }

    private mutating func dropStale() {
        while let top = heap.top, byAccount[top.account] != top.instant {
            heap.pop()
        }
    }
}
