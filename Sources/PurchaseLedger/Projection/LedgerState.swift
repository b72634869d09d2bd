/// The projections of every account after the first `position` events of a log.
///
/// A value: taking it from a live ledger is cheap, and it never changes afterwards. Two states
/// are equal when every account's entries, balances and revocations are equal, which is how
/// the tests compare a state kept up to date on append with one rebuilt by replay.
public struct LedgerState: Sendable, Equatable {
    /// How many events of the log this state reflects (0 for an empty log).
    public internal(set) var position: UInt64 = 0
    var accounts: [String: AccountState] = [:]
    /// Revoked store transaction id → position of its first revocation (ids are global).
    var revocations: [String: UInt64] = [:]
    /// Store transaction id → the purchased consumable entry it credited.
    var consumableCredits: [String: EntryReference] = [:]

    public init() {}

    /// The accounts with at least one appended event, in UTF-8 byte order.
    public var accountIDs: [String] {
        accounts.keys.sorted(by: utf8Order)
    }

    /// What `account` owns as of `time`; nil when the log has no event of that account.
    public func projection(of account: String, asOf time: Timestamp = .now()) -> AccountProjection? {
        accounts[account].map { $0.projection(account: account, asOf: time, revoked: revocations) }
    }

    /// Every account's projection, in account order.
    public func projections(asOf time: Timestamp = .now()) -> [AccountProjection] {
        accountIDs.map { accounts[$0]!.projection(account: $0, asOf: time, revoked: revocations) }
    }

    /// Applies the event appended at `position`, which must be the next one.
    mutating func apply(_ event: Event, at position: UInt64, catalog: Catalog) throws(ProjectionInconsistency) {
        precondition(position == self.position + 1, "events must be applied in log order")
        try Projector.apply(event, at: position, catalog: catalog, to: &self)
        self.position = position
    }

    /// Counts for `ledger stats`.
    var entryCount: Int { accounts.values.reduce(0) { $0 + $1.entries.count } }
    var unfinishedCount: Int {
        accounts.values.reduce(0) { total, account in total + account.entries.values.count { !$0.isFinished } }
    }
}

extension LedgerState: ProjectionStore {
    func account(_ id: String) -> AccountState? {
        accounts[id]
    }

    mutating func updateAccount(_ id: String, _ body: (inout AccountState) -> Void) {
        body(&accounts[id, default: AccountState()])
    }

    func revocation(of transaction: String) -> UInt64? {
        revocations[transaction]
    }

    mutating func setRevocation(_ position: UInt64, of transaction: String) {
        revocations[transaction] = position
    }

    func consumableCredit(of transaction: String) -> EntryReference? {
        consumableCredits[transaction]
    }

    mutating func setConsumableCredit(_ entry: EntryReference, of transaction: String) {
        consumableCredits[transaction] = entry
    }
}
