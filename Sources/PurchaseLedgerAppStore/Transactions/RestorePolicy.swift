/// What the server does with a restore of a purchase (its chain) another account owns: the
/// customer signed in to a new account and restored (`restoresAcrossAccounts`, docs/SERVER.md;
/// StoreKit 1's restores: `RestoresAcrossAccounts`).
public enum RestorePolicy: String, Sendable, Hashable, Codable, CaseIterable {
    /// The purchase stays with the account that holds it; the new account's report is refused
    /// (`transactionAlreadyCredited`). What StoreKit 2 transactions get when none is set.
    case keep
    /// The purchase moves to the new account: a `transferred` pair of events with the new
    /// account's report (after a StoreKit 1 restore); the old account loses it, and Apple's later reports of the chain go to
    /// the new one.
    case transfer
    /// Both accounts have it: a `shared` event, then the new account's report (a StoreKit 1
    /// restore is appended as the format says, which grants both already). The owner keeps
    /// it, and Apple's later notifications (whose token names the owner) go to the owner; the
    /// new account's answers follow what its device reports.
    case share
}
