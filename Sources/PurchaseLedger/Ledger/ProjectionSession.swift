/// Where a `ProjectionSession` reads and writes the ledger-wide facts about store transactions
/// (which entry holds each one, which are revoked): storage indexes, in both cases.
protocol GlobalFacts {
    func holder(of transaction: UTF8Key) throws -> TransactionHolder?
    func revocation(of transaction: UTF8Key) throws -> UInt64?
    func setHolder(_ holder: TransactionHolder, of transaction: UTF8Key) throws
    func setRevocation(_ position: UInt64, of transaction: UTF8Key) throws
}

/// Appending: the write transaction's indexes, which see its own earlier writes.
struct IndexedFacts: GlobalFacts {
    let writer: any LedgerStorageWriter

    func holder(of transaction: UTF8Key) throws -> TransactionHolder? {
        try writer.holder(ofTransaction: transaction.string)
    }

    func revocation(of transaction: UTF8Key) throws -> UInt64? {
        try writer.revocation(ofTransaction: transaction.string)
    }

    func setHolder(_ holder: TransactionHolder, of transaction: UTF8Key) throws {
        try writer.setHolder(holder, ofTransaction: transaction.string)
    }

    func setRevocation(_ position: UInt64, of transaction: UTF8Key) throws {
        try writer.setRevocation(position, ofTransaction: transaction.string)
    }
}

/// Replaying a tail of the log whose index entries already exist: facts as they stood before
/// the event being replayed (each fact carries the position that made it), and nothing to
/// write.
///
/// The indexes hold each fact as the whole log made it, the same for every position of one
/// read: what `prefetch` read of them at once (one query each on a remote storage) answers
/// every later question about those transactions.
///
/// Names too are as the whole log left them: another process's forget renamed the holders in
/// storage when it committed, while this process renames what it holds only when it applies the
/// forget's record (`names`: its names). Until then a holder under a pseudonym whose handle it
/// still knows by the former name is answered under that name, the one the records before the
/// forget decode to.
final class FactsAsOf: GlobalFacts {
    let reader: any LedgerStorageReader
    /// Facts made after this position are not yet visible.
    var position: UInt64
    /// The process's names when it replays over what it holds in memory; nil for a replay that
    /// decodes with names as the reader sees them.
    let names: AccountNames?
    /// The indexes' entries the last `prefetch` read, by transaction: nil, known to have none.
    private var holders: [UTF8Key: TransactionHolder?] = [:]
    private var revocations: [UTF8Key: UInt64?] = [:]

    init(reader: any LedgerStorageReader, position: UInt64, names: AccountNames? = nil) {
        self.reader = reader
        self.position = position
        self.names = names
    }

    /// Reads the holders and revocations of `transactions` (a run of events' own), in one
    /// query each where the storage is remote, in place of those the run before read: what is
    /// kept is bounded by a run, however long the history.
    func prefetch(_ transactions: some Sequence<UTF8Key>) throws {
        let asked = Array(Set(transactions))
        let holders = try reader.holders(ofTransactions: asked)
        let revocations = try reader.revocations(ofTransactions: asked)
        self.holders.removeAll(keepingCapacity: true)
        self.revocations.removeAll(keepingCapacity: true)
        for transaction in asked {
            self.holders[transaction] = .some(holders[transaction])
            self.revocations[transaction] = .some(revocations[transaction])
        }
    }

    func holder(of transaction: UTF8Key) throws -> TransactionHolder? {
        try anyHolder(of: transaction).flatMap { $0.position <= position ? $0 : nil }
    }

    func revocation(of transaction: UTF8Key) throws -> UInt64? {
        try anyRevocation(of: transaction).flatMap { $0 <= position ? $0 : nil }
    }

    /// The transaction's holder, whatever position made it, under the name this process knows
    /// its account by.
    func anyHolder(of transaction: UTF8Key) throws -> TransactionHolder? {
        let stored = try holders[transaction] ?? reader.holder(ofTransaction: transaction.string)
        guard var holder = stored, let names, let handle = Forgotten.handle(ofPseudonym: holder.entry.account),
              let known = names.cachedName(of: handle), !sameBytes(known, holder.entry.account) else { return stored }
        holder.entry.account = known
        return holder
    }

