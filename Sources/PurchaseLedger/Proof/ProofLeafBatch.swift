/// An extension of the stored tree (`ProofTreeStore`) worked out on a reader and written by the
/// writer: what lets every leaf be rendered and hashed off the writer, which only checks that
/// nothing it depends on moved and writes what it changed.
///
/// `prepare` reads the tree's size, the records after it and their accounts' commitments in one
/// view, renders each leaf (`LeafRenderer`), hashes it with the subtrees it completes, and
/// keeps the tiles it changed and each account's record after. `write` holds only if, in the
/// writer's view, the tree still has that size (its tiles are then the same: only an extension
/// from that size changes them) and each account's record still has the commitment and last
/// position the batch started from (a forget in between may have made an account's commitment,
/// or destroyed its salt: the salt written is always the writer's, never one read before).
struct ProofLeafBatch {
    /// The first and last positions added.
    let first: UInt64
    let last: UInt64
    /// The tiles changed, whole.
    private let tiles: [(key: String, bytes: [UInt8])]
    /// Each account's record as the batch read it (nil: none was stored, the batch made it) and
    /// after the batch.
    private let accounts: [(handle: UInt64, read: AccountCommitment?, after: AccountCommitment)]

    /// The leaves of positions after the stored size through `end`, at most `limit` of them, as
    /// `reader` sees them; nil when the tree holds them all.
    static func prepare(_ reader: any LedgerStorageReader, through end: UInt64, limit: UInt64) throws -> ProofLeafBatch? {
        let size = try ProofTreeStore.size(reader)
        guard end > size, limit > 0 else { return nil }
        let last = end - size <= limit ? end : size + limit
        let records = try LeafRenderer.records(reader, from: size + 1, through: last)
        var handles = Set<UInt64>()
        for (position, bytes) in records {
            guard let handle = bytes.withUnsafeBytes({ LogRecordCodec.accountHandle(in: $0) }) else {
                throw StorageError(.damaged, "the record at position \(position) names its account by no handle (format 1: copy the ledger first)", position: position)
            }
            handles.insert(handle)
        }
        var salts = SaltSource()
        let (commitments, made) = try AccountCommitment.readOrMake(handles, salts: &salts, reader: reader)
        let hashes = StoredMerkleHashes(reader)
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
        let accounts = renderer.accounts.map { handle, after in
            (handle: handle, read: made.contains(handle) ? nil : commitments[handle], after: after)
        }
        return ProofLeafBatch(first: size + 1, last: last, tiles: hashes.changedTiles(), accounts: accounts)
    }

    /// Writes the batch if nothing it was worked out from has moved in `writer`'s view.
    /// - Returns: false, writing nothing, when something has (the tree was extended, or an
    ///   account's record changed, since the batch read them).
    func write(_ writer: any LedgerStorageWriter) throws -> Bool {
        guard try ProofTreeStore.size(writer) == first - 1 else { return false }
        let stored = try writer.feedStates(keys: accounts.map { AccountCommitment.key($0.handle) })
        var records: [(key: String, bytes: [UInt8])] = []
        records.reserveCapacity(accounts.count)
        for (handle, read, after) in accounts {
            let key = AccountCommitment.key(handle)
            let now = try stored[key].map { try AccountCommitment(stored: $0, key: key) }
            guard now?.commitment == read?.commitment, now?.last == read?.last else { return false }
            records.append((key, AccountCommitment(commitment: after.commitment, last: after.last, salt: now == nil ? after.salt : now?.salt).bytes))
        }
        for (key, bytes) in tiles { try writer.setFeedState(key, bytes) }
        for (key, bytes) in records { try writer.setFeedState(key, bytes) }
        try writer.setFeedState(ProofTreeStore.sizeKey, ProofTreeStore.sizeBytes(last))
        return true
    }
}
