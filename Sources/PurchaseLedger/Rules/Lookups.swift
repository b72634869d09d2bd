/// What a batch's rules will look up: its event ids (duplicates), the store transactions its
/// events name (holders, revocations), and the states of its accounts that are not in memory,
/// as of the snapshot the ledger reads from.
package struct Lookups: Sendable {
    package var eventIDs: [String] = []
    package var transactions: [String] = []
    /// Accounts to read from the snapshot at `snapshot` (`accountState(_:atOrBefore:)`).
    package var accounts: [String] = []
    package var snapshot: UInt64?
    /// Accounts the batch's records name whose handles this process has not seen
    /// (`accountHandle(of:)`); a storage that fetches them ahead also fetches the last handle.
    package var accountHandles: [String] = []

    package init(
        eventIDs: [String] = [], transactions: [String] = [], accounts: [String] = [], snapshot: UInt64? = nil,
        accountHandles: [String] = []
    ) {
        self.eventIDs = eventIDs
        self.transactions = transactions
        self.accounts = accounts
        self.snapshot = snapshot
        self.accountHandles = accountHandles
    }
}
