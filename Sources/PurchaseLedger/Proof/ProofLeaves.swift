/// Every leaf's data, in log order, rendered from the records and the stored commitments (what
/// `ledger export --as-forgotten` writes, and what `verify` hashes again to check the tree).
struct ProofLeaves {
    let storage: any LedgerStorage

    /// Calls `body` with each position from 1 through `end` and its leaf data. Reads in short
    /// read transactions of `LogReader.chunkSize` records.
    /// - Throws: `StorageError.damaged` for a record of an account without a commitment (the
    ///   tree was never extended over it: `Ledger.extendProofTree()`), or a damaged record.
    func forEach(through end: UInt64, _ body: (UInt64, [UInt8]) throws -> Void) throws {
        var renderer = LeafRenderer()
        var next: UInt64 = 1
        while next <= end {
            let last = min(end, next + UInt64(LogReader.chunkSize) - 1)
            let leaves: [(UInt64, [UInt8])] = try storage.read { reader in
                try LeafRenderer.records(reader, from: next, through: last).map { position, bytes in
                    let leaf = try renderer.leaf(bytes, at: position) { handle, position in
                        guard let stored = try AccountCommitment.read(handle, reader: reader) else {
                            throw StorageError(.damaged, "account handle \(handle) (position \(position)) has no commitment: the proof tree was not extended over it", position: position)
                        }
                        // Read from the first position: the account's first event is here.
                        return LeafRenderer.Account(commitment: stored.text, last: 0)
                    }
                    return (position, leaf)
                }
            }
            for (position, bytes) in leaves { try body(position, bytes) }
            next = last + 1
        }
    }
}

/// A tree's right edge, built leaf by leaf: the newest complete subtree of each level, which is
/// all that appending the next leaf reads (its left siblings). A verifier hashes the whole log
/// again with it in memory of the log's depth, not its length.
struct MerkleFrontier: MerkleHashReader {
    private(set) var size: UInt64 = 0
    private var newest: [(index: UInt64, hash: MerkleHash)] = []

    func hash(level: Int, index: UInt64) throws -> MerkleHash {
        guard level < newest.count, newest[level].index == index else {
            throw MerkleTree.OutOfRange(description: "subtree \(index) at level \(level) is not on the tree's right edge")
        }
        return newest[level].hash
    }

    /// The root of the leaves appended so far (MTH): the right edge's subtrees at the set bits
    /// of the size, folded from the right (the smallest is the rightmost).
    var root: MerkleHash {
        var root: MerkleHash?
        for level in newest.indices where size >> UInt64(level) & 1 == 1 {
            root = root.map { MerkleHash.node(newest[level].hash, $0) } ?? newest[level].hash
        }
        return root ?? .empty
    }

    /// Appends a leaf; calls `completed` with each subtree it completes, its own first.
    mutating func append(leaf data: [UInt8], _ completed: (MerkleTree.Subtree, MerkleHash) throws -> Void) throws {
        var made: [(MerkleTree.Subtree, MerkleHash)] = []
        try MerkleTree.forEachCompletedSubtree(appending: .leaf(data), at: size, reading: self) { made.append(($0, $1)) }
        for (subtree, hash) in made {
            if subtree.level == newest.count { newest.append((subtree.index, hash)) } else { newest[subtree.level] = (subtree.index, hash) }
            try completed(subtree, hash)
        }
        size += 1
    }
}
