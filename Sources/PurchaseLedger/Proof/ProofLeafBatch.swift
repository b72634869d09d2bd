/// An extension of the stored tree (`ProofTreeStore`) worked out on a reader and written by the
/// writer: what lets every leaf be rendered and hashed off the writer, which only checks that
/// nothing it depends on moved and writes what it changed.
///
/// `read` reads, in one transaction, the tree's size, the records after it, their accounts'
/// commitments and the tiles on the tree's right edge; `init(working:)` then, with no
/// transaction open, renders each leaf (`LeafRenderer`), hashes it with the subtrees it
/// completes, and keeps the tiles it changed and each account's record after. `write` holds
/// only if, in the writer's view, the tree still has that size (its tiles are then the same:
/// only an extension from that size changes them) and each account's record still has the
/// commitment and last position the batch started from (a forget in between may have made an
/// account's commitment, or destroyed its salt: the salt written is always the writer's, never
/// one read before).
struct ProofLeafBatch {
    /// The first and last positions added.
    let first: UInt64
    let last: UInt64
    /// The tiles changed, whole.
    private let tiles: [(key: String, bytes: [UInt8])]
    /// Each account's record as the batch read it (nil: none was stored, the batch made it) and
    /// after the batch.
    private let accounts: [(handle: UInt64, read: AccountCommitment?, after: AccountCommitment)]

    /// What a batch is worked out from, read in one transaction: the tree's size, the records
    /// after it, their accounts' commitments (made now for accounts without one) and the
    /// tiles on the tree's right edge.
    struct Reading {
        let size: UInt64
        let records: [(position: UInt64, bytes: [UInt8])]
        let commitments: [UInt64: AccountCommitment]
        /// The accounts whose commitment this reading made.
        let made: Set<UInt64>
        let hashes: StoredMerkleHashes
    }

    /// What the batch of positions after the stored size through `end` (at most `limit` of
    /// them) is worked out from, as `reader` sees it; nil when the tree holds them all.
    static func read(_ reader: any LedgerStorageReader, through end: UInt64, limit: UInt64) throws -> Reading? {
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
        return Reading(
            size: size, records: records, commitments: commitments, made: made,
            hashes: try StoredMerkleHashes(rightEdgeAt: size, reader: reader))
    }

    /// Works the batch out from `reading`, with no transaction open: each leaf rendered and
    /// hashed, and the subtrees it completes.
    init(working reading: Reading) throws {
        var renderer = LeafRenderer()
        let hashes = reading.hashes
        for (position, bytes) in reading.records {
            let leaf = try renderer.withLeaf(bytes, at: position, commitment: { handle, position in
                guard let commitment = reading.commitments[handle] else {
                    throw StorageError(.damaged, "the record at position \(position) names account handle \(handle), which the account table lacks", position: position)
                }
                return commitment
            }, MerkleHash.leaf)
            try MerkleTree.forEachCompletedSubtree(appending: leaf, at: position - 1, reading: hashes) { subtree, hash in
                try hashes.append(hash, level: subtree.level, index: subtree.index)
            }
        }
        first = reading.size + 1
        last = reading.records.last?.position ?? reading.size
        tiles = hashes.changedTiles()
        accounts = renderer.accounts.map { handle, after in
            (handle: handle, read: reading.made.contains(handle) ? nil : reading.commitments[handle], after: after)
        }
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
