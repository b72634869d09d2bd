/// What `ledger verify --checkpoint` found (docs/FORMAT.md, "The proof tree").
public enum CheckpointVerification: Sendable, Hashable {
    /// The note is signed by the key, the ledger's tree at its size has its root, and the
    /// ledger's records and stored tree (of `treeSize` leaves) extend it.
    case verified(checkpoint: Checkpoint, treeSize: UInt64)
    /// Something does not verify; the reason says what.
    case failed(String)
}

/// The proof tree read from a ledger's files, without its projections.
///
/// ## Topics
/// - ``exportAsForgotten(progress:_:)``
/// - ``verifyCheckpoint(_:verifier:)``
/// - ``checkpoints()``
extension LedgerLog {
    /// Every checkpoint signed, oldest first.
    public func checkpoints() throws -> [StoredCheckpoint] {
        try ProofQueries(storage: storage).checkpoints()
    }

    /// The number of leaves the stored tree holds (`Ledger.extendProofTree()` extends it).
    public func proofTreeSize() throws -> UInt64 {
        try ProofQueries(storage: storage).treeSize()
    }

    /// See `Ledger.inclusionProof(position:size:)`.
    public func inclusionProof(position: UInt64, size: UInt64? = nil) throws -> InclusionProof {
        try ProofQueries(storage: storage).inclusionProof(position: position, size: size)
    }

    /// See `Ledger.consistencyProof(from:size:)`.
    public func consistencyProof(from old: UInt64, size: UInt64? = nil) throws -> ConsistencyProof {
        try ProofQueries(storage: storage).consistencyProof(from: old, size: size)
    }

    /// Writes each leaf's data (the positions the stored tree holds), a line each, handing
    /// `write` about 64 KiB at a time: `ledger export --as-forgotten`.
    public func exportAsForgotten(progress: (UInt64) -> Void = { _ in }, _ write: ([UInt8]) throws -> Void) throws {
        var buffer: [UInt8] = []
        buffer.reserveCapacity(1 << 16 + 4096)
        var position: UInt64 = 0
        try ProofLeaves(storage: storage).forEach(through: try proofTreeSize()) { at, leaf in
            buffer += leaf
            buffer.append(0x0A)
            position = at
            if buffer.count >= 1 << 16 {
                try write(buffer)
                buffer.removeAll(keepingCapacity: true)
                progress(position)
            }
        }
        if !buffer.isEmpty {
            try write(buffer)
            progress(position)
        }
    }

    /// Checks a signed checkpoint against this ledger: the note's signature by `verifier`,
    /// then every leaf the stored tree holds, hashed again from the records: the tree of the
    /// checkpoint's size must have its root, and the stored tree must be that tree.
    /// - Returns: `.failed` for anything that does not verify (a malformed note, another
    ///   key, a bad signature, a wrong root, a log rolled back below the checkpoint).
    /// - Throws: `StorageError` only when the ledger cannot be read.
    public func verifyCheckpoint(_ note: [UInt8], verifier: NoteVerifier, origin: String? = nil) throws -> CheckpointVerification {
        let checkpoint: Checkpoint
        do {
            checkpoint = try Checkpoint(text: try SignedNote.open(bytes: note, verifier: verifier))
        } catch let error as NoteError {
            return .failed("the checkpoint does not verify: \(error)")
        }
        // C2SP: a checkpoint counts for the log it names, which the verifier expects.
        let expected = origin ?? verifier.name
        guard checkpoint.origin == expected else {
            return .failed("the checkpoint is of the log \"\(checkpoint.origin)\", not \"\(expected)\"")
        }
        let stored: UInt64
        do {
            stored = try proofTreeSize()
        } catch let error as StorageError where error.code == .damaged {
            return .failed(error.message)
        }
        let last = try lastPosition()
        guard checkpoint.size <= last, checkpoint.size <= stored else {
            return .failed("the checkpoint is of \(checkpoint.size) events; this ledger's log holds \(last), its tree \(stored): rolled back, or another log")
        }
        let root: MerkleHash
        switch try recomputedTree(size: stored, rootsAt: [checkpoint.size]) {
        case .failure(let problem): return .failed(problem.reason)
        case .success(let roots): root = roots[checkpoint.size] ?? .empty
        }
        guard root == checkpoint.root else {
            return .failed("the ledger's tree of \(checkpoint.size) events has root \(root.base64), the checkpoint \(checkpoint.root.base64): an event was changed, or another log")
        }
        return .verified(checkpoint: checkpoint, treeSize: stored)
    }

