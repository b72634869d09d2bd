/// The JSON shapes of proofs and checkpoints, the same from `ledger prove`, `ledger
/// checkpoints --json` and the server's routes (docs/FORMAT.md, "The proof tree").
extension InclusionProof {
    /// `{"leafIndex": P-1, "treeSize": N, "hashes": [...]}`.
    package var json: String {
        var writer = JSONWriter(spaced: true)
        writer.beginObject()
        writer.member("leafIndex", Int64(clamping: leafIndex))
        writer.member("treeSize", Int64(clamping: treeSize))
        writer.hashes(hashes)
        writer.endObject()
        return writer.string
    }
}

extension ConsistencyProof {
    /// `{"fromSize": M, "treeSize": N, "hashes": [...]}`.
    package var json: String {
        var writer = JSONWriter(spaced: true)
        writer.beginObject()
        writer.member("fromSize", Int64(clamping: fromSize))
        writer.member("treeSize", Int64(clamping: treeSize))
        writer.hashes(hashes)
        writer.endObject()
        return writer.string
    }
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
