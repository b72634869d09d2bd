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
        var accounts: [UInt64: AccountCommitment] = [:]
        var leaf = JSONWriter()
        // Read whole first: on a remote storage, no other query may run while records stream.
        var records: [(position: UInt64, bytes: [UInt8])] = []
        try writer.forEachRecord(from: size + 1, through: last) { position, bytes in
            records.append((position, Array(bytes)))
            return true
        }
        var expected = size + 1
        for (position, bytes) in records {
            guard position == expected else {
                throw StorageError(.damaged, "the log has no record at position \(expected)", position: expected)
            }
            expected += 1
            let (handle, event) = try bytes.withUnsafeBytes { try ProofLeaf.decodeAsForgotten($0, at: position) }
            var account: AccountCommitment
            if let known = accounts[handle] {
                account = known
            } else if let stored = try AccountCommitment.read(handle, reader: writer) {
                account = stored
            } else {
                guard let id = try writer.accountNames(from: handle, limit: 1).first, id.handle == handle else {
                    throw StorageError(.damaged, "the record at position \(position) names account handle \(handle), which the account table lacks", position: position)
                }
                account = AccountCommitment.make(for: id.account)
            }
            leaf.removeAll()
            ProofLeaf.write(event, commitment: account.text, previous: account.last, to: &leaf)
            account.last = position
            accounts[handle] = account
            for (subtree, hash) in try MerkleTree.completedSubtrees(appending: .leaf(leaf.bytes), at: position - 1, reading: hashes) {
                try hashes.append(hash, level: subtree.level, index: subtree.index)
            }
        }
        guard expected == last + 1 else {
            throw StorageError(.damaged, "the log has no record at position \(expected)", position: expected)
        }
        try hashes.writeChanged(writer)
        for (handle, account) in accounts {
            try writer.setFeedState(AccountCommitment.key(handle), account.bytes)
        }
        try writer.setFeedState(ProofTreeStore.sizeKey, ProofTreeStore.sizeBytes(last))
        return last
    }
}
