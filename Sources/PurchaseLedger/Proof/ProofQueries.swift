/// An inclusion proof (RFC 9162 §2.1.3): the audit path of leaf `leafIndex` (position − 1) in
/// the tree of `treeSize` leaves, leaf to root.
public struct InclusionProof: Sendable, Hashable {
    public let leafIndex: UInt64
    public let treeSize: UInt64
    public let hashes: [MerkleHash]
}

/// A consistency proof (RFC 9162 §2.1.4) from the tree of `fromSize` leaves to the tree of
/// `treeSize`; none when they are equal.
public struct ConsistencyProof: Sendable, Hashable {
    public let fromSize: UInt64
    public let treeSize: UInt64
    public let hashes: [MerkleHash]
}

/// Roots, proofs and checkpoints of the tree a storage keeps (`ProofTreeStore`), for sizes up
/// to the stored tree's; `Ledger` and `LedgerLog` answer through it.
struct ProofQueries {
    let storage: any LedgerStorage

    func treeSize() throws -> UInt64 {
        try storage.read { try ProofTreeStore.size($0) }
    }

    func checkpoints() throws -> [StoredCheckpoint] {
        try storage.read { try StoredCheckpoint.all($0) }
    }

    /// The size a proof is for when none is asked: the newest checkpoint's, else the tree's.
    func defaultSize(_ reader: any LedgerStorageReader) throws -> UInt64 {
        try StoredCheckpoint.newest(reader)?.size ?? ProofTreeStore.size(reader)
    }

    private static func checkSize(_ size: UInt64, stored: UInt64) throws {
        guard 1 <= size, size <= stored else {
            throw MerkleTree.OutOfRange(description: "a tree size is from 1 to \(stored) (the tree's), not \(size)")
        }
    }

    func root(size: UInt64) throws -> MerkleHash {
        try storage.read { reader in
            let stored = try ProofTreeStore.size(reader)
            guard size > 0 else { return .empty }
            try Self.checkSize(size, stored: stored)
            return try MerkleTree.root(size: size, reading: StoredMerkleHashes(reader))
        }
    }

    func inclusionProof(position: UInt64, size: UInt64?) throws -> InclusionProof {
        try storage.read { reader in
            let stored = try ProofTreeStore.size(reader)
            let size = try size ?? defaultSize(reader)
            try Self.checkSize(size, stored: stored)
            guard 1 <= position, position <= size else {
                throw MerkleTree.OutOfRange(description: "a position in the tree of \(size) is from 1 to \(size), not \(position)")
            }
            let hashes = try MerkleTree.inclusionProof(index: position - 1, size: size, reading: StoredMerkleHashes(reader))
            return InclusionProof(leafIndex: position - 1, treeSize: size, hashes: hashes)
        }
    }

    func consistencyProof(from old: UInt64, size: UInt64?) throws -> ConsistencyProof {
        try storage.read { reader in
            let stored = try ProofTreeStore.size(reader)
            let size = try size ?? defaultSize(reader)
            try Self.checkSize(size, stored: stored)
            guard 1 <= old, old <= size else {
                throw MerkleTree.OutOfRange(description: "a consistency proof to \(size) is from 1 to \(size), not from \(old)")
            }
            let hashes = try MerkleTree.consistencyProof(from: old, to: size, reading: StoredMerkleHashes(reader))
            return ConsistencyProof(fromSize: old, treeSize: size, hashes: hashes)
        }
    }
}
