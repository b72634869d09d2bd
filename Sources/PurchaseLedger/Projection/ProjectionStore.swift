/// Read access to the projections, one fact at a time: what the rules consult and what
/// `Projector.apply` reads. Accounts and store transaction ids are compared by their bytes.
/// Reads may reach storage (a snapshot, an index), hence `throws`.
protocol ProjectionReader {
    func entry(_ account: UTF8Key, _ payment: UTF8Key) throws -> QueueEntry?
    func balance(_ account: UTF8Key, _ item: UTF8Key) throws -> Int64?
    /// True when one of the account's entries holds `transaction` as its transaction or its
    /// original transaction.
    func accountHolds(_ account: UTF8Key, transaction: UTF8Key) throws -> Bool
    /// The position of the first revocation of `transaction` (ids are global), if revoked.
    func revocation(of transaction: UTF8Key) throws -> UInt64?
    /// The entry, of any account, holding `transaction` as its own store transaction.
    func holder(of transaction: UTF8Key) throws -> TransactionHolder?
}

/// The projections as `Projector.apply` changes them. `LedgerState` changes in place (replay);
/// the writer's `ProjectionSession` keeps changes aside until its transaction commits.
protocol ProjectionStore: ProjectionReader {
    mutating func setEntry(_ entry: QueueEntry, of account: UTF8Key) throws
    mutating func setBalance(_ value: Int64, of account: UTF8Key, item: UTF8Key) throws
    mutating func addReference(_ transaction: UTF8Key, of account: UTF8Key) throws
    mutating func setRevocation(_ position: UInt64, of transaction: UTF8Key) throws
    mutating func setHolder(_ holder: TransactionHolder, of transaction: UTF8Key) throws
}
