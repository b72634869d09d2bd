/// One write transaction's worth of appends: the rules' view of the ledger as each event
/// leaves it, and the changes to publish once the transaction commits.
///
/// What an event changes is kept aside here (accounts copied on first change, new revocations
/// and credits); the shared state is untouched until `publish`, so readers never see an event
/// before it is durable, and a failed or retried transaction leaves nothing behind.
struct AppendSession: RuleContext, ProjectionStore {
    /// Read access to the published state, which only this writer changes.
    struct Base {
        var position: UInt64
        var account: (String) -> AccountState?
        var revocation: (String) -> UInt64?
        var consumableCredit: (String) -> EntryReference?
    }

    let writer: any LedgerStorageWriter
    let catalog: Catalog
    private let base: Base
    private(set) var position: UInt64
    private(set) var appendedCount = 0
    private var changedAccounts: [String: AccountState] = [:]
    private var newRevocations: [String: UInt64] = [:]
    private var newCredits: [String: EntryReference] = [:]

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

    func account(_ id: String) -> AccountState? {
        changedAccounts[id] ?? base.account(id)
    }

    mutating func updateAccount(_ id: String, _ body: (inout AccountState) -> Void) {
        if changedAccounts[id] == nil {
            changedAccounts[id] = base.account(id) ?? AccountState()
        }
        body(&changedAccounts[id]!)
    }

    func revocation(of transaction: String) -> UInt64? {
        newRevocations[transaction] ?? base.revocation(transaction)
    }

    mutating func setRevocation(_ position: UInt64, of transaction: String) {
        newRevocations[transaction] = position
    }

    func consumableCredit(of transaction: String) -> EntryReference? {
        newCredits[transaction] ?? base.consumableCredit(transaction)
    }

    mutating func setConsumableCredit(_ entry: EntryReference, of transaction: String) {
        newCredits[transaction] = entry
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

    /// Makes the committed changes visible.
    func publish(into state: inout LedgerState) {
        for (account, accountState) in changedAccounts {
            state.accounts[account] = accountState
        }
        state.revocations.merge(newRevocations) { _, new in new }
        state.consumableCredits.merge(newCredits) { _, new in new }
        state.position = position
    }
}
