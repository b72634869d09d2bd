/// What extending the tree keeps between batches (`Ledger.extendProofTree()`): each account's
/// commitment and the position of its newest leaf, as of a tree of `size` leaves, so that a
/// batch reads nothing of the accounts it has seen and writes only those it makes.
///
/// Right only while the stored tree has `size` leaves, so a batch uses it only then
/// (`ProofLeafBatch.read`), after moving it over leaves others added (their positions, read
/// from the records: a commitment never changes once stored). It is changed only by a batch
/// whose write committed: one that did not may have made commitments that were never stored.
struct ProofTreeAccounts {
    private(set) var size: UInt64 = 0
    private(set) var accounts: [UInt64: LeafRenderer.Account] = [:]

    /// The accounts kept at most (some tens of MB); past it they are let go, and read again as
    /// batches need them.
    static let limit = 1 << 18

    /// Moves the newest leaf of each account kept to `position`, a leaf after `size` that names
    /// `handle` (records read in order).
    mutating func advance(handle: UInt64, to position: UInt64) {
        accounts[handle]?.last = position
        size = position
    }

    /// Starts again, at `size`, knowing no account.
    mutating func reset(at size: UInt64) {
        self.size = size
        accounts.removeAll()
    }

    /// A batch committed: the tree now holds `size` leaves, and its accounts are as `changed`.
    mutating func committed(size: UInt64, accounts changed: [UInt64: LeafRenderer.Account]) {
        if accounts.count + changed.count > Self.limit { accounts.removeAll() }
        accounts.merge(changed) { _, new in new }
        self.size = size
    }
}
