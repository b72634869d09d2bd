/// Rebuilds one account's state from the log, without the rest of the ledger: the account's
/// own events (from the history index), plus the revocations of its consumable purchases made
/// by other accounts (from the revocation index), applied in log order with the ledger-wide
/// facts as they stood before each event.
///
/// This is how a damaged stored state is replaced: the account comes back exactly as a full
/// replay would have built it, at the cost of its own history.
struct AccountRebuilder {
    let reader: any LedgerStorageReader
    let catalog: Catalog
    let names: AccountNames

    /// Records of the history read at once: a bound on what is held read ahead.
    static let recordsPerRead = 512

    func state(of account: String, through end: UInt64) throws -> AccountState? {
        let own = try reader.positions(ofAccount: account, after: 0, limit: .max).filter { $0 <= end }
        guard !own.isEmpty else { return nil }
        var pending = Set(own)
        var queue = own
        var store = SingleAccountStore(account: UTF8Key(account), facts: FactsAsOf(reader: reader, position: 0))
        // Read ahead, a bounded run of the history at a time (one query, not one per event, on
        // PostgreSQL), each record decoded in place; its failure is thrown in its turn. A refund
        // found meanwhile is read alone. The facts a run's events ask about are read with it,
        // one query each (a refund read alone asks about its own).
        var readAhead: [UInt64: Result<Event, any Error>] = [:]
        var index = 0
        while index < queue.count {
            let position = queue[index]
            if readAhead[position] == nil {
                let isRun = readAhead.isEmpty
                let run = isRun ? Array(queue[index..<min(queue.count, index + Self.recordsPerRead)]) : [position]
                var named: [UTF8Key] = []
                try reader.records(at: run) { at, bytes in
                    let decoded = Result { try LogReader.decode(bytes, at: at, reader: reader, names: names, readingProofs: false) }
                    if case .success(let event) = decoded, let transaction = Projector.transactionLookedUp(by: event) {
                        named.append(UTF8Key(transaction))
                    }
                    readAhead[at] = decoded
                }
                if isRun { try store.facts.prefetch(named) }
            }
            index += 1
            guard let event = try readAhead.removeValue(forKey: position)?.get() else {
                throw StorageError(.damaged, "the history index names position \(position), which the log lacks", position: position)
            }
            store.facts.position = position - 1
            do {
                try Projector.apply(event, at: position, catalog: catalog, to: &store)
            } catch let inconsistency as ProjectionInconsistency {
                throw inconsistency.damage(at: position)
            }
            // A consumable bought here and refunded later through another account.
            if case .transactionUpdated(let update) = event.payload, sameBytes(event.account, account),
               update.state == .purchased, let transaction = update.transaction,
               let refund = try store.facts.anyRevocation(of: UTF8Key(transaction)), refund > position, refund <= end,
               pending.insert(refund).inserted {
                let insertAt = queue[index...].firstIndex { $0 > refund } ?? queue.endIndex
                queue.insert(refund, at: insertAt)
            }
        }
        return store.state
    }
}

/// A projection store for one account: events of other accounts only ever reach it through a
/// refund of one of its purchases.
private struct SingleAccountStore: ProjectionStore {
    let account: UTF8Key
    var facts: FactsAsOf
    var state = AccountState()

    func read<Answer: Sendable>(_ account: UTF8Key, _ query: (AccountState) -> Answer?) throws -> Answer? {
        account == self.account ? query(state) : nil
    }

    func wholeState(_ account: UTF8Key) throws -> AccountState? {
        account == self.account ? state : nil
    }

    func revocation(of transaction: UTF8Key) throws -> UInt64? {
        try facts.revocation(of: transaction)
    }

    func holder(of transaction: UTF8Key) throws -> TransactionHolder? {
        try facts.holder(of: transaction)
    }

    mutating func change(_ account: UTF8Key, _ change: AccountChange) throws {
        if account == self.account { state.apply(change) }
    }

    mutating func setRevocation(_ position: UInt64, of transaction: UTF8Key) throws {}
    mutating func setHolder(_ holder: TransactionHolder, of transaction: UTF8Key) throws {}
}
