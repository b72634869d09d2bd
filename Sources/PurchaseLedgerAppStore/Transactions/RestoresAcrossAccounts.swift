import PurchaseLedger

/// The restore policy for StoreKit 1's restores (`POST /v1/events`): a `restored` update names
/// a new transaction of the same original transaction, which the interchange format appends
/// in any account. With a policy set, a restore whose original transaction another account
/// owns is refused (`keep`), moves the purchase to the restoring account (`transfer`: the
/// `transferred` pair and the restore, one fact in one commit), or is appended as the format
/// says (`share`). Unset, the format's rule stands.
///
/// A StoreKit 1 restore is the client's word: Apple signed nothing of it. So it moves a
/// purchase only for a client whose key may record what Apple says (`mayMovePurchases`: the
/// scope `events:store`, which a transfer posted as events needs too); for any other, a
/// restore of another account's purchase under `transfer` is refused as under `keep`. (A
/// StoreKit 2 transaction, which Apple signed, moves it under `events:write`:
/// `SignedTransactionHandler`.) No refusal names the account that owns the purchase.
public struct RestoresAcrossAccounts: Sendable {
    let ledger: Ledger
    let policy: RestorePolicy?
    /// Whether the client may move a purchase between accounts by its restore.
    let mayMovePurchases: Bool

    public init(ledger: Ledger, policy: RestorePolicy?, mayMovePurchases: Bool) {
        self.ledger = ledger
        self.policy = policy
        self.mayMovePurchases = mayMovePurchases
    }

    /// Appends a request's lines, each decoded into an event or already refused, in one commit:
    /// each line's event alone, or, under `transfer`, a restore of another account's purchase
    /// with the `transferred` pair before it, the three one fact (all or none). One result per
    /// line: its own event's.
    public func append(_ lines: [Result<Event, LedgerError>]) async throws -> [AppendResult] {
        var facts: [[Event]] = []
        var answers: [AppendResult?] = []
        for line in lines {
            let event: Event
            switch line {
            case .success(let decoded): event = decoded
            case .failure(let refusal):
                answers.append(.failure(refusal))
                continue
            }
            guard let policy, policy != .share, let original = try restoreOfAnother(event) else {
                facts.append([event])
                answers.append(nil)
                continue
            }
            if policy == .transfer && mayMovePurchases {
                facts.append(Event.transfer(originalTransaction: original, from: try owner(of: original), to: event.account, at: .now()) + [event])
                answers.append(nil)
            } else {
                let why = policy == .keep
                    ? "restores keep it there (restoresAcrossAccounts: keep)"
                    : "a StoreKit 1 restore moves a purchase only for a key with events:store (it carries no proof of Apple's); send the StoreKit 2 transaction to POST /v1/transactions instead"
                answers.append(.failure(LedgerError(.transactionAlreadyCredited,
                    "original transaction \"\(original)\" belongs to another account; \(why)")))
            }
        }
        var results = try await ledger.append(facts: facts).makeIterator()
        return answers.map { answer in
            if let answer { return answer }
            // A line's event is the last of its fact.
            return results.next()?.last ?? .failure(LedgerError(.invalidEvent, "no outcome"))
        }
    }

    /// For a `restored` update: its original transaction, when another account owns it.
    private func restoreOfAnother(_ event: Event) throws -> String? {
        guard case .transactionUpdated(let update) = event.payload, update.state == .restored,
              let original = update.originalTransaction,
              let owner = try ledger.owner(ofTransaction: original, chain: original)
        else { return nil }
        return owner == event.account ? nil : original
    }

    private func owner(of original: String) throws -> String {
        try ledger.owner(ofTransaction: original, chain: original) ?? ""
    }
}
