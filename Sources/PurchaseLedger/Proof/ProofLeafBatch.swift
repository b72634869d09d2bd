/// An extension of the stored tree (`ProofTreeStore`) worked out on a reader and written by the
/// writer: what lets every leaf be rendered and hashed off the writer, which only checks that
/// nothing it depends on moved and writes what it changed.
///
/// `read` reads, in one transaction, the tree's size, the records after it, their accounts'
/// commitments and newest leaves (those `ProofTreeAccounts` does not know: the commitments
/// stored, or made now, and their newest events the tree holds, from the history index) and
/// the tiles on the tree's right edge; `init(working:)` then, with no transaction open,
/// renders each leaf (`LeafRenderer`), hashes it with the subtrees it completes, and keeps
/// the tiles it changed. `write` holds only if, in the writer's view, the tree still has that
/// size (its tiles are then the same: only an extension from that size changes them) and no
/// account whose commitment the batch made has one (a forget in between may have made it),
/// and the tree's newest leaves are those it read (not another tree of that size, a copy's);
/// it then also rewrites in the new form each commitment read in the older one.
struct ProofLeafBatch {
    /// The first and last positions added.
    let first: UInt64
    let last: UInt64
    /// The tiles changed, whole.
    private let tiles: [(key: String, bytes: [UInt8])]
    /// The commitments the batch made, to be stored.
    private let made: [UInt64: AccountCommitment]
    /// The accounts whose commitment it read in the older form, to be stored in the new one.
    private let olderForm: [UInt64]
    /// The tile of the tree's newest leaves as the batch read it (nil for an empty tree).
    private let newestLeaves: (key: String, bytes: [UInt8])?
    /// Each account of the batch after it: what `ProofTreeAccounts` keeps once it committed.
    let accounts: [UInt64: LeafRenderer.Account]

    /// What a batch is worked out from, read in one transaction: the tree's size, the records
    /// after it, each of their accounts as its first leaf here needs it (commitments made now
    /// for accounts without one) and the tiles on the tree's right edge.
    struct Reading {
        let size: UInt64
        let records: [(position: UInt64, bytes: [UInt8])]
        let accounts: [UInt64: LeafRenderer.Account]
        /// The commitments this reading made.
        let made: [UInt64: AccountCommitment]
        /// The accounts whose commitment it read in the older form.
        let olderForm: [UInt64]
        /// The tile holding the hash of the tree's newest leaf (nil for an empty tree).
        let newestLeaves: (key: String, bytes: [UInt8])?
        let hashes: StoredMerkleHashes
    }

    /// What the batch of positions after the stored size through `end` (at most `limit` of
    /// them) is worked out from, as `reader` sees it; nil when the tree holds them all.
    /// `known`, the accounts a follower kept, is first brought to the stored size.
    static func read(
        _ reader: any LedgerStorageReader, through end: UInt64, limit: UInt64, known: inout ProofTreeAccounts
    ) throws -> Reading? {
        let size = try ProofTreeStore.size(reader)
        try bring(&known, to: size, reader)
        guard end > size, limit > 0 else { return nil }
        let last = end - size <= limit ? end : size + limit
        let records = try LeafRenderer.records(reader, from: size + 1, through: last)
        var accounts: [UInt64: LeafRenderer.Account] = [:]
        var unknown = Set<UInt64>()
        for (position, bytes) in records {
            guard let handle = bytes.withUnsafeBytes({ LogRecordCodec.accountHandle(in: $0) }) else {
                throw StorageError(.damaged, "the record at position \(position) names its account by no handle (format 1: copy the ledger first)", position: position)
            }
            guard accounts[handle] == nil else { continue }
            if let account = known.accounts[handle] { accounts[handle] = account } else { unknown.insert(handle) }
        }
        var salts = SaltSource()
        let (commitments, madeHandles) = try AccountCommitment.readOrMake(unknown, salts: &salts, reader: reader)
        // An account without a commitment has no leaf yet; one with has its newest event in
        // the tree as its newest leaf.
        let stored = unknown.subtracting(madeHandles)
        let newest = stored.isEmpty ? [:] : try reader.newestPositions(ofAccounts: stored.sorted(), through: size)
        var made: [UInt64: AccountCommitment] = [:]
        var olderForm: [UInt64] = []
        for (handle, commitment) in commitments {
            accounts[handle] = LeafRenderer.Account(commitment: commitment.text, last: newest[handle] ?? 0)
            if madeHandles.contains(handle) { made[handle] = commitment }
            if commitment.isOlderForm { olderForm.append(handle) }
        }
        var newestLeaves: (key: String, bytes: [UInt8])?
        if size > 0 {
            let key = ProofTreeStore.tileKey(level: 0, tile: (size - 1) / ProofTreeStore.tileWidth)
            newestLeaves = (key, try reader.feedState(key) ?? [])
        }
        return Reading(
            size: size, records: records, accounts: accounts, made: made, olderForm: olderForm, newestLeaves: newestLeaves,
            hashes: try StoredMerkleHashes(rightEdgeAt: size, reader: reader))
    }

