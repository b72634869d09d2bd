import Foundation
import LedgerTestSupport
import PurchaseLedger
import Testing

/// `ledger checkpoint`, `checkpoints`, `prove`, `verify --checkpoint` and `export
/// --as-forgotten` (docs/FORMAT.md, "The proof tree"), run as an auditor would: what they
/// print, and their exit statuses, on a ledger and on a copy of its directory rolled back
/// below a checkpoint.
struct ProofToolTests {
    let tool = LedgerToolTests()
    static let samples = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../Samples/word-game").standardizedFileURL

    @Test(arguments: LedgerToolTests.backends)
    func checkpointsAndProofsFromTheCommandLine(on backend: String) throws {
        try tool.withDirectory { directory in try tool.withLedgerLocation(backend, in: directory) { ledger in
            let key = directory.appendingPathComponent("checkpoint.key").path
            let verifierKey = try tool.ledger("checkpoint-key", "generate", "--name", "ledger.example.com/purchases", "--out", key)
                .text.trimmingCharacters(in: .newlines)
            let events = try String(contentsOfFile: Self.samples.appendingPathComponent("day.jsonl").path, encoding: .utf8)
                .split(separator: "\n").map(String.init)
            let half = events.count / 2
            let catalog = Self.samples.appendingPathComponent("catalog.json").path
            let imported = try tool.ledger("import", "--catalog", catalog, ledger, "-", input: Data((events.prefix(half).joined(separator: "\n") + "\n").utf8))
            try #require(imported.status == 0, "\(imported.error)")

            let first = try tool.ledger("checkpoint", "--key", key, ledger)
            #expect(first.status == 0, "\(first.error)")
            let note = directory.appendingPathComponent("first.note").path
            try first.output.write(to: URL(fileURLWithPath: note))
            // The day holds lines the rules refuse: sizes are counted in positions, not lines.
            let firstLines = first.text.split(separator: "\n")
            #expect(firstLines.first == "ledger.example.com/purchases")
            let firstSize = try #require(firstLines.count > 1 ? Int(firstLines[1]) : nil)
            #expect(firstSize > 5)
            // A copy of the directory now (LMDB): the log as it was at the first checkpoint.
            let rolledBack = directory.appendingPathComponent("rolled-back").path
            if backend == "lmdb" { try FileManager.default.copyItem(atPath: ledger, toPath: rolledBack) }

            let rest = try tool.ledger("import", ledger, "-", input: Data((events.dropFirst(half).joined(separator: "\n") + "\n").utf8))
            try #require(rest.status == 0, "\(rest.error)")
            let second = try tool.ledger("checkpoint", "--json", "--key", key, ledger)
            let object = try #require(try JSONSerialization.jsonObject(with: second.output) as? [String: Any])
            let total = try #require(object["size"] as? Int)
            #expect(total > firstSize)
            let secondNote = directory.appendingPathComponent("second.note").path
            let secondText = try #require(object["note"] as? String)
            try Data(secondText.utf8).write(to: URL(fileURLWithPath: secondNote))
            let listed = try #require(try JSONSerialization.jsonObject(with: try tool.ledger("checkpoints", "--json", ledger).output) as? [[String: Any]])
            #expect(listed.map { $0["size"] as? Int } == [firstSize, total])
            #expect(listed.last?["note"] as? String == object["note"] as? String)

            // Proofs, checked here with the library's verification (the RFC's algorithms).
            let rootText = try #require(object["root"] as? String)
            let root = try #require(MerkleHash(base64: rootText))
            let leaves = try tool.ledger("export", "--as-forgotten", ledger).text.split(separator: "\n").map { Array($0.utf8) }
            #expect(leaves.count == total)
            let proof = try #require(try JSONSerialization.jsonObject(with: try tool.ledger("prove", "--position", "3", ledger).output) as? [String: Any])
            #expect(proof["leafIndex"] as? Int == 2 && proof["treeSize"] as? Int == total)
            let path = try #require(proof["hashes"] as? [String]).compactMap(MerkleHash.init(base64:))
            #expect(MerkleProofVerification.inclusion(leaf: .leaf(leaves[2]), index: 2, size: UInt64(total), path: path, root: root))
            let consistency = try #require(try JSONSerialization.jsonObject(with: try tool.ledger("prove", "--from", "\(firstSize)", ledger).output) as? [String: Any])
            #expect(consistency["fromSize"] as? Int == firstSize && (consistency["hashes"] as? [String])?.isEmpty == false)
            // A proof-carrying replay of one account, at the newest checkpoint; none of a stranger.
            let proven = try tool.ledger("replay", "--account", "ana", "--proof", ledger)
            #expect(proven.status == 0, "\(proven.error)")
            let provenObject = try #require(try JSONSerialization.jsonObject(with: proven.output) as? [String: Any])
            #expect(provenObject["position"] as? Int == total)
            let anaProof = ((provenObject["accounts"] as? [String: Any])?["ana"] as? [String: Any])?["proof"] as? [String: Any]
            #expect((anaProof?["events"] as? [[String: Any]])?.isEmpty == false)
            #expect(try tool.ledger("replay", "--account", "nobody", "--proof", ledger).status == 1)
            #expect(try tool.ledger("replay", "--proof", ledger).status == 64)
            if let python = ProcessInfo.processInfo.environment["PURCHASE_LEDGER_APPLE_VERIFIER_PYTHON"] {
                let answer = directory.appendingPathComponent("ana.json").path
                try proven.output.write(to: URL(fileURLWithPath: answer))
                let script = Self.samples.appendingPathComponent("../../docs/verify_account_proof.py").standardizedFileURL.path
                let checked = try tool.run("/usr/bin/env", [python, script, answer, verifierKey, "ana"])
                #expect(checked.status == 0 && checked.text.hasPrefix("ok:"), "\(checked.text)\(checked.error)")
            }

            // Out of range: exit 2, saying the range.
            let beyond = try tool.ledger("prove", "--position", "\(total + 1)", ledger)
            #expect(beyond.status == 2 && beyond.error.contains("from 1 to \(total)"), "\(beyond.error)")
            #expect(try tool.ledger("prove", "--from", "0", ledger).status == 2)

            // Both checkpoints verify against the ledger; a changed note or another key does not.
            for file in [note, secondNote] {
                let verified = try tool.ledger("verify", "--checkpoint", file, "--verifier-key", verifierKey, ledger)
                #expect(verified.status == 0 && verified.text.contains("checkpoint: verified"), "\(verified.text)\(verified.error)")
            }
            var flipped = try Data(contentsOf: URL(fileURLWithPath: secondNote))
            flipped[flipped.count / 2] ^= 1
            let flippedNote = directory.appendingPathComponent("flipped.note").path
            try flipped.write(to: URL(fileURLWithPath: flippedNote))
            let refused = try tool.ledger("verify", "-j", "--checkpoint", flippedNote, "--verifier-key", verifierKey, ledger)
            #expect(refused.status == 1, "\(refused.text)")
            let answer = try #require(try JSONSerialization.jsonObject(with: refused.output) as? [String: Any])
            #expect((answer["checkpoint"] as? [String: Any])?["verified"] as? Bool == false)
            let stranger = try NoteSigner.generate(name: "ledger.example.com/purchases").verifierKey
            #expect(try tool.ledger("verify", "--checkpoint", secondNote, "--verifier-key", stranger, ledger).status == 1)
            #expect(try tool.ledger("verify", "--checkpoint", secondNote, "--verifier-key", "not a key", ledger).status == 2)
            #expect(try tool.ledger("verify", "--checkpoint", secondNote, "--verifier-key", verifierKey, "--origin", "other.example/log", ledger).status == 1)

            // The directory rolled back below the second checkpoint: exit 1; the first still verifies.
            if backend == "lmdb" {
                let below = try tool.ledger("verify", "--checkpoint", secondNote, "--verifier-key", verifierKey, rolledBack)
                #expect(below.status == 1 && below.text.contains("rolled back"), "\(below.text)\(below.error)")
                #expect(try tool.ledger("verify", "--checkpoint", note, "--verifier-key", verifierKey, rolledBack).status == 0)
            }
        } }
    }
}
