/// The log's Merkle tree kept beside it (docs/FORMAT.md, "The proof tree"): the hash of every
/// complete subtree, by level, in tiles of 32 hashes (a tile is 1 KiB, small enough to stay
/// inside a page of LMDB), under `proof/tree/<level>/<tile>`; the number of leaves under
/// `proof/size`. Every root and proof of a size up to it is computed from them.
enum ProofTreeStore {
    static let sizeKey = "proof/size"
    static let tileWidth: UInt64 = 32

    static func tileKey(level: Int, tile: UInt64) -> String {
        "proof/tree/\(level)/\(tile)"
    }

    /// The number of leaves the stored tree holds.
    static func size(_ reader: any LedgerStorageReader) throws -> UInt64 {
        guard let bytes = try reader.feedState(sizeKey) else { return 0 }
        guard bytes.count == 8 else { throw StorageError(.damaged, "the proof state \(sizeKey) holds \(bytes.count) bytes, not 8") }
        return bytes.reduce(0) { $0 << 8 | UInt64($1) }
    }

    static func sizeBytes(_ size: UInt64) -> [UInt8] {
        withUnsafeBytes(of: size.bigEndian) { Array($0) }
    }
}

/// The stored tree's hashes as one read or write sees them, each tile read once; a tree being
/// extended (`ProofTreeExtension`) adds hashes here and writes the tiles it changed.
final class StoredMerkleHashes: MerkleHashReader {
    /// Nil when the tiles were read up front (`init(rightEdgeAt:reader:)`).
    private let reader: (any LedgerStorageReader)?
    /// Without a reader: the size whose right edge was read.
    private let edge: UInt64
    private struct Tile: Hashable {
        var level: Int
        var number: UInt64
    }

    /// Each level's newest tile seen: where every leaf's hashes are appended and its left
    /// siblings read, so that a leaf costs no hashing of keys.
    private struct OpenTile {
        var number: UInt64
        var bytes: [UInt8]
        var changed: Bool
    }

    private var open: [OpenTile?] = []
    /// The other tiles read (for roots and proofs), and the changed ones a level moved past.
    private var tiles: [Tile: [UInt8]] = [:]
    private var changed: Set<Tile> = []

    init(_ reader: any LedgerStorageReader) {
        self.reader = reader
        edge = 0
    }

    /// Everything appending leaves after `size` reads, read now in one query: each level's tile
    /// holding the tree's right edge at that size (a left sibling is always in its right
    /// sibling's tile); the tiles after them are new. What follows needs no transaction.
    init(rightEdgeAt size: UInt64, reader: any LedgerStorageReader) throws {
        self.reader = nil
        edge = size
        var edgeTiles: [(tile: Tile, key: String)] = []
        var level = 0
        while level < UInt64.bitWidth, size >> level > 0 {
            let tile = Tile(level: level, number: (size >> level) / ProofTreeStore.tileWidth)
            edgeTiles.append((tile, ProofTreeStore.tileKey(level: level, tile: tile.number)))
            level += 1
        }
        let stored = try reader.feedStates(keys: edgeTiles.map(\.key))
        for (tile, key) in edgeTiles { tiles[tile] = try Self.checked(stored[key] ?? [], key: key) }
    }

    private static func checked(_ bytes: [UInt8], key: String) throws -> [UInt8] {
        guard bytes.count % 32 == 0, bytes.count <= Int(ProofTreeStore.tileWidth) * 32 else {
            throw StorageError(.damaged, "the proof state \(key) holds \(bytes.count) bytes, not a whole number of hashes")
        }
        return bytes
    }

    private func read(_ tile: Tile) throws -> [UInt8] {
        if let bytes = tiles[tile] { return bytes }
        let key = ProofTreeStore.tileKey(level: tile.level, tile: tile.number)
        guard let reader else {
            // Read up front: a tile after a level's right edge (or on a level the tree did
            // not reach) is new; one before it is never needed to append.
            let edgeTile = (edge >> tile.level) / ProofTreeStore.tileWidth
            guard tile.number > edgeTile || edge >> tile.level == 0 else {
                throw StorageError(.damaged, "the proof tree's tile \(key) is before the right edge read")
            }
            tiles[tile] = []
            return []
        }
        let bytes = try Self.checked(try reader.feedState(key) ?? [], key: key)
        tiles[tile] = bytes
        return bytes
    }

    func hash(level: Int, index: UInt64) throws -> MerkleHash {
        let (number, slot) = index.quotientAndRemainder(dividingBy: ProofTreeStore.tileWidth)
        let start = Int(slot) * 32
        func hash(in bytes: [UInt8]) -> MerkleHash? {
            guard start + 32 <= bytes.count else { return nil }
            return bytes.withUnsafeBytes { MerkleHash(raw: UnsafeRawBufferPointer(rebasing: $0[start..<start + 32])) }
        }
        let found = if level < open.count, let tile = open[level], tile.number == number {
            hash(in: tile.bytes)
        } else {
            hash(in: try read(Tile(level: level, number: number)))
        }
        guard let found else { throw StorageError(.damaged, "the proof tree lacks the hash of subtree \(index) at level \(level)") }
        return found
    }

    /// Adds the hash of a subtree just completed: the next one of its level.
    func append(_ hash: MerkleHash, level: Int, index: UInt64) throws {
        let (number, slot) = index.quotientAndRemainder(dividingBy: ProofTreeStore.tileWidth)
        while open.count <= level { open.append(nil) }
        if open[level]?.number != number {
            if let previous = open[level], previous.changed {
                let tile = Tile(level: level, number: previous.number)
                tiles[tile] = previous.bytes
                changed.insert(tile)
            }
            let tile = Tile(level: level, number: number)
            // A tile changed and moved past, opened again, is written from here only.
            open[level] = OpenTile(number: number, bytes: try read(tile), changed: changed.remove(tile) != nil)
            tiles[tile] = nil
        }
        guard open[level]?.bytes.count == Int(slot) * 32 else {
            throw StorageError(.damaged, "the proof tree's level \(level) does not end before subtree \(index)")
        }
        // In place: the tile is not copied for each hash added to it.
        hash.withUnsafeBytes { open[level]?.bytes.append(contentsOf: $0) }
        open[level]?.changed = true
    }

    /// The tiles `append` changed, whole, under their keys.
    func changedTiles() -> [(key: String, bytes: [UInt8])] {
        var result: [(key: String, bytes: [UInt8])] = []
        for tile in changed {
            guard let bytes = tiles[tile] else { continue }
            result.append((ProofTreeStore.tileKey(level: tile.level, tile: tile.number), bytes))
        }
        for level in open.indices where open[level]?.changed == true {
            guard let tile = open[level] else { continue }
            result.append((ProofTreeStore.tileKey(level: level, tile: tile.number), tile.bytes))
        }
        return result
    }
}
