/// The proof-carrying ledger (docs/FORMAT.md, "The proof tree"): the tree kept beside the log,
/// its signed checkpoints and its proofs.
///
/// ## Topics
/// - ``extendProofTree()``
/// - ``signCheckpoint(with:origin:)``
/// - ``inclusionProof(position:size:)``
/// - ``consistencyProof(from:size:)``
extension Ledger {
    /// Leaves added to the tree per write: a write holds the writer, and the appends committed
    /// with it, for a bounded time.
    public static let proofTreeLeavesPerWrite: UInt64 = 1024

    /// Extends the tree by every record after its size, in writes of a bounded number of
    /// leaves queued with the appends.
    /// - Returns: the tree's size after (the log's last position when it returned, or later).
    /// - Throws: `StorageError` (`.readOnly` on a ledger open read-only).
    @discardableResult
    public func extendProofTree() async throws -> UInt64 {
        guard let writer else { throw StorageError(.readOnly, "the ledger at \(location) is open read-only") }
        while true {
            let (size, last) = try await writer.writeWithAppends { storage in
                let last = try storage.lastPosition()
                return (try ProofTreeExtension.extend(storage, through: last, limit: Self.proofTreeLeavesPerWrite), last)
            }
            if size >= last { return size }
        }
    }

    /// Signs a checkpoint of the tree at the log's head (extended first) and keeps it beside the log.
    /// - Parameters:
    ///   - signer: the checkpoint key (`ledger checkpoint-key generate`).
    ///   - origin: the checkpoint's first line; the key's name when nil.
    /// - Returns: the checkpoint as stored.
    /// - Throws: `StorageError`, or `NoteError` for an origin that is not one line.
    public func signCheckpoint(with signer: NoteSigner, origin: String? = nil) async throws -> StoredCheckpoint {
        guard let writer else { throw StorageError(.readOnly, "the ledger at \(location) is open read-only") }
        try await extendProofTree()
        let origin = origin ?? signer.name
        return try await writer.writeWithAppends { storage in
            let size = try ProofTreeExtension.extend(storage, through: try storage.lastPosition(), limit: .max)
            let root = size == 0 ? MerkleHash.empty : try MerkleTree.root(size: size, reading: StoredMerkleHashes(storage))
            let checkpoint = try Checkpoint(origin: origin, size: size, root: root)
            // To the millisecond, as it is kept: what this returns is what is read back.
            let now = Timestamp.now()
            let signedAt = Timestamp(seconds: now.seconds, nanoseconds: now.nanoseconds / 1_000_000 * 1_000_000)
            let stored = StoredCheckpoint(size: size, signedAt: signedAt, note: try SignedNote.sign(checkpoint.text, with: signer))
            try stored.store(storage)
            return stored
        }
    }

    /// Every checkpoint signed, oldest first.
    public func checkpoints() throws -> [StoredCheckpoint] {
        try ProofQueries(storage: storage).checkpoints()
    }

    /// The checkpoints of a size greater than `size`, oldest first, at most `limit`.
    public func checkpoints(after size: UInt64, limit: Int) throws -> [StoredCheckpoint] {
        try storage.read { try StoredCheckpoint.after(size, limit: limit, $0) }
    }

    /// The checkpoint signed last; nil before the first.
    public func newestCheckpoint() throws -> StoredCheckpoint? {
        try storage.read { try StoredCheckpoint.newest($0) }
    }

    /// The number of leaves the stored tree holds.
    public func proofTreeSize() throws -> UInt64 {
        try ProofQueries(storage: storage).treeSize()
    }

    /// The root of the tree of `size` leaves (at most the stored tree's).
    public func proofTreeRoot(size: UInt64) throws -> MerkleHash {
        try ProofQueries(storage: storage).root(size: size)
    }

    /// The inclusion proof of `position` in the tree of `size` leaves (the newest checkpoint's
    /// size when nil, else the stored tree's).
    /// - Throws: `MerkleTree.OutOfRange` for a position or size outside the stored tree.
    public func inclusionProof(position: UInt64, size: UInt64? = nil) throws -> InclusionProof {
        try ProofQueries(storage: storage).inclusionProof(position: position, size: size)
    }

    /// The consistency proof from the tree of `old` leaves to that of `size` (as `inclusionProof`).
    public func consistencyProof(from old: UInt64, size: UInt64? = nil) throws -> ConsistencyProof {
        try ProofQueries(storage: storage).consistencyProof(from: old, size: size)
    }
}
