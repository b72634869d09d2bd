import Crypto

/// A node of the log's Merkle tree (RFC 9162 §2.1.1): SHA-256, 32 bytes, held inline (a tree
/// hashes two nodes a leaf, and none of them allocates).
public struct MerkleHash: Hashable, Sendable, CustomStringConvertible {
    /// Four words, not a `SIMD4`: its 32-byte alignment is more than an async task's frame
    /// promises.
    private var words: (UInt64, UInt64, UInt64, UInt64)

    public static func == (left: MerkleHash, right: MerkleHash) -> Bool {
        left.words == right.words
    }

    public func hash(into hasher: inout Hasher) {
        withUnsafeBytes { hasher.combine(bytes: $0) }
    }

    /// The hash's 32 bytes.
    public var bytes: [UInt8] {
        Swift.withUnsafeBytes(of: words) { Array($0) }
    }

    /// Nil unless `bytes` is 32 bytes long.
    public init?(bytes: [UInt8]) {
        guard let hash = bytes.withUnsafeBytes({ MerkleHash(raw: $0) }) else { return nil }
        self = hash
    }

    /// Nil unless `raw` is 32 bytes long.
    init?(raw: UnsafeRawBufferPointer) {
        guard raw.count == 32 else { return nil }
        words = raw.loadUnaligned(as: (UInt64, UInt64, UInt64, UInt64).self)
    }

    private init(digest: SHA256.Digest) {
        words = digest.withUnsafeBytes { $0.loadUnaligned(as: (UInt64, UInt64, UInt64, UInt64).self) }
    }

    /// Calls `body` with the hash's 32 bytes, copying nothing.
    func withUnsafeBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        try Swift.withUnsafeBytes(of: words, body)
    }

    /// The hash of the empty tree: SHA-256 of nothing.
    public static let empty = MerkleHash(digest: SHA256.hash(data: [UInt8]()))

    /// A leaf's hash: SHA-256(0x00 ‖ data).
    public static func leaf<Bytes: Sequence<UInt8>>(_ data: Bytes) -> MerkleHash {
        data.withContiguousStorageIfAvailable { leaf(UnsafeRawBufferPointer($0)) } ?? Array(data).withUnsafeBytes { leaf($0) }
    }

    /// A leaf's hash: SHA-256(0x00 ‖ data).
    static func leaf(_ data: UnsafeRawBufferPointer) -> MerkleHash {
        var hasher = SHA256()
        Swift.withUnsafeBytes(of: UInt8(0x00)) { hasher.update(bufferPointer: $0) }
        hasher.update(bufferPointer: data)
        return MerkleHash(digest: hasher.finalize())
    }

    /// An interior node's hash: SHA-256(0x01 ‖ left ‖ right).
    public static func node(_ left: MerkleHash, _ right: MerkleHash) -> MerkleHash {
        var hasher = SHA256()
        Swift.withUnsafeBytes(of: UInt8(0x01)) { hasher.update(bufferPointer: $0) }
        left.withUnsafeBytes { hasher.update(bufferPointer: $0) }
        right.withUnsafeBytes { hasher.update(bufferPointer: $0) }
        return MerkleHash(digest: hasher.finalize())
    }

    /// Standard padded base64 (RFC 4648 §4), as checkpoints and proofs carry it.
    public var base64: String {
        Base64.encode(bytes)
    }

    /// Nil unless `text` is standard padded base64 of 32 bytes.
    public init?(base64 text: String) {
        guard let bytes = Base64.decode(text) else { return nil }
        self.init(bytes: bytes)
    }

    public var description: String { base64 }
}

/// Where a tree's complete subtrees are kept: the hash of the subtree of `2^level` leaves that
/// starts at leaf `index · 2^level`, for every such subtree whose leaves are all in the tree.
/// Appending leaf n adds its own hash and one for each subtree it completes
/// (`MerkleTree.completedSubtrees`), two per leaf on average; every root and proof of any size
/// up to the tree's is computed from them.
public protocol MerkleHashReader {
    func hash(level: Int, index: UInt64) throws -> MerkleHash
}

/// The RFC 9162 tree over a log of `size` leaves, read from its stored subtrees: roots and
/// proofs for any size up to it, each from O(log² n) stored hashes.
public enum MerkleTree {
    /// Sizes or an index a proof cannot be made for (asked by a client: refused, never trapped).
    public struct OutOfRange: Error, Sendable, Hashable, CustomStringConvertible {
        public let description: String
    }

    /// A subtree of `2^level` leaves from leaf `index · 2^level`.
    public struct Subtree: Hashable, Sendable {
        public let level: Int
        public let index: UInt64

        public init(level: Int, index: UInt64) {
            self.level = level
            self.index = index
        }
    }

