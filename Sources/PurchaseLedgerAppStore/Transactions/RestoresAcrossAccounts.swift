import PurchaseLedger

/// The restore policy for StoreKit 1's restores (`POST /v1/events`): a `restored` update names
/// a new transaction of the same original transaction, which the interchange format appends
/// in any account. With a policy set, a restore whose original transaction another account
/// owns is refused (`keep`), moves the purchase to the restoring account (`transfer`: the
/// `transferred` pair right after the restore, once it is in the log), or is appended as the
/// format says (`share`). Unset, the format's rule stands.
public struct RestoresAcrossAccounts: Sendable {
    let ledger: Ledger
    let policy: RestorePolicy?

    public init(ledger: Ledger, policy: RestorePolicy?) {
        self.ledger = ledger
        self.policy = policy
    }

    /// The lines to append: under `keep`, a restore of another account's purchase becomes its
    /// refusal (`transactionAlreadyCredited`), the other lines unchanged.
    public func admitting(_ lines: [Result<Event, LedgerError>]) throws -> [Result<Event, LedgerError>] {
        guard policy == .keep else { return lines }
        return try lines.map { line in
            guard case .success(let event) = line, let (original, owner) = try restoreOfAnother(event) else { return line }
            return .failure(LedgerError(.transactionAlreadyCredited,
                "original transaction \"\(original)\" belongs to account \"\(owner)\"; restores keep it there (restoresAcrossAccounts: keep)"))
        }
    }

    /// Under `transfer`: for each restore appended (or a duplicate: a retry after a crash
    /// between the two appends) whose original transaction another account still owns, the
    /// `transferred` pair moving it to the restoring account, appended now.
    public func transfer(after lines: [Result<Event, LedgerError>], results: [AppendResult]) async throws {
        guard policy == .transfer else { return }
        var transfers: [Event] = []
        for (line, result) in zip(lines, results) {
            guard case .success(let event) = line, case .success = result,
                  let (original, owner) = try restoreOfAnother(event) else { continue }
            transfers += Event.transfer(originalTransaction: original, from: owner, to: event.account, at: .now())
        }
        if !transfers.isEmpty { _ = try await ledger.append(contentsOf: transfers) }
    }

    /// For a `restored` update: its original transaction and the account that owns it, when
    /// that is another account.
    private func restoreOfAnother(_ event: Event) throws -> (original: String, owner: String)? {
        guard case .transactionUpdated(let update) = event.payload, update.state == .restored,
              let original = update.originalTransaction,
              let owner = try ledger.owner(ofTransaction: original, chain: original)
        else { return nil }
        return owner == event.account ? nil : (original, owner)
    }
}
