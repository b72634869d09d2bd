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

    /// The account as this session sees it, read from the snapshot the first time when it is
    /// not in memory.
    private func resolve(_ account: UTF8Key) throws -> TouchedAccounts.Account {
        if let known = touched.accounts[account] { return known }
        let resolved: TouchedAccounts.Account
        if case .inMemory = live.readInMemory(account, { _ in () }) {
            resolved = .init(owned: false, state: AccountState())
        } else {
            let stored = try live.loadFromSnapshot(account, reader: reader)
            resolved = .init(owned: true, state: stored ?? AccountState(), isNew: stored == nil,
                             storedEntries: stored?.entries.count ?? 0,
                             storedUnfinished: stored?.entries.values.count { !$0.isFinished } ?? 0)
        }
        touched.accounts[account] = resolved
        return resolved
    }

    func entry(_ account: UTF8Key, _ payment: UTF8Key) throws -> QueueEntry? {
        let resolved = try resolve(account)
        if let entry = resolved.state.entries[payment] { return entry }
        guard !resolved.owned else { return nil }
        return live.readInMemory(account) { $0.entries[payment] }.value ?? nil
    }

    func balance(_ account: UTF8Key, _ item: UTF8Key) throws -> Int64? {
        let resolved = try resolve(account)
        if let balance = resolved.state.balances[item] { return balance }
        guard !resolved.owned else { return nil }
        return live.readInMemory(account) { $0.balances[item] }.value ?? nil
    }

    func accountHolds(_ account: UTF8Key, transaction: UTF8Key) throws -> Bool {
        let resolved = try resolve(account)
        if resolved.state.referencedTransactions.contains(transaction) { return true }
        guard !resolved.owned else { return false }
        return live.readInMemory(account) { $0.referencedTransactions.contains(transaction) }.value ?? false
    }

    func revocation(of transaction: UTF8Key) throws -> UInt64? {
        try facts.revocation(of: transaction)
    }

    func holder(of transaction: UTF8Key) throws -> TransactionHolder? {
        try facts.holder(of: transaction)
    }

    mutating func setEntry(_ entry: QueueEntry, of account: UTF8Key) throws {
        _ = try resolve(account)
        touched.accounts[account]!.changed = true
        touched.accounts[account]!.state.entries[UTF8Key(entry.payment)] = entry
    }

    mutating func setBalance(_ value: Int64, of account: UTF8Key, item: UTF8Key) throws {
        _ = try resolve(account)
        touched.accounts[account]!.changed = true
        touched.accounts[account]!.state.balances[item] = value
    }

    mutating func addReference(_ transaction: UTF8Key, of account: UTF8Key) throws {
        _ = try resolve(account)
        touched.accounts[account]!.changed = true
        touched.accounts[account]!.state.referencedTransactions.insert(transaction)
    }

    func setRevocation(_ position: UInt64, of transaction: UTF8Key) throws {
        try facts.setRevocation(position, of: transaction)
    }

    func setHolder(_ holder: TransactionHolder, of transaction: UTF8Key) throws {
        try facts.setHolder(holder, of: transaction)
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

    /// Makes the changes visible: owned accounts are handed over whole, the changes of accounts
    /// already in memory applied in place.
    func publish(to live: LiveProjections) {
        let accounts = touched.take()
        let position = self.position
        live.publish(position: position) { state in
            for (account, touched) in accounts where touched.changed {
                if touched.owned {
                    state.adopt(account, state: touched.state, isNew: touched.isNew,
                                counted: (touched.storedEntries, touched.storedUnfinished))
                } else {
                    for (_, entry) in touched.state.entries { state.setEntry(entry, of: account) }
                    for (item, value) in touched.state.balances { state.setBalance(value, of: account, item: item) }
                    for transaction in touched.state.referencedTransactions { state.addReference(transaction, of: account) }
                }
                state.lastChanged[account] = position
            }
        }
    }
}

/// The accounts a session touched: owned ones (read from the snapshot, or new) hold their
/// whole state; others hold only the session's changes. A class, so that the rules' read-only
/// view can remember what it read.
final class TouchedAccounts {
    struct Account {
        /// True when `state` is the whole account (not in memory when the session began).
        var owned: Bool
        var state: AccountState
        /// Owned and in no snapshot: a new account.
        var isNew = false
        /// For an owned account, its entries (and unfinished ones) in the snapshot, which the
        /// published counts include already.
        var storedEntries = 0
        var storedUnfinished = 0
        var changed = false
    }

    var accounts: [UTF8Key: Account] = [:]

    func take() -> [UTF8Key: Account] {
        defer { accounts = [:] }
        return accounts
    }
}
