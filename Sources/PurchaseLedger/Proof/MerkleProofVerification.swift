/// Checks proofs as an auditor does, from RFC 9162's verification algorithms alone (§2.1.3.2
/// and §2.1.4.2): nothing here reads the tree, so what a server sends cannot bend it.
public enum MerkleProofVerification {
    /// Whether `path` proves the leaf with hash `leaf` at `index` in the tree of `size` leaves
    /// whose root is `root`.
    public static func inclusion(leaf: MerkleHash, index: UInt64, size: UInt64, path: [MerkleHash], root: MerkleHash) -> Bool {
        guard index < size else { return false }
        var (fn, sn, r) = (index, size - 1, leaf)
        for p in path {
            guard sn != 0 else { return false }
            if fn & 1 == 1 || fn == sn {
                r = .node(p, r)
                if fn & 1 == 0 {
                    while fn & 1 == 0 && fn != 0 {
                        fn >>= 1
                        sn >>= 1
                    }
                }
            } else {
                r = .node(r, p)
            }
            fn >>= 1
            sn >>= 1
        }
        return sn == 0 && r == root
    }

    /// Whether `proof` shows the tree of `oldSize` leaves with root `oldRoot` to be a prefix of
    /// the tree of `size` leaves with root `root` (0 < oldSize ≤ size).
    public static func consistency(oldSize: UInt64, oldRoot: MerkleHash, size: UInt64, root: MerkleHash, proof: [MerkleHash]) -> Bool {
        guard oldSize > 0, oldSize <= size else { return false }
        if oldSize == size { return proof.isEmpty && oldRoot == root }
        guard !proof.isEmpty else { return false }
        var path = proof
        if oldSize & (oldSize - 1) == 0 { path.insert(oldRoot, at: 0) }
        var (fn, sn) = (oldSize - 1, size - 1)
        while fn & 1 == 1 {
            fn >>= 1
            sn >>= 1
        }
        var (fr, sr) = (path[0], path[0])
        for c in path.dropFirst() {
            guard sn != 0 else { return false }
            if fn & 1 == 1 || fn == sn {
                fr = .node(c, fr)
                sr = .node(c, sr)
                if fn & 1 == 0 {
                    while fn & 1 == 0 && fn != 0 {
                        fn >>= 1
                        sn >>= 1
                    }
                }
            } else {
                sr = .node(sr, c)
            }
            fn >>= 1
            sn >>= 1
        }
        return fr == oldRoot && sr == root && sn == 0
    }
}
