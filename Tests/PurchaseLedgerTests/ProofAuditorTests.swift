import Foundation
import LedgerTestSupport
import PurchaseLedger
import Testing

/// What the ledger's `Proof/` computes is what an auditor with only RFC 9162 and C2SP's texts
/// accepts: `Scripts/verify_checkpoint.py`, written from them with Python's hashlib and the
/// `cryptography` package, checks a signed checkpoint, its tree's root from the leaves, and
/// inclusion and consistency proofs, and refuses each with any one byte changed.
struct ProofAuditorTests {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Scripts/verify_checkpoint.py").path

    /// The stored subtrees in memory.
    final class Store: MerkleHashReader {
        var hashes: [MerkleTree.Subtree: MerkleHash] = [:]

        func hash(level: Int, index: UInt64) throws -> MerkleHash {
            guard let hash = hashes[MerkleTree.Subtree(level: level, index: index)] else { throw TestFailure("no stored subtree \(level)/\(index)") }
            return hash
        }
    }

    @Test func anAuditorWithOnlyTheRFCAndC2SPAcceptsTheCheckpointAndItsProofs() async throws {
        guard let python = await python(importing: "cryptography") else {
            try #require(!pythonPackagesAreRequired, "cryptography is not installed (tools/test installs it)")
            return
        }
        let store = Store()
        let leaves = (0..<13).map { Array("{\"id\":\"e\($0)\",\"account\":\"forgotten/\($0 % 3)\"}".utf8) }
        for (index, leaf) in leaves.enumerated() {
            for (subtree, hash) in try MerkleTree.completedSubtrees(appending: .leaf(leaf), at: UInt64(index), reading: store) {
                store.hashes[subtree] = hash
            }
        }
        let size = UInt64(leaves.count)
        let signer = try NoteSigner.generate(name: "ledger.example.com/purchases")
        let checkpoint = try Checkpoint(origin: signer.name, size: size, root: try MerkleTree.root(size: size, reading: store))
        let note = try SignedNote.sign(checkpoint.text, with: signer)
        var inclusion: [[String: Any]] = []
        for (index, treeSize) in [(0, 13), (12, 13), (5, 13), (4, 8), (6, 7), (0, 1)] {
            let hashes = try MerkleTree.inclusionProof(index: UInt64(index), size: UInt64(treeSize), reading: store)
            inclusion.append(["leafIndex": index, "treeSize": treeSize, "hashes": hashes.map(\.base64)])
        }
        var consistency: [[String: Any]] = []
        for (from, treeSize) in [(1, 13), (4, 13), (7, 13), (8, 13), (12, 13), (3, 7), (13, 13)] {
            let hashes = try MerkleTree.consistencyProof(from: UInt64(from), to: UInt64(treeSize), reading: store)
            consistency.append(["fromSize": from, "treeSize": treeSize, "hashes": hashes.map(\.base64)])
        }
        let bundle: [String: Any] = [
            "verifierKey": signer.verifierKey, "note": note, "leaves": leaves.map { Data($0).base64EncodedString() },
            "inclusion": inclusion, "consistency": consistency,
        ]
        try await withTemporaryDirectory { directory in
            let path = directory + "/bundle.json"
            try JSONSerialization.data(withJSONObject: bundle).write(to: URL(fileURLWithPath: path))
            let run = try runCommand(URL(fileURLWithPath: python), [Self.script, path])
            #expect(run.status == 0, "\(run.text)\(run.error)")
            #expect(run.text.hasSuffix("ok\n"), "\(run.text)")
        }
    }
}
