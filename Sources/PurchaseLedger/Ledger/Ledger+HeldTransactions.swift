extension Ledger {
    /// The accounts that hold a store transaction on an entry (the transactions index), each
    /// once, in byte order: where reconciliation starts, without decoding every account.
    public func accountsHoldingStoreTransactions() throws -> [String] {
        var accounts: Set<UTF8Key> = []
        try storage.read { reader in
            try reader.forEachHolder { _, holder in accounts.insert(UTF8Key(holder.entry.account)) }
        }
        return accounts.sorted().map(\.string)
    }

    /// The accounts that own the chains `account` transferred away, now (where each chain's
    /// transfers took it): reconciliation visits them too, though the transactions index may
    /// name none of them.
    public func owners(ofChainsTransferredAwayBy account: String) throws -> Set<String> {
        let away = try live.withAccount(UTF8Key(account)) { state, _, _ in state.chainsTransferredAway } ?? []
        return try Set(away.map { try self.account(owningChain: $0.string, namedBy: account) })
    }

    /// The store transactions `account` holds now (from its entries and the store's reports in
    /// force), by transaction id, with the renewal info in force of each subscription.
    public func heldTransactions(of account: String) throws -> (held: [HeldTransaction], renewals: [String: RenewalInfo]) {
        try live.withAccount(UTF8Key(account)) { state, _, isRevoked in
            let held = try HeldTransaction.all(of: account, in: state, isRevoked: isRevoked)
            var renewals: [String: RenewalInfo] = [:]
            for (original, record) in state.renewals { renewals[original.string] = record.info }
            return (held, renewals)
        } ?? ([], [:])
    }
}