    /// The transaction's first revocation, whatever position made it.
    func anyRevocation(of transaction: UTF8Key) throws -> UInt64? {
        if let known = revocations[transaction] { return known }
        return try reader.revocation(ofTransaction: transaction.string)
    }

    func setHolder(_ holder: TransactionHolder, of transaction: UTF8Key) throws {}
    func setRevocation(_ position: UInt64, of transaction: UTF8Key) throws {}
}

/// A run of events applied over the live projections (a write transaction's appends, or the
/// tail replayed at open): the rules' view of the ledger as each event leaves it, and the
/// changes to publish afterwards.
///
/// The published state stays untouched until `publish`: readers never see an event before it
/// is durable, and a failed or retried transaction leaves nothing behind. An account the
/// session touches is either read from the snapshot (then the session owns it and changes it
/// directly, and `publish` hands it over) or already in memory (then the session keeps its
/// changes aside, one fact at a time, so that a batch costs what it changes, not the size of
/// the accounts it touches).
struct ProjectionSession<Facts: GlobalFacts>: RuleContext, ProjectionStore {
    let live: LiveProjections
    let reader: any LedgerStorageReader
    let facts: Facts
    let catalog: Catalog
    private(set) var position: UInt64
    private(set) var appendedCount = 0
    private let touched = TouchedAccounts()
    /// The handles of the accounts this session's records name; new ones are known to other
    /// readers once the write commits (`publish`).
    private(set) var accountHandles: AccountHandleAssigner
    /// Whether this session may append a `forgotten` event: only as the one event of its write
    /// (`LedgerWriter`), since the forget renames what the rest of a write would have read.
    var mayForget = false
    /// The renames of the forget this session appended, taken into memory by `publish`.
    private(set) var forgotten: [Forgetting.Rename] = []
    /// Whether this session appended a forget (`forgotten` is empty for one of a pseudonym).
    private(set) var didForget = false

    init(live: LiveProjections, reader: any LedgerStorageReader, facts: Facts, catalog: Catalog, position: UInt64) {
        self.live = live
        self.reader = reader
        self.facts = facts
        self.catalog = catalog
        self.position = position
        accountHandles = AccountHandleAssigner(names: live.storage.accountNames)
    }

    // MARK: RuleContext

    func position(ofEventID id: String) throws -> UInt64? {
        try reader.position(ofEventID: id)
    }

    // MARK: ProjectionStore

    /// The account as this session sees it, read from the snapshot the first time when it is
    /// not in memory.
    private func resolve(_ account: UTF8Key) throws -> TouchedAccount {
        if let known = touched.find(account) { return known }
        let resolved: TouchedAccount
        if case .inMemory = live.readInMemory(account, { _ in () }) {
            resolved = TouchedAccount(owned: false, state: AccountState())
        } else {
            let stored = try live.loadFromSnapshot(account, reader: reader)
            resolved = TouchedAccount(owned: true, state: stored ?? AccountState(), isNew: stored == nil)
            resolved.storedEntries = stored?.entries.count ?? 0
            resolved.storedUnfinished = stored?.entries.unfinishedCount ?? 0
        }
        touched.insert(resolved, for: account)
        return resolved
    }

    /// The session's changes first; for an account in memory, then its published state.
    func read<Answer: Sendable>(_ account: UTF8Key, _ query: (AccountState) -> Answer?) throws -> Answer? {
        let resolved = try resolve(account)
        if let answer = query(resolved.state) { return answer }
        guard !resolved.owned else { return nil }
        return live.readInMemory(account, query).value ?? nil
    }

    func wholeState(_ account: UTF8Key) throws -> AccountState? {
        let resolved = try resolve(account)
        if resolved.owned { return resolved.isNew && !resolved.changed ? nil : resolved.state }
        guard case .inMemory(var state) = live.readInMemory(account, { $0 }) else { return resolved.state }
        resolved.state.forEachChange { state.apply($0) }
        return state
    }

    func revocation(of transaction: UTF8Key) throws -> UInt64? {
        try facts.revocation(of: transaction)
    }

    func holder(of transaction: UTF8Key) throws -> TransactionHolder? {
        try facts.holder(of: transaction)
    }