    /// The subtrees the leaf at `leafIndex` completes, its own first, each with its hash:
    /// what to store when it is appended, given the stored hashes of the leaves before it.
    public static func completedSubtrees(
        appending leaf: MerkleHash, at leafIndex: UInt64, reading stored: some MerkleHashReader
    ) throws -> [(subtree: Subtree, hash: MerkleHash)] {
        var result: [(subtree: Subtree, hash: MerkleHash)] = []
        try forEachCompletedSubtree(appending: leaf, at: leafIndex, reading: stored) { result.append(($0, $1)) }
        return result
    }

    /// Calls `body` with each subtree the leaf at `leafIndex` completes, its own first, and its
    /// hash (what `completedSubtrees` returns, without an array a leaf).
    static func forEachCompletedSubtree(
        appending leaf: MerkleHash, at leafIndex: UInt64, reading stored: some MerkleHashReader,
        _ body: (Subtree, MerkleHash) throws -> Void
    ) throws {
        guard leafIndex < .max else { throw OutOfRange(description: "a tree holds fewer than 2^64 leaves") }
        var (level, index, hash) = (0, leafIndex, leaf)
        try body(Subtree(level: 0, index: leafIndex), leaf)
        // A right child (odd index) completes its parent, whose left child is stored already.
        while index & 1 == 1 {
            let left = try stored.hash(level: level, index: index - 1)
            hash = MerkleHash.node(left, hash)
            level += 1
            index >>= 1
            try body(Subtree(level: level, index: index), hash)
        }
    }

    /// The root of the tree of the first `size` leaves (MTH, RFC 9162 §2.1.1).
    public static func root(size: UInt64, reading stored: some MerkleHashReader) throws -> MerkleHash {
        guard size > 0 else { return .empty }
        return try rangeHash(0, size, stored)
    }

    /// MTH of the leaves [start, end), where `start` is a multiple of a power of two at least
    /// `end - start` (every range RFC 9162's recursions name is): the complete subtrees that
    /// tile it, largest first, folded from the right, as MTH splits at the largest power of two.
    static func rangeHash(_ start: UInt64, _ end: UInt64, _ stored: some MerkleHashReader) throws -> MerkleHash {
        // Callers pass non-empty ranges only (checked where a client's sizes come in).
        guard start < end else { throw OutOfRange(description: "an empty range of leaves has no subtree") }
        var tiles: [MerkleHash] = []
        var at = start
        while at < end {
            let level = 63 - (end - at).leadingZeroBitCount
            tiles.append(try stored.hash(level: level, index: at >> UInt64(level)))
            at += 1 << UInt64(level)
        }
        var hash = tiles.removeLast()
        while let left = tiles.popLast() { hash = MerkleHash.node(left, hash) }
        return hash
    }

    /// The largest power of two smaller than `n` (n > 1).
    static func split(_ n: UInt64) -> UInt64 {
        1 << UInt64(63 - (n - 1).leadingZeroBitCount)
    }

    /// The inclusion proof of leaf `index` in the tree of `size` leaves (RFC 9162 §2.1.3.1's
    /// PATH), leaf to root.
    public static func inclusionProof(index: UInt64, size: UInt64, reading stored: some MerkleHashReader) throws -> [MerkleHash] {
        guard index < size else { throw OutOfRange(description: "leaf \(index) is not in a tree of \(size) leaves") }
        var path: [MerkleHash] = []
        // PATH(m, D[start:end]), iteratively from the root; the siblings gathered root first.
        var (start, end, m) = (UInt64(0), size, index)
        while end - start > 1 {
            let k = split(end - start)
            if m < k {
                path.append(try rangeHash(start + k, end, stored))
                end = start + k
            } else {
                path.append(try rangeHash(start, start + k, stored))
                start += k
                m -= k
            }
        }
        return path.reversed()
    }

    /// The consistency proof from the tree of `oldSize` leaves to the tree of `size` (RFC 9162
    /// §2.1.4.1's PROOF), 0 < oldSize ≤ size; none when they are equal.
    public static func consistencyProof(from oldSize: UInt64, to size: UInt64, reading stored: some MerkleHashReader) throws -> [MerkleHash] {
        guard 0 < oldSize, oldSize <= size else {
            throw OutOfRange(description: "a consistency proof is from 1 to \(size) leaves to \(size); \(oldSize) is not")
        }
        var proof: [MerkleHash] = []
        // SUBPROOF(m, D[start:end], b), iteratively; the hashes gathered root first.
        var (start, end, m, whole) = (UInt64(0), size, oldSize, true)
        while m != end - start {
            let k = split(end - start)
            if m <= k {
                proof.append(try rangeHash(start + k, end, stored))
                end = start + k
            } else {
                proof.append(try rangeHash(start, start + k, stored))
                start += k
                m -= k
                whole = false
            }
        }
        if !whole { proof.append(try rangeHash(start, end, stored)) }
        return proof.reversed()
    }
}
