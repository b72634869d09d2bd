import Foundation
import LedgerTestSupport
import PurchaseLedger
import Testing

/// `ledger checkpoint-key generate` (issue 44): a signer key for its owner alone, never over
/// another file, and its verifier key on standard output, in the text form of Go's
/// `sumdb/note`.
struct CheckpointKeyToolTests {
    let tool = LedgerToolTests()

    @Test func aKeyIsWrittenForItsOwnerAloneAndItsVerifierPrinted() throws {
        try tool.withDirectory { directory in
            let path = directory.appendingPathComponent("checkpoint.key").path
            let made = try tool.ledger("checkpoint-key", "generate", "--name", "ledger.example.com/purchases", "--out", path)
            #expect(made.status == 0, "\(made.error)")
            let verifierKey = made.text.trimmingCharacters(in: .newlines)
            #expect(made.text == verifierKey + "\n" && verifierKey.hasPrefix("ledger.example.com/purchases+"))
            let mode = try #require(try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int)
            #expect(mode == 0o600)
            let text = try String(contentsOfFile: path, encoding: .utf8)
            #expect(text.hasPrefix("PRIVATE+KEY+ledger.example.com/purchases+") && text.hasSuffix("\n"))
            // The two halves belong together: what the key signs, the printed verifier opens.
            let signer = try NoteSigner(text: text)
            #expect(signer.verifierKey == verifierKey)
            let note = try SignedNote.sign("ledger.example.com/purchases\n0\n\(MerkleHash.empty.base64)\n", with: signer)
            #expect(try SignedNote.open(note, verifier: try NoteVerifier(text: verifierKey)).hasSuffix("\(MerkleHash.empty.base64)\n"))

            // A key is never overwritten; a name with a space is bad usage.
            let again = try tool.ledger("checkpoint-key", "generate", "--name", "other", "--out", path)
            #expect(again.status == 2 && again.error.contains("never overwritten"), "\(again.error)")
            #expect(try String(contentsOfFile: path, encoding: .utf8) == text)
            let other = directory.appendingPathComponent("json.key").path
            let json = try tool.ledger("checkpoint-key", "generate", "--json", "--name", "other", "--out", other)
            let object = try #require(try JSONSerialization.jsonObject(with: json.output) as? [String: String])
            #expect(object["name"] == "other" && object["keyFile"] == other)
            #expect(try NoteSigner(text: String(contentsOfFile: other, encoding: .utf8)).verifierKey == object["verifierKey"])
            let badName = try tool.ledger("checkpoint-key", "generate", "--name", "a b", "--out", directory.appendingPathComponent("other.key").path)
            #expect(badName.status == 64, "\(badName.error)")
            #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("other.key").path))
        }
    }
}
