import LedgerTestSupport
import Testing
@testable import PurchaseLedger

/// The log's Merkle tree (issue 44, its first part): roots and proofs computed from the stored
/// complete subtrees are RFC 9162's, as a direct transcription of the RFC's recursive
/// definitions computes them, and the auditor's checks accept them and refuse them changed.
struct MerkleTreeTests {
    /// The stored subtrees in memory, filled as `MerkleTree.completedSubtrees` says.
    final class Store: MerkleHashReader {
        var hashes: [MerkleTree.Subtree: MerkleHash] = [:]
        private(set) var leaves: [MerkleHash] = []

        func hash(level: Int, index: UInt64) throws -> MerkleHash {
            guard let hash = hashes[MerkleTree.Subtree(level: level, index: index)] else { throw TestFailure("no stored subtree \(level)/\(index)") }
            return hash
        }

        func append(_ data: [UInt8]) throws {
            let leaf = MerkleHash.leaf(data)
            for (subtree, hash) in try MerkleTree.completedSubtrees(appending: leaf, at: UInt64(leaves.count), reading: self) {
                #expect(hashes[subtree] == nil, "a subtree is stored once")
                hashes[subtree] = hash
            }
            leaves.append(leaf)
        }
    }

    // RFC 9162 §2.1, transcribed: MTH, PATH and PROOF over a list of leaf hashes.
    static func mth(_ d: ArraySlice<MerkleHash>) -> MerkleHash {
        if d.isEmpty { return .empty }
        if d.count == 1 { return d.first! }
        let k = largestPowerOfTwo(below: d.count)
        return .node(mth(d.prefix(k)), mth(d.dropFirst(k)))
    }

    static func path(_ m: Int, _ d: ArraySlice<MerkleHash>) -> [MerkleHash] {
        if d.count == 1 { return [] }
        let k = largestPowerOfTwo(below: d.count)
        return m < k ? path(m, d.prefix(k)) + [mth(d.dropFirst(k))] : path(m - k, d.dropFirst(k)) + [mth(d.prefix(k))]
    }

    static func subproof(_ m: Int, _ d: ArraySlice<MerkleHash>, _ b: Bool) -> [MerkleHash] {
        if m == d.count { return b ? [] : [mth(d)] }
        let k = largestPowerOfTwo(below: d.count)
        return m <= k ? subproof(m, d.prefix(k), b) + [mth(d.dropFirst(k))] : subproof(m - k, d.dropFirst(k), false) + [mth(d.prefix(k))]
    }

    static func largestPowerOfTwo(below n: Int) -> Int {
        var k = 1
        while k * 2 < n { k *= 2 }
        return k
    }

    static func changed(_ hash: MerkleHash) -> MerkleHash {
        var bytes = hash.bytes
        bytes[7] ^= 0x40
        return MerkleHash(bytes: bytes)!
    }

    /// The roots of RFC 6962's reference leaves (the test data of Certificate Transparency's
    /// implementations), checked with Python's hashlib when this test was written.
    @Test func theRootsAreRFC6962sReferenceRoots() throws {
        let leaves = ["", "00", "10", "2021", "3031", "40414243", "5051525354555657", "606162636465666768696a6b6c6d6e6f"]
        let roots = [
            "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
            "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
            "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
            "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
            "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
            "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
            "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
        ]
        func bytes(_ hex: String) -> [UInt8] {
            stride(from: 0, to: hex.count, by: 2).map { UInt8(hex.dropFirst($0).prefix(2), radix: 16)! }
        }
        let store = Store()
        #expect(try MerkleTree.root(size: 0, reading: store).bytes == bytes("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"))
        for (leaf, root) in zip(leaves, roots) {
            try store.append(bytes(leaf))
            #expect(try MerkleTree.root(size: UInt64(store.leaves.count), reading: store).bytes == bytes(root), "size \(store.leaves.count)")
        }
    }

