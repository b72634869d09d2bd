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
final class FactsAsOf: GlobalFacts {
    let reader: any LedgerStorageReader
    /// Facts made after this position are not yet visible.
    var position: UInt64

    init(reader: any LedgerStorageReader, position: UInt64) {
        self.reader = reader
        self.position = position
    }

    func holder(of transaction: UTF8Key) throws -> TransactionHolder? {
        try reader.holder(ofTransaction: transaction.string).flatMap { $0.position <= position ? $0 : nil }
    }

    func revocation(of transaction: UTF8Key) throws -> UInt64? {
        try reader.revocation(ofTransaction: transaction.string).flatMap { $0 <= position ? $0 : nil }
    }

    func setHolder(_ holder: TransactionHolder, of transaction: UTF8Key) throws {}
    func setRevocation(_ position: UInt64, of transaction: UTF8Key) throws {}
}

/// A run of events applied over the live projections (a write transaction's appends, or the
/// tail replayed at open): the rules' view of the ledger as each event leaves it, and the
/// changes to publish afterwards.
///
/// Account changes are kept aside here one fact at a time (an entry, a balance, a reference)
/// over the published state, which stays untouched until `publish`: readers never see an event
/// before it is durable, a failed or retried transaction leaves nothing behind, and a batch
/// costs what it changes, not the size of the accounts it touches. Accounts not in memory are
/// read from the snapshot once and handed to the live state on publish.
struct ProjectionSession<Facts: GlobalFacts>: RuleContext, ProjectionStore {
    private struct Pair: Hashable {
        var account: UTF8Key
        var key: UTF8Key
    }

    let live: LiveProjections
    let reader: any LedgerStorageReader
    let facts: Facts
    let catalog: Catalog
    private(set) var position: UInt64
    private(set) var appendedCount = 0
    private let loaded = LoadedAccounts()
    private var entries: [Pair: QueueEntry] = [:]
    private var balances: [Pair: Int64] = [:]
    private var references: Set<Pair> = []
    private var changedAccounts: Set<UTF8Key> = []

    init(live: LiveProjections, reader: any LedgerStorageReader, facts: Facts, catalog: Catalog, position: UInt64) {
        self.live = live
        self.reader = reader
        self.facts = facts
        self.catalog = catalog
        self.position = position
    }

    // MARK: RuleContext

    func position(ofEventID id: String) throws -> UInt64? {
        try reader.position(ofEventID: id)
    }

    // MARK: ProjectionStore

    /// A fact of the account as published: from memory when the account changed since the
    /// snapshot, else from the snapshot (read once per session).
    private func published<R: Sendable>(_ account: UTF8Key, _ fact: (AccountState) -> R) throws -> R? {
        if case .inMemory(let value) = live.readInMemory(account, fact) { return value }
        return try loaded.state(of: account) { try live.loadFromSnapshot(account, reader: reader) }.map(fact)
    }

    func entry(_ account: UTF8Key, _ payment: UTF8Key) throws -> QueueEntry? {
        if let entry = entries[Pair(account: account, key: payment)] { return entry }
        return try published(account) { $0.entries[payment] } ?? nil
    }

    func balance(_ account: UTF8Key, _ item: UTF8Key) throws -> Int64? {
        if let balance = balances[Pair(account: account, key: item)] { return balance }
        return try published(account) { $0.balances[item] } ?? nil
    }

    func accountHolds(_ account: UTF8Key, transaction: UTF8Key) throws -> Bool {
        if references.contains(Pair(account: account, key: transaction)) { return true }
        return try published(account) { $0.referencedTransactions.contains(transaction) } ?? false
    }

    func revocation(of transaction: UTF8Key) throws -> UInt64? {
        try facts.revocation(of: transaction)
    }

    func holder(of transaction: UTF8Key) throws -> TransactionHolder? {
        try facts.holder(of: transaction)
    }

    mutating func setEntry(_ entry: QueueEntry, of account: UTF8Key) throws {
        try ensureLoaded(account)
        entries[Pair(account: account, key: UTF8Key(entry.payment))] = entry
    }

    mutating func setBalance(_ value: Int64, of account: UTF8Key, item: UTF8Key) throws {
        try ensureLoaded(account)
        balances[Pair(account: account, key: item)] = value
    }

    mutating func addReference(_ transaction: UTF8Key, of account: UTF8Key) throws {
        try ensureLoaded(account)
        references.insert(Pair(account: account, key: transaction))
    }

    func setRevocation(_ position: UInt64, of transaction: UTF8Key) throws {
        try facts.setRevocation(position, of: transaction)
    }

    func setHolder(_ holder: TransactionHolder, of transaction: UTF8Key) throws {
        try facts.setHolder(holder, of: transaction)
    }

    /// Before an account changes, its published state must be at hand for `publish`.
    private mutating func ensureLoaded(_ account: UTF8Key) throws {
        guard changedAccounts.insert(account).inserted else { return }
        if case .inMemory = live.readInMemory(account, { _ in () }) { return }
        _ = try loaded.state(of: account) { try live.loadFromSnapshot(account, reader: reader) }
    }

    // MARK: Appending

    /// Decides on `event` and, when it may be appended, writes its record (through `writer`)
    /// and applies it. Throws only storage failures.
    mutating func append(_ event: Event, writer: any LedgerStorageWriter) throws -> AppendResult {
        switch try Rules.decide(event, in: self) {
        case .reject(let error):
            return .failure(error)
        case .duplicate(let earlier):
            return .success(.duplicate(of: earlier))
        case .append:
            let next = position + 1
            try writer.append(record: LogRecordCodec.record(event, position: next), at: next, eventID: event.id, account: event.account)
            try apply(event, at: next)
            appendedCount += 1
            return .success(.appended(position: next))
        }
    }

    /// Applies an event known to be valid (appended, or replayed from the log).
    mutating func apply(_ event: Event, at next: UInt64) throws {
        precondition(next == position + 1, "events are applied in log order")
        do {
            try Projector.apply(event, at: next, catalog: catalog, to: &self)
        } catch let inconsistency as ProjectionInconsistency {
            throw StorageError(.damaged, "the event at position \(next) cannot be applied: \(inconsistency)", position: next)
        }
        position = next
    }

    /// Makes the changes visible: O(changes), in place.
    func publish(to live: LiveProjections) {
        live.publish(position: position) { state in
            for account in changedAccounts {
                state.adopt(account, loaded: loaded.take(account))
            }
            for (pair, entry) in entries { state.setEntry(entry, of: pair.account) }
            for (pair, value) in balances { state.setBalance(value, of: pair.account, item: pair.key) }
            for pair in references { state.addReference(pair.key, of: pair.account) }
            for account in changedAccounts { state.lastChanged[account] = position }
        }
    }
}

/// Accounts a session read from the snapshot (nil: not in the snapshot either), owned by the
/// session until `publish` moves them into the live state.
final class LoadedAccounts {
    private var states: [UTF8Key: AccountState?] = [:]

    func state(of account: UTF8Key, load: () throws -> AccountState?) rethrows -> AccountState? {
        if let known = states[account] { return known }
        let loaded = try load()
        states[account] = .some(loaded)
        return loaded
    }

    func take(_ account: UTF8Key) -> AccountState? {
        states.removeValue(forKey: account) ?? nil
    }
}
