/// Read access to the projections, one fact at a time: what the rules consult and what
/// `Projector.apply` reads. Accounts and store transaction ids are compared by their bytes.
protocol ProjectionReader {
    func entry(_ account: UTF8Key, _ payment: UTF8Key) -> QueueEntry?
    func balance(_ account: UTF8Key, _ item: UTF8Key) -> Int64?
    /// True when one of the account's entries holds `transaction` as its transaction or its
    /// original transaction.
    func accountHolds(_ account: UTF8Key, transaction: UTF8Key) -> Bool
    /// The position of the first revocation of `transaction` (ids are global), if revoked.
    func revocation(of transaction: UTF8Key) -> UInt64?
    /// The purchased consumable entry that `transaction` credited, if any.
    func consumableCredit(of transaction: UTF8Key) -> EntryReference?
}

/// The projections as `Projector.apply` changes them. `LedgerState` changes in place (replay);
/// the writer's `AppendSession` keeps changes aside until its transaction commits.
protocol ProjectionStore: ProjectionReader {
    mutating func setEntry(_ entry: QueueEntry, of account: UTF8Key)
    mutating func setBalance(_ value: Int64, of account: UTF8Key, item: UTF8Key)
    mutating func addReference(_ transaction: UTF8Key, of account: UTF8Key)
    mutating func setRevocation(_ position: UInt64, of transaction: UTF8Key)
    mutating func setConsumableCredit(_ entry: EntryReference, of transaction: UTF8Key)
}
