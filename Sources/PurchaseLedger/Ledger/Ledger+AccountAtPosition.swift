/// One account as it stood at a log position, rebuilt from its own history (the history
/// index), not from a replay of the whole ledger: what `replay --account` and the answer to a
/// refund request read.
extension Ledger {
    /// What `account` owned after the first `position` events, as of `time`; nil when the
    /// account had no event by then. Throws when `position` is beyond the log's end.
    public func projection(
        of account: String, atPosition position: UInt64, asOf time: Timestamp = .now(),
        excluding environments: Set<StoreEnvironment> = [], timeline: Bool = false
    ) throws -> AccountProjection? {
        let catalog = self.catalog
        return try accountState(account, atPosition: position) { state, reader in
            try AccountAtPosition.projection(
                of: account, state: state, at: position, reader: reader, catalog: catalog, asOf: time, excluding: environments, timeline: timeline)
        }
    }

    /// The facts an answer to Apple's question about `transaction` (a refund request) is built
    /// from, as they stood after the first `position` events. Deterministic for a position.
    public func consumptionFacts(of account: String, transaction: String, atPosition position: UInt64) throws -> ConsumptionFacts {
        let catalog = self.catalog
        return try accountState(account, atPosition: position) { state, _ in
            ConsumptionFacts(account: account, transaction: transaction, position: position, state: state, catalog: catalog)
        }
    }

    private func accountState<R>(
        _ account: String, atPosition position: UInt64, _ body: (AccountState?, any LedgerStorageReader) throws -> R
    ) throws -> R {
        try AccountAtPosition.read(account, at: position, last: self.position, storage: storage, catalog: catalog, body)
    }
}

extension LedgerLog {
    /// What `account` owned after the first `position` events (all when nil), as of `time`,
    /// rebuilt from the account's own history: `ledger replay --account`, without replaying
    /// every other account. Nil when the account had no event by then.
    public func projection(
        of account: String, atPosition position: UInt64? = nil, asOf time: Timestamp = .now(),
        excluding environments: Set<StoreEnvironment> = [], timeline: Bool = false
    ) throws -> AccountProjection? {
        let last = try lastPosition()
        let target = position ?? last
        let catalog = try catalog()
        return try AccountAtPosition.read(account, at: target, last: last, storage: storage, catalog: catalog) { state, reader in
            try AccountAtPosition.projection(
                of: account, state: state, at: target, reader: reader, catalog: catalog, asOf: time, excluding: environments, timeline: timeline)
        }
    }
}

/// One account's state at a position, from its history in one read transaction.
enum AccountAtPosition {
    static func read<R>(
        _ account: String, at position: UInt64, last: UInt64, storage: any LedgerStorage, catalog: Catalog,
        _ body: (AccountState?, any LedgerStorageReader) throws -> R
    ) throws -> R {
        guard position <= last else {
            throw StorageError(.damaged, "position \(position) is beyond the end of the log (\(last))", position: position)
        }
        return try storage.read { reader in
            // A name no event could carry has no history: not looked up at all.
            guard EventLimits.keyBytes.contains(account.utf8.count) else { return try body(nil, reader) }
            let state = try AccountRebuilder(reader: reader, catalog: catalog, names: storage.accountNames).state(of: account, through: position)
            return try body(state, reader)
        }
    }

    /// What the account owned, as `state` (rebuilt at `position`, in `reader`'s read) shows it.
    static func projection(
        of account: String, state: AccountState?, at position: UInt64, reader: any LedgerStorageReader, catalog: Catalog,
        asOf time: Timestamp, excluding environments: Set<StoreEnvironment>, timeline: Bool
    ) throws -> AccountProjection? {
        guard let state else { return nil }
        return try AccountProjection(
            account: account, state: state, asOf: time, excluding: environments, timeline: timeline, entitlements: catalog.entitlements,
            catalog: catalog, isRevoked: RevokedTransactions(of: state, by: position, reader: reader).isRevoked)
    }
}
