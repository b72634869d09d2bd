/// One write transaction's worth of appends: the rules' view of the ledger as each event
/// leaves it, and the changes to publish once the transaction commits.
///
/// Changes are kept aside here, one fact at a time (an entry, a balance, a revocation), over
/// the published state, which only this writer changes and which stays untouched until
/// `publish`: readers never see an event before it is durable, a failed or retried transaction
/// leaves nothing behind, and a batch costs what it changes, not the size of the accounts it
/// touches.
struct AppendSession: RuleContext, ProjectionStore {
    /// Read access to the published state.
    struct Base {
        var position: UInt64
        var entry: (UTF8Key, UTF8Key) -> QueueEntry?
        var balance: (UTF8Key, UTF8Key) -> Int64?
        var accountHolds: (UTF8Key, UTF8Key) -> Bool
        var revocation: (UTF8Key) -> UInt64?
        var consumableCredit: (UTF8Key) -> EntryReference?
    }

    private struct Pair: Hashable {
        var account: UTF8Key
        var key: UTF8Key
    }

    let writer: any LedgerStorageWriter
    let catalog: Catalog
    private let base: Base
    private(set) var position: UInt64
    private(set) var appendedCount = 0
    private var entries: [Pair: QueueEntry] = [:]
    private var balances: [Pair: Int64] = [:]
    private var references: Set<Pair> = []
    private var revocations: [UTF8Key: UInt64] = [:]
    private var credits: [UTF8Key: EntryReference] = [:]

    init(writer: any LedgerStorageWriter, catalog: Catalog, base: Base) {
        self.writer = writer
        self.catalog = catalog
        self.base = base
        self.position = base.position
    }

    // MARK: RuleContext (the write transaction sees its own earlier writes)

    func position(ofEventID id: String) throws -> UInt64? {
        try writer.position(ofEventID: id)
    }

    func holder(ofTransaction transaction: String) throws -> EntryReference? {
        try writer.holder(ofTransaction: transaction)
    }

    // MARK: ProjectionStore

    func entry(_ account: UTF8Key, _ payment: UTF8Key) -> QueueEntry? {
        entries[Pair(account: account, key: payment)] ?? base.entry(account, payment)
    }

    func balance(_ account: UTF8Key, _ item: UTF8Key) -> Int64? {
        balances[Pair(account: account, key: item)] ?? base.balance(account, item)
    }

    func accountHolds(_ account: UTF8Key, transaction: UTF8Key) -> Bool {
        references.contains(Pair(account: account, key: transaction)) || base.accountHolds(account, transaction)
    }

    func revocation(of transaction: UTF8Key) -> UInt64? {
        revocations[transaction] ?? base.revocation(transaction)
    }

    func consumableCredit(of transaction: UTF8Key) -> EntryReference? {
        credits[transaction] ?? base.consumableCredit(transaction)
    }

    mutating func setEntry(_ entry: QueueEntry, of account: UTF8Key) {
        entries[Pair(account: account, key: UTF8Key(entry.payment))] = entry
    }

    mutating func setBalance(_ value: Int64, of account: UTF8Key, item: UTF8Key) {
        balances[Pair(account: account, key: item)] = value
    }

    mutating func addReference(_ transaction: UTF8Key, of account: UTF8Key) {
        references.insert(Pair(account: account, key: transaction))
    }

    mutating func setRevocation(_ position: UInt64, of transaction: UTF8Key) {
        revocations[transaction] = position
    }

    mutating func setConsumableCredit(_ entry: EntryReference, of transaction: UTF8Key) {
        credits[transaction] = entry
    }

    // MARK: Appending

    /// Decides on `event` and, when it may be appended, writes its record and indexes and
    /// applies it. Throws only storage failures.
    mutating func append(_ event: Event) throws -> AppendResult {
        switch try Rules.decide(event, in: self) {
        case .reject(let error):
            return .failure(error)
        case .duplicate(let earlier):
            return .success(.duplicate(of: earlier))
        case .append:
            let next = position + 1
            try writer.append(record: LogRecordCodec.record(event, position: next), at: next, eventID: event.id, account: event.account)
            if case .transactionUpdated(let update) = event.payload,
               update.state == .purchased || update.state == .restored, let transaction = update.transaction {
                try writer.setHolder(EntryReference(account: event.account, payment: update.payment), ofTransaction: transaction)
            }
            do {
                try Projector.apply(event, at: next, catalog: catalog, to: &self)
            } catch {
                throw StorageError(.damaged, "an accepted event could not be applied (a bug in the ledger): \(error)", position: next)
            }
            position = next
            appendedCount += 1
            return .success(.appended(position: next))
        }
    }

    /// Makes the committed changes visible: O(changes), in place.
    func publish(into state: inout LedgerState) {
        for (pair, entry) in entries { state.setEntry(entry, of: pair.account) }
        for (pair, value) in balances { state.setBalance(value, of: pair.account, item: pair.key) }
        for pair in references { state.addReference(pair.key, of: pair.account) }
        for (transaction, position) in revocations { state.setRevocation(position, of: transaction) }
        for (transaction, entry) in credits { state.setConsumableCredit(entry, of: transaction) }
        state.position = position
    }
}
