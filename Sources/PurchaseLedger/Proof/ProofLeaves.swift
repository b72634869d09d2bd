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
                        guard var stored = try AccountCommitment.read(handle, reader: reader) else {
                            throw StorageError(.damaged, "account handle \(handle) (position \(position)) has no commitment: the proof tree was not extended over it", position: position)
                        }
                        // What it holds as `last` is the tree's; this reading keeps its own.
                        stored.last = 0
                        return stored
                    }
                    return (position, leaf)
                }
            }
            for (position, bytes) in leaves { try body(position, bytes) }
            next = last + 1
        }
    }
}

/// A tree held in memory, built leaf by leaf (a verifier's own, to compare with the stored one).
final class MemoryMerkleHashes: MerkleHashReader {
    private(set) var levels: [[MerkleHash]] = []

    var size: UInt64 { UInt64(levels.first?.count ?? 0) }

    func hash(level: Int, index: UInt64) throws -> MerkleHash {
        guard level < levels.count, index < UInt64(levels[level].count) else {
            throw MerkleTree.OutOfRange(description: "no subtree \(index) at level \(level)")
        }
        return levels[level][Int(index)]
    }

    func append(leaf data: [UInt8]) throws {
        for (subtree, hash) in try MerkleTree.completedSubtrees(appending: .leaf(data), at: size, reading: self) {
            if subtree.level == levels.count { levels.append([]) }
            levels[subtree.level].append(hash)
        }
    }
}