    mutating func change(_ account: UTF8Key, _ change: AccountChange) throws {
        let resolved = try resolve(account)
        resolved.changed = true
        resolved.state.apply(change)
    }

    func setRevocation(_ position: UInt64, of transaction: UTF8Key) throws {
        try facts.setRevocation(position, of: transaction)
    }

    func setHolder(_ holder: TransactionHolder, of transaction: UTF8Key) throws {
        try facts.setHolder(holder, of: transaction)
    }

    // MARK: Appending

    /// Decides on `event` and, when it may be appended, writes its record (through `writer`)
    /// and applies it; an event dated past `latest` (`Event.checkNotAfter`) is refused first.
    /// Throws only storage failures.
    /// `duplicates` says what an id the log holds answers (`DuplicatePolicy`).
    mutating func append(
        _ event: Event, notAfter latest: Timestamp, writer: any LedgerStorageWriter, duplicates: DuplicatePolicy = .byID
    ) throws -> AppendResult {
        do {
            try event.checkNotAfter(latest)
        } catch {
            return .failure(error)
        }
        switch try Rules.decide(event, in: self) {
        case .reject(let error):
            return .failure(error)
        case .duplicate(let earlier):
            if duplicates == .sameFact, let refusal = try otherFact(than: event, at: earlier, writer: writer) { return .failure(refusal) }
            return .success(.duplicate(of: earlier))
        case .append:
            if let refusal = try checkPseudonyms(of: event, writer: writer) { return .failure(refusal) }
            if let refusal = try checkForgetID(of: event, writer: writer) { return .failure(refusal) }
            var plan: Forgetting.Plan?
            if case .forgotten = event.payload {
                guard mayForget else { return .failure(.invalid("a `forgotten` event is appended in a write of its own")) }
                plan = try Forgetting.plan(event.account, writer: writer, names: live.storage.accountNames)
            }
            let next = position + 1
            let record = try LogRecordCodec.record(event, position: next, renamedHandles: plan?.handles ?? []) {
                try accountHandles.handle(of: $0, writer: writer)
            }
            try writer.append(record: record.bytes, at: next, eventID: event.id, account: event.account)
            if let proof = record.proof { try writer.putProof(proof, at: next) }
            if let appTransaction = event.appTransaction { try writer.claimAppTransaction(appTransaction, for: event.account) }
            try apply(event, at: next)
            if let plan {
                try Forgetting.perform(plan, at: next, writer: writer, catalog: catalog)
                forgotten += plan.renames
                didForget = true
            }
            appendedCount += 1
            return .success(.appended(position: next))
        }
    }

    /// For a component's own event (`DuplicatePolicy.sameFact`) whose id the log holds at
    /// `position`: nil when the event there is the same fact, else the refusal. The record is
    /// read as this write sees it, with names read for this check alone (the write may have
    /// named a new account, which no other reader may learn before it commits).
    private func otherFact(than event: Event, at position: UInt64, writer: any LedgerStorageWriter) throws -> LedgerError? {
        var recorded: Event?
        _ = try writer.record(at: position) { bytes in
            recorded = try LogReader.decode(bytes, at: position, reader: writer, names: AccountNames(), readingProofs: false)
        }
        guard let recorded, !event.isSameFact(as: recorded) else { return nil }
        return .invalid("the id \"\(event.id)\" is another event's, not this one's: it records a different fact")
    }

    /// A forget's id in the forgets' namespace (`forget/<n>`, `forget/<n>/<k>`) names the handle of
    /// the account it forgets: an id that names another is `invalidEvent`, so that no event can
    /// take the id a later forget of another account needs.
    private func checkForgetID(of event: Event, writer: any LedgerStorageWriter) throws -> LedgerError? {
        guard case .forgotten = event.payload, OwnEventIDs.namespace(of: event.id) == OwnEventIDs.forget else { return nil }
        let handle = try accountHandles.names.cachedHandle(of: event.account) ?? accountHandles.assignedHandle(of: event.account)
            ?? writer.accountHandle(of: event.account)
        guard let handle, OwnEventIDs.handle(ofForgetID: event.id) == handle else {
            return .invalid("a forget's id `forget/<n>` names the forgotten account's handle n, which this one's is not")
        }
        return nil
    }

