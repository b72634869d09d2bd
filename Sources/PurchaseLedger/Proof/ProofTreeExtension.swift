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
    static func extend(_ writer: any LedgerStorageWriter, through end: UInt64, limit: UInt64) throws -> UInt64 {
        guard let reading = try ProofLeafBatch.read(writer, through: end, limit: limit) else { return try ProofTreeStore.size(writer) }
        let batch = try ProofLeafBatch(working: reading)
        guard try batch.write(writer) else {
            throw StorageError(.damaged, "the proof tree moved within one write while it was extended")
        }
        return batch.last
    }
}
