import Logging
import Synchronization

/// The proof-carrying ledger (docs/FORMAT.md, "The proof tree"): the tree kept beside the log,
/// its signed checkpoints and its proofs.
///
/// ## Topics
/// - ``extendProofTree(through:)``
/// - ``followProofTree()``
/// - ``signCheckpoint(with:origin:)``
/// - ``inclusionProof(position:size:)``
/// - ``consistencyProof(from:size:)``
extension Ledger {
    /// Leaves added to the tree per batch: a batch holds its reader, and its write the writer
    /// (and the appends committed with it), for a bounded time.
    public static let proofTreeLeavesPerWrite: UInt64 = 1024

    /// Extends the tree by every record after its size (or, with `target`, until it holds at
    /// least that many leaves), a batch of at most `proofTreeLeavesPerWrite` leaves at a time:
    /// what each is worked out from read in a short read transaction, its leaves rendered and
    /// hashed after it, off the writer, which only checks that the tree did not move and that
    /// no commitment the batch made was made meanwhile, and writes the batch, queued with the
    /// appends (`ProofLeafBatch`). A batch that moved (another process's extension, a forget in
    /// between) is worked out again from what moved it. Each account's commitment and newest
    /// leaf are kept between batches (`ProofTreeAccounts`).
    /// - Returns: the tree's size after (the log's last position when it returned, or later;
    ///   with `target`, at least `target` when the log holds that many events).
    /// - Throws: `StorageError` (`.readOnly` on a ledger open read-only); `CancellationError`
    ///   between batches when the calling task is cancelled (the batches written stay).
    @discardableResult
    public func extendProofTree(through target: UInt64? = nil) async throws -> UInt64 {
        guard let writer else { throw StorageError(.readOnly, "the ledger at \(location) is open read-only") }
        while true {
            // Between batches: a follower stops when its task is cancelled, even behind a busy log.
            try Task.checkCancellation()
            // Not waiting for a turn that would only extend past `target`.
            if let target, case let size = try proofTreeSize(), size >= target { return size }
            let extended = try await proofTreeTurns.inTurn {
                // Milliseconds of CPU work without a suspension point: on the background
                // executor, not on a thread the appenders resume on.
                let worked = try await withTaskExecutorPreference(configuration.backgroundExecutor) { () throws -> ProofLeafBatch? in
                    let reading = try storage.read { reader -> ProofLeafBatch.Reading? in
                        if let target, try ProofTreeStore.size(reader) >= target { return nil }
                        let end = try reader.lastPosition()
                        // Taken out and put back: read in the lock, the reading would have to be `sending`.
                        var known = proofTreeAccounts.withLock { state in
                            var taken = ProofTreeAccounts()
                            swap(&taken, &state)
                            return taken
                        }
                        defer { proofTreeAccounts.withLock { swap(&known, &$0) } }
                        return try ProofLeafBatch.read(reader, through: end, limit: Self.proofTreeLeavesPerWrite, known: &known)
                    }
                    // Rendered and hashed with no transaction open: a reader that works holds
                    // back nothing of the writer's (RELIABILITY.md).
                    return try reading.map { try ProofLeafBatch(working: $0) }
                }
                guard let batch = worked else { return false }
                // Not written when it moved: the next turn starts from what moved it.
                if try await writer.writeWithAppends({ try batch.write($0) }) {
                    proofTreeAccounts.withLock { $0.committed(size: batch.last, accounts: batch.accounts) }
                }
                return true
            }
            guard extended else { return try proofTreeSize() }
        }
    }

    /// Extends the tree as the log grows, until the calling task is cancelled or the ledger
    /// closed: after each commit, the leaves it added (`extendProofTree()`), so that the
    /// writer only writes batches worked out on another core while it commits the next
    /// appends, and a checkpoint finds the tree nearly there. An error is logged, and the
    /// next commit after a second tries again.
    ///
    /// Each batch is a few milliseconds of CPU work without a suspension point, done on
    /// `Configuration.backgroundExecutor` (by default threads of the ledger's own), so that it
    /// holds none of the threads the appenders resume on.
    public func followProofTree() async {
        while !Task.isCancelled, !isClosed.load(ordering: .acquiring) {
            do {
                let size = try proofTreeSize()
                // Again at once only when the tree grew: one that could not (the log as
                // storage shows it not yet where the ledger is) waits for the next commit.
                if size < position, try await extendProofTree() > size { continue }
            } catch is CancellationError {
                return
            } catch {
                guard !isClosed.load(ordering: .acquiring) else { return }
                configuration.logger.error("the proof tree could not be extended; the next commit tries again", metadata: ["error": "\(error)"])
                await commitSignal.wait(timeout: .seconds(1))
            }
            await commitSignal.wait(timeout: .milliseconds(250))
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
        // Up to the head as it is now, in batches off the writer; the write below adds what
        // was appended meanwhile.
        try await extendProofTree(through: position)
        let origin = origin ?? signer.name
        // In a turn of its own: what the ledger kept is then the last committed batch's.
        return try await proofTreeTurns.inTurn {
            let known = proofTreeAccounts.withLock { $0 }
            return try await writer.writeWithAppends { storage in
                let size = try ProofTreeExtension.extend(storage, through: try storage.lastPosition(), limit: .max, known: known)
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
