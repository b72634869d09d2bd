/// Extends the stored tree (`ProofTreeStore`) by the records after its size, in one write:
/// each record's leaf (`ProofLeaf`) hashed and added with the subtrees it completes, O(log n)
/// hashes per leaf and nothing of the log read again. An account's commitment is made the
/// first time one of its leaves needs it (unless its forget made it first).
///
/// `Ledger.extendProofTree()` works each batch out on a reader (`ProofLeafBatch`), off the
/// writer; this does it all in the writer's view, where the batch always holds.
enum ProofTreeExtension {
    /// Adds the leaves of positions after the stored size through `end`, at most `limit` of
    /// them; returns the stored tree's size after. Derives everything from `writer`'s view, so
    /// a write that runs again (a storage that grew) does the same.
    /// `known`: the accounts a follower kept, used only if they are of the stored tree's size
    /// (never changed here: what this write makes may not commit, see `ProofTreeAccounts`).
    static func extend(_ writer: any LedgerStorageWriter, through end: UInt64, limit: UInt64, known: ProofTreeAccounts = ProofTreeAccounts()) throws -> UInt64 {
        // Of another size, they would be moved (and copied whole) first: not on the writer.
        var known = try known.size == ProofTreeStore.size(writer) ? known : ProofTreeAccounts()
        guard let reading = try ProofLeafBatch.read(writer, through: end, limit: limit, known: &known) else { return try ProofTreeStore.size(writer) }
        let batch = try ProofLeafBatch(working: reading)
        guard try batch.write(writer) else {
            throw StorageError(.damaged, "the proof tree moved within one write while it was extended")
        }
        return batch.last
    }
}