    /// Why the stored tree is not the one its records make (every leaf hashed again), or nil
    /// when it is: `ledger verify`.
    public func proofTreeProblem() throws -> String? {
        let size: UInt64
        do {
            size = try proofTreeSize()
        } catch let error as StorageError where error.code == .damaged {
            return error.message
        }
        // Every checkpoint kept is of that tree (its signature needs the key: `verifyCheckpoint`).
        let checkpoints: [StoredCheckpoint]
        do {
            checkpoints = try self.checkpoints()
        } catch let error as StorageError where error.code == .damaged {
            return error.message
        }
        var notes: [(size: UInt64, checkpoint: Checkpoint)] = []
        for stored in checkpoints {
            guard let checkpoint = stored.checkpoint else { return "the checkpoint kept at size \(stored.size) is not a checkpoint note" }
            guard checkpoint.size == stored.size, checkpoint.size <= size else {
                return "the checkpoint kept at size \(stored.size) is beyond the stored tree (\(size) leaves)"
            }
            notes.append((stored.size, checkpoint))
        }
        let roots: [UInt64: MerkleHash]
        switch try recomputedTree(size: size, rootsAt: Set(notes.map(\.size))) {
        case .failure(let problem): return problem.reason
        case .success(let recomputed): roots = recomputed
        }
        for (size, checkpoint) in notes where roots[size] != checkpoint.root {
            return "the checkpoint kept at size \(size) is not of this tree"
        }
        return nil
    }

    /// Where an account's commitment is not SHA-256(its salt ‖ its id), if anywhere: the
    /// account table changed under the tree (ids swapped between handles). A forgotten
    /// account's has no salt, and nothing to check it with.
    func commitmentProblem() throws -> String? {
        try storage.read { reader in
            for (key, value) in try reader.feedStates(prefix: AccountCommitment.prefix) {
                let stored: AccountCommitment
                do {
                    stored = try AccountCommitment(stored: value, key: key)
                } catch let error as StorageError {
                    return error.message
                }
                guard let salt = stored.salt else { continue }
                guard let handle = UInt64(key.dropFirst(AccountCommitment.prefix.utf8.count)),
                      let row = try reader.accountNames(from: handle, limit: 1).first, row.handle == handle
                else { return "the proof state \(key) names no account of the account table" }
                guard AccountCommitment.commitment(salt: salt, id: row.account) == stored.commitment else {
                    return "account handle \(handle)'s commitment is not its id's: the account table changed under the tree"
                }
            }
            return nil
        }
    }

    struct TreeProblem: Error {
        var reason: String
    }

    /// The roots at `sizes` of the tree the records make, when the stored tree of `size`
    /// leaves is that tree: every leaf hashed again and every complete subtree it makes
    /// compared with the stored one, in memory of the tree's depth (a frontier), of one batch
    /// of subtrees and of the accounts. The roots come from the records, not the stored tree.
    func recomputedTree(
        size: UInt64, rootsAt sizes: Set<UInt64>, comparingAtOnce batch: Int = subtreesComparedAtOnce
    ) throws -> Result<[UInt64: MerkleHash], TreeProblem> {
        var frontier = MerkleFrontier()
        var made: [(MerkleTree.Subtree, MerkleHash)] = []
        var roots: [UInt64: MerkleHash] = sizes.contains(0) ? [0: .empty] : [:]
        do {
            try ProofLeaves(storage: storage).forEach(through: size) { _, leaf in
                try frontier.append(leaf: leaf) { made.append(($0, $1)) }
                if sizes.contains(frontier.size) { roots[frontier.size] = frontier.root }
                if made.count >= batch {
                    if let problem = try storedTreeDiffers(from: made) { throw problem }
                    made.removeAll(keepingCapacity: true)
                }
            }
        } catch let problem as TreeProblem {
            return .failure(problem)
        } catch let error as StorageError where error.code == .damaged {
            return .failure(TreeProblem(reason: "the ledger's records do not make its tree: \(error.message)"))
        }
        if let problem = try storedTreeDiffers(from: made) { return .failure(problem) }
        if let problem = try commitmentProblem() { return .failure(TreeProblem(reason: problem)) }
        return .success(roots)
    }

    /// Subtrees hashed again from the records, compared with the stored tree in one read.
    static let subtreesComparedAtOnce = 1 << 16

    /// Where the stored tree differs from `subtrees` (hashed again from the records), if it does.
    /// Reads the tiles that hold them in one read (a remote storage's one query).
    func storedTreeDiffers(from subtrees: [(MerkleTree.Subtree, MerkleHash)]) throws -> TreeProblem? {
        let width = ProofTreeStore.tileWidth
        var keys = Set<String>()
        for (subtree, _) in subtrees { keys.insert(ProofTreeStore.tileKey(level: subtree.level, tile: subtree.index / width)) }
        let tiles = try storage.read { try $0.feedStates(keys: Array(keys)) }
        for (key, tile) in tiles where tile.count % 32 != 0 || tile.count > Int(width) * 32 {
            return TreeProblem(reason: "the proof state \(key) holds \(tile.count) bytes, not a whole number of hashes")
        }
        for (subtree, hash) in subtrees {
            let start = Int(subtree.index % width) * 32
            let key = ProofTreeStore.tileKey(level: subtree.level, tile: subtree.index / width)
            guard let tile = tiles[key], start + 32 <= tile.count,
                  let kept = tile.withUnsafeBytes({ MerkleHash(raw: UnsafeRawBufferPointer(rebasing: $0[start..<start + 32])) })
            else {
                return TreeProblem(reason: "the proof tree lacks the hash of subtree \(subtree.index) at level \(subtree.level)")
            }
            if kept != hash {
                return TreeProblem(reason: "the stored tree's hash of subtree \(subtree.index) at level \(subtree.level) is not the records'")
            }
        }
        return nil
    }
}
