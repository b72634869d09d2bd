/// Read access to the projections: what the rules consult and what `Projector.apply` reads.
/// Accounts and store transaction ids are compared by their bytes. Reads may reach storage (a
/// snapshot, an index), hence `throws`.
protocol ProjectionReader {
    /// `query`'s answer about `account`'s state, nil when it has none. A store that layers
    /// changes over an older state asks the newest layer first and goes down while the answer
    /// is nil, so queries answer nil for "not here" (a missing entry, a transaction not held).
    func read<Answer: Sendable>(_ account: UTF8Key, _ query: (AccountState) -> Answer?) throws -> Answer?
    /// The account's whole state, every layer merged: for the rare question about all of it
    /// (a transfer's chain), which `read` cannot answer from a layer of changes.
    func wholeState(_ account: UTF8Key) throws -> AccountState?
    /// The position of the first revocation of `transaction` (ids are global), if revoked.
    func revocation(of transaction: UTF8Key) throws -> UInt64?
    /// The entry, of any account, holding `transaction` as its own store transaction.
    func holder(of transaction: UTF8Key) throws -> TransactionHolder?
}

/// The projections as `Projector.apply` changes them. `LedgerState` changes in place (replay);
/// the writer's `ProjectionSession` keeps changes aside until its transaction commits.
protocol ProjectionStore: ProjectionReader {
    mutating func change(_ account: UTF8Key, _ change: AccountChange) throws
    /// Changes the entry of `payment` through `body` and returns `body`'s answer; nil, and
    /// nothing changed, when the account has none. `body` changes the entry's fields, not the
    /// entry for another payment's.
    mutating func updateEntry<Answer>(_ account: UTF8Key, _ payment: UTF8Key, _ body: (inout QueueEntry) -> Answer) throws -> Answer?
    mutating func setRevocation(_ position: UInt64, of transaction: UTF8Key) throws
    mutating func setHolder(_ holder: TransactionHolder, of transaction: UTF8Key) throws
}

/// The account-state facts the rules and the projector read.
extension ProjectionReader {
    func entry(_ account: UTF8Key, _ payment: UTF8Key) throws -> QueueEntry? {
        try read(account) { $0.entries[payment] }
    }

    func entry(_ account: UTF8Key, _ payment: CompactID) throws -> QueueEntry? {
        try read(account) { $0.entries[payment] }
    }

    func balance(_ account: UTF8Key, _ item: UTF8Key) throws -> Int64? {
        try read(account) { $0.balances[item] }
    }

    /// True when one of the account's entries holds `transaction` as its transaction or its
    /// original transaction.
    func accountHolds(_ account: UTF8Key, transaction: UTF8Key) throws -> Bool {
        try read(account) { $0.holds(transaction) ? true : nil } ?? false
    }

    /// The store's report in force about `transaction` in this account.
    func storeTransaction(_ account: UTF8Key, _ transaction: UTF8Key) throws -> StoreTransactionRecord? {
        try read(account) { $0.storeTransactions[transaction] }
    }

    func renewal(_ account: UTF8Key, _ originalTransaction: UTF8Key) throws -> RenewalRecord? {
        try read(account) { $0.renewals[originalTransaction] }
    }

    /// Whether `transaction`'s credit is taken back in `account`: revoked by a `revoked` event
    /// (final), or by the store's report in force there.
    func isRevoked(_ transaction: UTF8Key, in account: UTF8Key) throws -> Bool {
        if try revocation(of: transaction) != nil { return true }
        return try storeTransaction(account, transaction)?.isRevokedByStore ?? false
    }
}

/// The account-state changes the projector makes.
extension ProjectionStore {
    mutating func setEntry(_ entry: QueueEntry, of account: UTF8Key) throws {
        try change(account, .entry(entry))
    }

    /// A copy read, changed and set: for a store that keeps changes as `AccountChange`s.
    mutating func updateEntry<Answer>(_ account: UTF8Key, _ payment: UTF8Key, _ body: (inout QueueEntry) -> Answer) throws -> Answer? {
        guard var entry = try entry(account, payment) else { return nil }
        let answer = body(&entry)
        try setEntry(entry, of: account)
        return answer
    }

    mutating func setBalance(_ value: Int64, of account: UTF8Key, item: UTF8Key) throws {
        try change(account, .balance(item: item, value))
    }
}