    /// Leaves added by others since `known`'s size, as many as one batch at most, move the
    /// accounts it keeps (read from the records, checked); more than that, or a tree smaller
    /// than it, and it starts again.
    private static func bring(_ known: inout ProofTreeAccounts, to size: UInt64, _ reader: any LedgerStorageReader) throws {
        guard known.size != size else { return }
        guard known.size < size, size - known.size <= Ledger.proofTreeLeavesPerWrite, !known.accounts.isEmpty else {
            known.reset(at: size)
            return
        }
        var expected = known.size + 1
        try reader.forEachRecord(from: expected, through: size) { position, bytes in
            guard position == expected, let handle = LogRecordCodec.indexedFields(in: bytes)?.account else {
                throw StorageError(.damaged, "the record at position \(expected) is missing or damaged", position: expected)
            }
            known.advance(handle: handle, to: position)
            expected += 1
            return true
        }
        guard known.size == size else {
            throw StorageError(.damaged, "the log has no record at position \(known.size + 1)", position: known.size + 1)
        }
    }

    /// Works the batch out from `reading`, with no transaction open: each leaf rendered and
    /// hashed, and the subtrees it completes.
    init(working reading: Reading) throws {
        var renderer = LeafRenderer(accounts: reading.accounts)
        let hashes = reading.hashes
        for (position, bytes) in reading.records {
            let leaf = try renderer.withLeaf(bytes, at: position, account: { handle, position in
                throw StorageError(.damaged, "the record at position \(position) names account handle \(handle), which the account table lacks", position: position)
            }, MerkleHash.leaf)
            try MerkleTree.forEachCompletedSubtree(appending: leaf, at: position - 1, reading: hashes) { subtree, hash in
                try hashes.append(hash, level: subtree.level, index: subtree.index)
            }
        }
        first = reading.size + 1
        last = reading.records.last?.position ?? reading.size
        tiles = hashes.changedTiles()
        made = reading.made
        olderForm = reading.olderForm
        newestLeaves = reading.newestLeaves
        accounts = renderer.accounts
    }

    /// Writes the batch if nothing it was worked out from has moved in `writer`'s view.
    /// - Returns: false, writing nothing, when something has (the tree was extended, or an
    ///   account whose commitment the batch made has one, since the batch read them).
    func write(_ writer: any LedgerStorageWriter) throws -> Bool {
        guard try ProofTreeStore.size(writer) == first - 1 else { return false }
        // Another tree of that size (a copy's, `Ledger.copyFeed`) has other leaves there: each
        // carries its account's salted commitment.
        if let newestLeaves, try writer.feedState(newestLeaves.key) ?? [] != newestLeaves.bytes { return false }
        let keys = made.keys.map(AccountCommitment.key)
        guard try keys.isEmpty || writer.feedStates(keys: keys).isEmpty else { return false }
        for (key, bytes) in tiles { try writer.setFeedState(key, bytes) }
        for (handle, commitment) in made { try writer.setFeedState(AccountCommitment.key(handle), commitment.bytes) }
        for (key, bytes) in try AccountCommitment.rewritten(olderForm, writer: writer) { try writer.setFeedState(key, bytes) }
        try writer.setFeedState(ProofTreeStore.sizeKey, ProofTreeStore.sizeBytes(last))
        return true
    }
}
