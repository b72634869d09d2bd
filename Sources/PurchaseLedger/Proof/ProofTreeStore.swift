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
    private let reader: any LedgerStorageReader
    private var tiles: [Int: [UInt64: [UInt8]]] = [:]
    private struct Tile: Hashable {
        var level: Int
        var number: UInt64
    }

    private var changed: Set<Tile> = []

    init(_ reader: any LedgerStorageReader) {
        self.reader = reader
    }

    private func tile(level: Int, tile: UInt64) throws -> [UInt8] {
        if let bytes = tiles[level]?[tile] { return bytes }
        let key = ProofTreeStore.tileKey(level: level, tile: tile)
        let bytes = try reader.feedState(key) ?? []
        guard bytes.count % 32 == 0, bytes.count <= Int(ProofTreeStore.tileWidth) * 32 else {
            throw StorageError(.damaged, "the proof state \(key) holds \(bytes.count) bytes, not a whole number of hashes")
        }
        tiles[level, default: [:]][tile] = bytes
        return bytes
    }

    func hash(level: Int, index: UInt64) throws -> MerkleHash {
        let (number, slot) = index.quotientAndRemainder(dividingBy: ProofTreeStore.tileWidth)
        let bytes = try tile(level: level, tile: number)
        let start = Int(slot) * 32
        guard start + 32 <= bytes.count, let hash = MerkleHash(bytes: Array(bytes[start..<start + 32])) else {
            throw StorageError(.damaged, "the proof tree lacks the hash of subtree \(index) at level \(level)")
        }
        return hash
    }

    /// Adds the hash of a subtree just completed: the next one of its level.
    func append(_ hash: MerkleHash, level: Int, index: UInt64) throws {
        let (number, slot) = index.quotientAndRemainder(dividingBy: ProofTreeStore.tileWidth)
        guard try tile(level: level, tile: number).count == Int(slot) * 32 else {
            throw StorageError(.damaged, "the proof tree's level \(level) does not end before subtree \(index)")
        }
        // In place: the tile is not copied for each hash added to it.
        tiles[level, default: [:]][number, default: []].append(contentsOf: hash.bytes)
        changed.insert(Tile(level: level, number: number))
    }

    /// Writes the tiles `append` changed.
    func writeChanged(_ writer: any LedgerStorageWriter) throws {
        for tile in changed {
            try writer.setFeedState(ProofTreeStore.tileKey(level: tile.level, tile: tile.number), tiles[tile.level]?[tile.number])
        }
        changed = []
    }
}
