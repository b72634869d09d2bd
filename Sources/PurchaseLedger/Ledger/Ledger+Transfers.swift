/// Moving or sharing a purchase by hand (`ledger transfer`, a back office): the transfer and
/// what gives the account it joins the purchase, one fact.
extension Ledger {
    /// The events that move (or, with `share`, share) the chain `originalTransaction` names from
    /// `from` to `to` at `at`, one fact to append whole (`append(facts:)`): the `transferred`
    /// pair (or the `shared` event), then what grants `to` the purchase, since an account is
    /// granted by its own records of a chain (FORMAT.md, "Transfers"): a copy of each of the
    /// store's reports in force in `from` of the chain's transactions and of its renewal info
    /// (Apple's instant kept, so the copy is in force as the original is; without Apple's proof
    /// and the customer's ids, which are `from`'s), or, when the store reported none of it, a
    /// `restored` update of the latest transaction of the chain `from`'s queue holds, and its
    /// finish. The server's own transfers need none of this: they move a chain because the
    /// account it joins reported it.
    ///
    /// Nothing is read but `from`'s state: the rules decide when the fact is appended (`from`
    /// must hold the chain; only what StoreKit restores moves).
    public func transferFact(
        originalTransaction chain: String, from: String, to: String, share: Bool = false, at: Timestamp = .now()
    ) throws -> [Event] {
        let moving = share
            ? [Event.share(originalTransaction: chain, from: from, to: to, at: at)]
            : Event.transfer(originalTransaction: chain, from: from, to: to, at: at)
        let base = share ? "share/\(chain)/\(at)/" : "transfer/\(chain)/\(at)/in/"
        guard EventLimits.keyBytes.contains(from.utf8.count), EventLimits.nameBytes.contains(chain.utf8.count) else { return moving }
        let key = UTF8Key(chain)
        let arrival = try live.withAccount(UTF8Key(from)) { state, _, _ -> [Event] in
            var events: [Event] = []
            for record in state.storeTransactions.values where sameBytes(record.fact.chain, chain) {
                var fact = record.fact
                (fact.signed, fact.appAccountToken, fact.appTransaction) = (nil, nil, nil)
                fact.source = share ? "shared" : "transferred"
                events.append(.storeTransaction(id: base + "report/" + fact.transaction, account: to, signedAt: record.signedAt, fact))
            }
            if let renewal = state.renewals[key] {
                var info = renewal.info
                (info.signed, info.appAccountToken, info.appTransaction) = (nil, nil, nil)
                info.source = share ? "shared" : "transferred"
                events.append(.renewalInfo(id: base + "renewal", account: to, signedAt: renewal.signedAt, info))
            }
            guard events.isEmpty else { return events }
            // The device's queue alone: its latest transaction of the chain, restored.
            let held = state.entries.values.filter { entry in
                (entry.state == .purchased || entry.state == .restored) && sameBytes(entry.chain, chain) && entry.transaction != nil
            }
            guard let latest = held.max(by: { $0.stateSetAt < $1.stateSetAt }), let transaction = latest.transaction else { return [] }
            let payment = (share ? "share/" : "transfer/") + at.description
            return [
                .transactionUpdated(id: base + "restore", account: to, at: at, TransactionUpdated(
                    payment: payment, state: .restored, transaction: transaction, originalTransaction: chain,
                    expiresAt: latest.expiresAt, product: latest.product, quantity: latest.quantity)),
                .transactionFinished(id: base + "restore/finish", account: to, at: at, payment: payment),
            ]
        } ?? []
        return moving + arrival
    }
}
