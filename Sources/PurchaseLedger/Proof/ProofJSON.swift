/// The JSON shapes of proofs and checkpoints, the same from `ledger prove`, `ledger
/// checkpoints --json` and the server's routes (docs/FORMAT.md, "The proof tree").
extension InclusionProof {
    /// `{"leafIndex": P-1, "treeSize": N, "hashes": [...]}`.
    package var json: String {
        proofJSON(("leafIndex", leafIndex), treeSize: treeSize, hashes: hashes)
    }
}

extension ConsistencyProof {
    /// `{"fromSize": M, "treeSize": N, "hashes": [...]}`.
    package var json: String {
        proofJSON(("fromSize", fromSize), treeSize: treeSize, hashes: hashes)
    }
}

/// A proof's object: what it starts from, the tree's size, and its hashes.
private func proofJSON(_ from: (name: String, value: UInt64), treeSize: UInt64, hashes: [MerkleHash]) -> String {
    var writer = JSONWriter(spaced: true)
    writer.beginObject()
    writer.member(from.name, Int64(clamping: from.value))
    writer.member("treeSize", Int64(clamping: treeSize))
    writer.hashes(hashes)
    writer.endObject()
    return writer.string
}

extension StoredCheckpoint {
    /// `[{"size", "signedAt", "note"}, ...]`.
    package static func json(_ checkpoints: [StoredCheckpoint]) -> String {
        var writer = JSONWriter(spaced: true)
        writer.beginArray()
        for stored in checkpoints {
            writer.beginObject()
            writer.member("size", Int64(clamping: stored.size))
            writer.member("signedAt", stored.signedAt)
            writer.member("note", stored.note)
            writer.endObject()
        }
        writer.endArray()
        return writer.string
    }
}

extension JSONWriter {
    /// `"hashes": [...]`, each in standard padded base64.
    mutating func hashes(_ hashes: [MerkleHash]) {
        key("hashes")
        beginArray()
        for hash in hashes { string(hash.base64) }
        endArray()
    }
}