    /// Every root, inclusion proof and consistency proof of every size up to 70 leaves is the
    /// RFC's; each verifies, and none does with a hash or the index changed, an index past the
    /// tree, or a hash missing. (A proof names no size: the signed checkpoint vouches for it.)
    @Test func everyProofIsTheRFCsAndVerifiesOnlyAsItIs() throws {
        let store = Store()
        for index in 0..<70 { try store.append(Array("event \(index)".utf8)) }
        // Stored: the leaves and the complete subtrees, fewer than two per leaf.
        #expect(store.hashes.count < 2 * store.leaves.count)
        for n in 1...70 {
            let d = store.leaves[..<n]
            let root = try MerkleTree.root(size: UInt64(n), reading: store)
            #expect(root == Self.mth(d), "root of \(n)")
            for m in 0..<n {
                let proof = try MerkleTree.inclusionProof(index: UInt64(m), size: UInt64(n), reading: store)
                #expect(proof == Self.path(m, d), "PATH(\(m), D[\(n)])")
                let leaf = store.leaves[m]
                #expect(MerkleProofVerification.inclusion(leaf: leaf, index: UInt64(m), size: UInt64(n), path: proof, root: root))
                #expect(!MerkleProofVerification.inclusion(leaf: Self.changed(leaf), index: UInt64(m), size: UInt64(n), path: proof, root: root))
                #expect(!MerkleProofVerification.inclusion(leaf: leaf, index: UInt64(m), size: UInt64(n), path: proof, root: Self.changed(root)))
                for i in proof.indices {
                    var bad = proof
                    bad[i] = Self.changed(bad[i])
                    #expect(!MerkleProofVerification.inclusion(leaf: leaf, index: UInt64(m), size: UInt64(n), path: bad, root: root))
                }
                if n > 1 {
                    let other = (m + 1) % n
                    #expect(!MerkleProofVerification.inclusion(leaf: leaf, index: UInt64(other), size: UInt64(n), path: proof, root: root))
                }
                #expect(!MerkleProofVerification.inclusion(leaf: leaf, index: UInt64(n), size: UInt64(n), path: proof, root: root))
            }
            for m in 1...n {
                let proof = try MerkleTree.consistencyProof(from: UInt64(m), to: UInt64(n), reading: store)
                #expect(proof == Self.subproof(m, d, true), "PROOF(\(m), D[\(n)])")
                let old = Self.mth(store.leaves[..<m])
                #expect(MerkleProofVerification.consistency(oldSize: UInt64(m), oldRoot: old, size: UInt64(n), root: root, proof: proof))
                #expect(!MerkleProofVerification.consistency(oldSize: UInt64(m), oldRoot: Self.changed(old), size: UInt64(n), root: root, proof: proof))
                #expect(!MerkleProofVerification.consistency(oldSize: UInt64(m), oldRoot: old, size: UInt64(n), root: Self.changed(root), proof: proof))
                for i in proof.indices {
                    var bad = proof
                    bad[i] = Self.changed(bad[i])
                    #expect(!MerkleProofVerification.consistency(oldSize: UInt64(m), oldRoot: old, size: UInt64(n), root: root, proof: bad))
                }
                if m < n {
                    #expect(!MerkleProofVerification.consistency(oldSize: UInt64(m), oldRoot: old, size: UInt64(n), root: root, proof: proof.dropLast() + []))
                }
            }
        }
    }

    /// Sizes and indices out of range are refused with an error, never a trap: a client names them.
    @Test func aProofOutOfRangeIsRefused() throws {
        let store = Store()
        for index in 0..<5 { try store.append([UInt8(index)]) }
        #expect(throws: MerkleTree.OutOfRange.self) { try MerkleTree.inclusionProof(index: 5, size: 5, reading: store) }
        #expect(throws: MerkleTree.OutOfRange.self) { try MerkleTree.inclusionProof(index: 0, size: 0, reading: store) }
        #expect(throws: MerkleTree.OutOfRange.self) { try MerkleTree.consistencyProof(from: 0, to: 5, reading: store) }
        #expect(throws: MerkleTree.OutOfRange.self) { try MerkleTree.consistencyProof(from: 5, to: 4, reading: store) }
        #expect(try MerkleTree.consistencyProof(from: 5, to: 5, reading: store).isEmpty)
        #expect(throws: MerkleTree.OutOfRange.self) { try MerkleTree.completedSubtrees(appending: .empty, at: .max, reading: store) }
        // A proof with a hash too many, or none where one is due, does not verify.
        let root = try MerkleTree.root(size: 5, reading: store)
        let path = try MerkleTree.inclusionProof(index: 2, size: 5, reading: store)
        #expect(MerkleProofVerification.inclusion(leaf: store.leaves[2], index: 2, size: 5, path: path, root: root))
        #expect(!MerkleProofVerification.inclusion(leaf: store.leaves[2], index: 2, size: 5, path: path + [root], root: root))
        let old = try MerkleTree.root(size: 3, reading: store)
        #expect(!MerkleProofVerification.consistency(oldSize: 3, oldRoot: old, size: 5, root: root, proof: []))
        #expect(!MerkleProofVerification.consistency(oldSize: 5, oldRoot: root, size: 5, root: root, proof: [root]))
    }

    /// Sizes near 2^63 and 2^64: the proofs read only subtrees inside the tree, and verify.
    /// Every leaf is the same, so every subtree of a level has one hash, which a store can give
    /// for any of them without holding them.
    @Test func proofsOfHugeTreesReadOnlyTheirSubtreesAndVerify() throws {
        struct AllAlike: MerkleHashReader {
            let size: UInt64
            let levels: [MerkleHash]
            init(size: UInt64) {
                self.size = size
                var levels = [MerkleHash.leaf([7])]
                for _ in 1..<64 { levels.append(.node(levels.last!, levels.last!)) }
                self.levels = levels
            }
            func hash(level: Int, index: UInt64) throws -> MerkleHash {
                // Inside the tree: the subtree's last leaf is below its size.
                guard level < 64, index < (size >> UInt64(level)) else { throw TestFailure("subtree \(level)/\(index) is outside a tree of \(size)") }
                return levels[level]
            }
        }
        for size in [(UInt64(1) << 63) - 1, 1 << 63, (1 << 63) + 1, .max - 1, .max] {
            let store = AllAlike(size: size)
            let root = try MerkleTree.root(size: size, reading: store)
            for index in [0, size / 3, size - 2, size - 1] {
                let proof = try MerkleTree.inclusionProof(index: index, size: size, reading: store)
                #expect(MerkleProofVerification.inclusion(leaf: store.levels[0], index: index, size: size, path: proof, root: root), "\(index) of \(size)")
            }
            for old in [1, size / 2 + 1, size - 1] {
                let proof = try MerkleTree.consistencyProof(from: old, to: size, reading: store)
                let oldRoot = try MerkleTree.root(size: old, reading: store)
                #expect(MerkleProofVerification.consistency(oldSize: old, oldRoot: oldRoot, size: size, root: root, proof: proof), "\(old) to \(size)")
            }
        }
    }
}