    /// A name of the pseudonyms' form (`forgotten/<n>`) is one only if the account table gives it
    /// the handle `n`, or would as the next handle (a copy of a ledger that forgot someone names
    /// the pseudonym first where the original named the id): any other would take a pseudonym a
    /// later forget needs. `invalidEvent` then.
    private func checkPseudonyms(of event: Event, writer: any LedgerStorageWriter) throws -> LedgerError? {
        // Almost every event: no name of that form, nothing to look up.
        guard event.namesPseudonymForm else { return nil }
        var next: UInt64?
        var new: Set<UTF8Key> = []
        for name in event.accountsNamed {
            let key = UTF8Key(name)
            let handle: UInt64
            let cached = accountHandles.names.cachedHandle(of: name) ?? accountHandles.assignedHandle(of: name)
            if let known = try cached ?? writer.accountHandle(of: name) {
                handle = known
            } else if new.contains(key) {
                continue
            } else {
                handle = try next ?? (accountHandles.nextHandle(writer: writer))
                next = handle + 1
                new.insert(key)
            }
            if let claimed = Forgotten.handle(ofPseudonym: name), claimed != handle {
                return .invalid("`\(name)` is the form of a forgotten account's pseudonym, and the account table gives it no such handle")
            }
        }
        return nil
    }

    /// Applies an event known to be valid (appended, or replayed from the log).
    mutating func apply(_ event: Event, at next: UInt64) throws {
        precondition(next == position + 1, "events are applied in log order")
        do {
            try Projector.apply(event, at: next, catalog: catalog, to: &self)
        } catch let inconsistency as ProjectionInconsistency {
            throw inconsistency.damage(at: next)
        }
        position = next
    }

    /// Makes the changes visible: owned accounts are handed over whole, the changes of accounts
    /// already in memory applied in place.
    func publish(to live: LiveProjections) {
        live.storage.accountNames.adopt(accountHandles.assigned)
        let accounts = touched.take()
        let position = self.position
        let forgotten = self.forgotten
        if !forgotten.isEmpty {
            live.storage.accountNames.rename(forgotten)
            // It captured states by their old names.
            live.abandonSnapshot()
        }
        live.publish(position: position) { state in
            defer { if !forgotten.isEmpty { state.rename(forgotten, droppingCache: false) } }
            for (account, touched) in accounts where touched.changed {
                if touched.owned {
                    state.adopt(account, state: touched.state, isNew: touched.isNew,
                                counted: (touched.storedEntries, touched.storedUnfinished))
                } else {
                    touched.state.forEachChange { state.change(account, $0) }
                }
                state.lastChanged[account] = position
            }
        }
    }
}

/// One account a session touched. Owned (read from the snapshot, or new): `state` is the whole
/// account. Otherwise (in memory when the session began): `state` holds only the session's
/// changes. A class, so that lookups and changes go to it without copying its dictionaries.
final class TouchedAccount {
    let owned: Bool
    var state: AccountState
    /// Owned and in no snapshot: a new account.
    let isNew: Bool
    /// For an owned account, its entries (and unfinished ones) in the snapshot, which the
    /// published counts include already.
    var storedEntries = 0
    var storedUnfinished = 0
    var changed = false

    init(owned: Bool, state: AccountState, isNew: Bool = false) {
        self.owned = owned
        self.state = state
        self.isNew = isNew
    }
}

/// The accounts a session touched, with the last one found kept at hand: an event's changes
/// go to one account, several facts in a row.
final class TouchedAccounts {
    private(set) var accounts: [UTF8Key: TouchedAccount] = [:]
    private var last: (key: UTF8Key, account: TouchedAccount)?

    func find(_ account: UTF8Key) -> TouchedAccount? {
        if let last, last.key == account { return last.account }
        guard let found = accounts[account] else { return nil }
        last = (account, found)
        return found
    }

    func insert(_ touched: TouchedAccount, for account: UTF8Key) {
        accounts[account] = touched
        last = (account, touched)
    }

    func take() -> [UTF8Key: TouchedAccount] {
        defer {
            accounts = [:]
            last = nil
        }
        return accounts
    }
}
