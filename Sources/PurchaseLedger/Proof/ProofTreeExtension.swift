/// Extends the stored tree (`ProofTreeStore`) by the records after its size, in one write:
/// each record's leaf (`ProofLeaf`) hashed and added with the subtrees it completes, O(log n)
/// hashes per leaf and nothing of the log read again. An account's commitment is made the
/// first time one of its leaves needs it (unless its forget made it first).
enum ProofTreeExtension {
    /// Adds the leaves of positions after the stored size through `end`, at most `limit` of
    /// them; returns the stored tree's size after. Derives everything from `writer`'s view, so
    /// a write that runs again (a storage that grew) does the same.
    static func extend(_ writer: any LedgerStorageWriter, through end: UInt64, limit: UInt64) throws -> UInt64 {
        let size = try ProofTreeStore.size(writer)
        guard end > size, limit > 0 else { return size }
        let last = end - size <= limit ? end : size + limit
        let hashes = StoredMerkleHashes(writer)
        let records = try LeafRenderer.records(writer, from: size + 1, through: last)
        var handles = Set<UInt64>()
        for (position, bytes) in records {
            guard let handle = bytes.withUnsafeBytes({ LogRecordCodec.accountHandle(in: $0) }) else {
                throw StorageError(.damaged, "the record at position \(position) names its account by no handle (format 1: copy the ledger first)", position: position)
            }
            handles.insert(handle)
        }
        var salts = SaltSource()
        let commitments = try AccountCommitment.readOrMake(handles, salts: &salts, reader: writer)
        var renderer = LeafRenderer()
        for (position, bytes) in records {
            let leaf = try renderer.withLeaf(bytes, at: position, commitment: { handle, position in
                guard let commitment = commitments[handle] else {
                    throw StorageError(.damaged, "the record at position \(position) names account handle \(handle), which the account table lacks", position: position)
                }
                return commitment
            }, MerkleHash.leaf)
            try MerkleTree.forEachCompletedSubtree(appending: leaf, at: position - 1, reading: hashes) { subtree, hash in
                try hashes.append(hash, level: subtree.level, index: subtree.index)
            }
        }
        try hashes.writeChanged(writer)
        for (handle, account) in renderer.accounts {
            try writer.setFeedState(AccountCommitment.key(handle), account.bytes)
        }
        try writer.setFeedState(ProofTreeStore.sizeKey, ProofTreeStore.sizeBytes(last))
        return last
    }
}
