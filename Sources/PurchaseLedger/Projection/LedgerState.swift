/// The projections of every account after the first `position` events of a log.
///
/// A value: it never changes once taken. Two states are equal when every account's entries,
/// balances and transactions are equal, and the ledger-wide revocations and credits too: this is
/// how the tests compare a state kept up to date on append with one rebuilt by replay.
public struct LedgerState: Sendable, Equatable {
    /// How many events of the log this state reflects (0 for an empty log).
    public internal(set) var position: UInt64 = 0
    /// Dense tables, not dictionaries: a replay holds one state per account and one holder per
    /// purchase (`CompactTable`).
    var accounts = CompactTable<AccountState>()
    /// Revoked store transaction id → position of its first revocation (ids are global).
    var revocations: [UTF8Key: UInt64] = [:]
    /// Store transaction id → the entry holding it.
    var holders = CompactTable<TransactionHolder>()
    /// Entries of every account, and those not finished: kept on every change, for statistics.
    var entryCount = 0
    var unfinishedCount = 0
    /// The newest catalog the state was built with (the one the last event was applied with, or
    /// a snapshot read with): what a consumable credits, for the balances of a view scoped to
    /// some environments. Catalogs only grow, so it describes every product the state holds.
    /// Not part of equality: the state is the log's facts.
    var catalog: Catalog?

    public init() {}

    public static func == (lhs: LedgerState, rhs: LedgerState) -> Bool {
        lhs.position == rhs.position && lhs.accounts == rhs.accounts && lhs.revocations == rhs.revocations
            && lhs.holders == rhs.holders && lhs.entryCount == rhs.entryCount && lhs.unfinishedCount == rhs.unfinishedCount
    }

    /// The accounts with at least one appended event, in UTF-8 byte order.
    public var accountIDs: [String] {
        accounts.keys.sorted().map(\.string)
    }

    /// What `account` owns as of `time`; nil when the log has no event of that account.
    /// `excluding` leaves out the store's reports from those environments (`AccountProjection`).
    public func projection(
        of account: String, asOf time: Timestamp = .now(), excluding environments: Set<StoreEnvironment> = [],
        entitlements: [Catalog.Entitlement] = []
    ) -> AccountProjection? {
        projection(of: UTF8Key(account), asOf: time, excluding: environments, entitlements: entitlements)
    }

    /// Every account's projection, in account order; with the catalog's named `entitlements`.
    public func projections(
        asOf time: Timestamp = .now(), excluding environments: Set<StoreEnvironment> = [], entitlements: [Catalog.Entitlement] = []
    ) -> [AccountProjection] {
        accounts.keys.sorted().compactMap { projection(of: $0, asOf: time, excluding: environments, entitlements: entitlements) }
    }

    func projection(
        of account: UTF8Key, asOf time: Timestamp, excluding environments: Set<StoreEnvironment> = [], entitlements: [Catalog.Entitlement] = []
    ) -> AccountProjection? {
        guard let state = accounts[account] else { return nil }
        return AccountProjection(
            account: account.string, state: state, asOf: time, excluding: environments, entitlements: entitlements, catalog: catalog
        ) {
            revocations[$0] != nil
        }
    }

    /// Applies the event appended at `position`, which must be the next one.
    mutating func apply(_ event: Event, at position: UInt64, catalog: Catalog) throws(ProjectionInconsistency) {
        precondition(position == self.position + 1, "events must be applied in log order")
        self.catalog = catalog
        do {
            try Projector.apply(event, at: position, catalog: catalog, to: &self)
        } catch let inconsistency as ProjectionInconsistency {
            throw inconsistency
        } catch {
            preconditionFailure("an in-memory state does not throw: \(error)")
        }
        self.position = position
    }
}

extension LedgerState: ProjectionStore {
    func read<Answer: Sendable>(_ account: UTF8Key, _ query: (AccountState) -> Answer?) -> Answer? {
        accounts[account].flatMap(query)
    }

    func wholeState(_ account: UTF8Key) -> AccountState? {
        accounts[account]
    }

    func revocation(of transaction: UTF8Key) -> UInt64? {
        revocations[transaction]
    }

    func holder(of transaction: UTF8Key) -> TransactionHolder? {
        holders[transaction]
    }

    mutating func change(_ account: UTF8Key, _ change: AccountChange) {
        let moved = accounts.modify(account, default: { AccountState() }) { $0.apply(change) }
        entryCount += moved.entries
        unfinishedCount += moved.unfinished
    }

    /// In place: the replay's most frequent change, without the entry copied out and back.
    mutating func updateEntry<Answer>(_ account: UTF8Key, _ payment: UTF8Key, _ body: (inout QueueEntry) -> Answer) -> Answer? {
        var moved = AccountCounts()
        let answer = accounts.modifyIfPresent(account) { state in
            state.entries.update(payment) { entry in
                let wasFinished = entry.isFinished
                let answer = body(&entry)
                moved = AccountCounts(entryWasFinished: wasFinished, isFinished: entry.isFinished)
                return answer
            }
        } ?? nil
        entryCount += moved.entries
        unfinishedCount += moved.unfinished
        return answer
    }

    mutating func setRevocation(_ position: UInt64, of transaction: UTF8Key) {
        revocations[transaction] = position
    }

    /// Room for `transactions` held transactions, so that a replay from the start does not grow
    /// (and rehash) the table twenty times over.
    mutating func reserveCapacity(transactions: Int) {
        holders.reserveCapacity(transactions)
    }

    mutating func setHolder(_ holder: TransactionHolder, of transaction: UTF8Key) {
        holders[transaction] = holder
    }
}
