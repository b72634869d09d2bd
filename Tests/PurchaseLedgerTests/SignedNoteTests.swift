import Foundation
import Testing
@testable import PurchaseLedger

/// Signed checkpoints (issue 44, its first part): keys, notes and checkpoints in the forms of
/// C2SP's signed-note and tlog-checkpoint, as Go's `golang.org/x/mod/sumdb/note` writes and
/// reads them. The keys, text and signatures below are that package's test data (note_test.go):
/// a note this code signs is byte for byte the one Go signs, and Go's notes open here.
struct SignedNoteTests {
    static let signerKey = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
    static let verifierKey = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
    static let otherVerifierKey = "EnochRoot+af0cfe78+ATtqJ7zOtqQtYqOo0CpvDXNlMhV3HeJDpjrASKGLWdop"
    static let text = "If you think cryptography is the answer to your problem,\nthen you don't know what your problem is.\n"
    static let peterSignature = "\u{2014} PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n"
    static let enochSignature = "\u{2014} EnochRoot rwz+eBzmZa0SO3NbfRGzPCpDckykFXSdeX+MNtCOXm2/5n2tiOHp+vAF1aGrQ5ovTG01oOTGwnWLox33WWd1RvMc+QQ=\n"

    @Test func aNoteSignedHereIsGosNoteByteForByte() throws {
        let signer = try NoteSigner(text: Self.signerKey)
        #expect(signer.name == "PeterNeumann" && signer.keyHash == 0xc74f20a3)
        #expect(signer.text == Self.signerKey)
        #expect(signer.verifierKey == Self.verifierKey)
        #expect(try SignedNote.sign(Self.text, with: signer) == Self.text + "\n" + Self.peterSignature)
    }

    @Test func gosNotesOpenWithTheRightKeyOnly() throws {
        let peter = try NoteVerifier(text: Self.verifierKey)
        let enoch = try NoteVerifier(text: Self.otherVerifierKey)
        let note = Self.text + "\n" + Self.peterSignature + Self.enochSignature
        #expect(try SignedNote.open(note, verifier: peter) == Self.text)
        #expect(try SignedNote.open(note, verifier: enoch) == Self.text)
        #expect(throws: NoteError(.unknownKey, "no signature by EnochRoot+af0cfe78")) {
            try SignedNote.open(Self.text + "\n" + Self.peterSignature, verifier: enoch)
        }
        // A signature changed, the text changed: refused.
        var bad = Array(Self.peterSignature)
        bad[40] = bad[40] == "A" ? "B" : "A"
        #expect { try SignedNote.open(Self.text + "\n" + String(bad), verifier: peter) } throws: { ($0 as? NoteError)?.code == .invalidSignature }
        #expect { try SignedNote.open(Self.text.replacingFirst("problem", with: "problems") + "\n" + Self.peterSignature, verifier: peter) } throws: {
            ($0 as? NoteError)?.code == .invalidSignature
        }
        // Not notes.
        for malformed in [
            Self.text, Self.text + "\n", Self.text + "\n" + Self.peterSignature.dropLast(), "\u{01}" + Self.text + "\n" + Self.peterSignature,
            Self.text + "\n" + "\u{2014} Bad Name x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n",
            Self.text + "\n" + Self.peterSignature + "Unexpected line.\n",
            Self.text + "\n" + String(repeating: Self.peterSignature, count: 101),
        ] {
            #expect("\(malformed)") { try SignedNote.open(String(malformed), verifier: peter) } throws: { ($0 as? NoteError)?.code == .malformedNote }
        }
    }

    /// Where Go's `note.Open` accepts, this does, and where it refuses, this does (a review of
    /// this code against note.go found each of these).
    @Test func whatGoOpensOpensAndWhatItRefusesIsRefused() throws {
        let peter = try NoteVerifier(text: Self.verifierKey)
        // A repeat of a signer's line is skipped, even a bogus one after the good one.
        let bogus = "\u{2014} PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAQ=\n"
        #expect(try SignedNote.open(Self.text + "\n" + Self.peterSignature + bogus, verifier: peter) == Self.text)
        #expect(try SignedNote.open(Self.text + "\n" + String(repeating: Self.peterSignature, count: 100), verifier: peter) == Self.text)
        // The unused bits of base64's last character are ignored, as Go's decoder ignores them.
        let sameBytes = Self.peterSignature.replacingFirst("JnAM=", with: "JnAN=")
        #expect(sameBytes != Self.peterSignature)
        #expect(try SignedNote.open(Self.text + "\n" + sameBytes, verifier: peter) == Self.text)
        // A name is its bytes: "e" and a combining accent is not "é".
        let accented = try NoteSigner.generate(name: "caf\u{E9}")
        let note = try SignedNote.sign(Self.text, with: accented)
        let decomposed = note.replacingFirst("caf\u{E9} ", with: "cafe\u{301} ")
        #expect(Array(decomposed.utf8) != Array(note.utf8))
        #expect { try SignedNote.open(decomposed, verifier: try NoteVerifier(text: accented.verifierKey)) } throws: {
            ($0 as? NoteError)?.code == .unknownKey
        }
        // Only characters below U+0020 but the newline are refused in a text; DEL and C1 are not.
        let unusual = "DEL \u{7F} and NEL \u{85}\n"
        #expect(try SignedNote.open(try SignedNote.sign(unusual, with: accented), verifier: try NoteVerifier(text: accented.verifierKey)) == unusual)
        #expect { try SignedNote.sign("tab\there\n", with: accented) } throws: { ($0 as? NoteError)?.code == .malformedNote }
        // A key's hash in capitals is read, as Go reads it.
        #expect(try NoteVerifier(text: "PeterNeumann+C74F20A3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW").keyHash == 0xc74f20a3)
        // Bytes that are not UTF-8 are no note.
        #expect { try SignedNote.open(bytes: Array((Self.text + "\n" + Self.peterSignature).utf8) + [0xFF], verifier: peter) } throws: {
            ($0 as? NoteError)?.code == .malformedNote
        }
    }

    static func read(_ signer: Bool, _ text: String) throws {
        if signer { _ = try NoteSigner(text: text) } else { _ = try NoteVerifier(text: text) }
    }

    @Test func keysAreReadOnlyWhole() throws {
        for key in [Self.verifierKey, Self.otherVerifierKey] { _ = try NoteVerifier(text: key) }
        // Every shorter piece and every one-character change of a key is refused.
        for key in [Self.verifierKey, Self.signerKey] {
            let characters = Array(key)
            for start in 0..<characters.count {
                for end in (start + 1)...characters.count where !(start == 0 && end == characters.count) {
                    let piece = String(characters[start..<end])
                    #expect(throws: NoteError.self) { try Self.read(key == Self.signerKey, piece) }
                }
            }
            for index in characters.indices {
                var changed = characters
                changed[index] = Character(Unicode.Scalar(changed[index].unicodeScalars.first!.value + 1)!)
                #expect(throws: NoteError.self) { try Self.read(key == Self.signerKey, String(changed)) }
            }
        }
        // A key made here opens what it signs; another key's verifier does not.
        let made = try NoteSigner.generate(name: "ledger.example.com/purchases")
        let again = try NoteSigner(text: made.text)
        let note = try SignedNote.sign("ledger.example.com/purchases\n3\n\(MerkleHash.empty.base64)\n", with: again)
        #expect(try SignedNote.open(note, verifier: try NoteVerifier(text: made.verifierKey)).hasPrefix("ledger.example.com/purchases\n3\n"))
        #expect(throws: NoteError.self) { try SignedNote.open(note, verifier: try NoteVerifier(text: Self.verifierKey)) }
    }

    @Test func aCheckpointIsItsThreeLines() throws {
        let root = MerkleHash.leaf([1, 2, 3])
        let checkpoint = try Checkpoint(origin: "ledger.example.com/purchases", size: 1_000_000, root: root)
        #expect(checkpoint.text == "ledger.example.com/purchases\n1000000\n\(root.base64)\n")
        #expect(try Checkpoint(text: checkpoint.text) == checkpoint)
        #expect(try Checkpoint(text: checkpoint.text + "an extension line\n") == checkpoint)
        for malformed in [
            "origin\n01\n\(root.base64)\n", "origin\n-1\n\(root.base64)\n", "origin\n1\n\(root.base64)", "\n1\n\(root.base64)\n",
            "origin\n1\n\(root.base64.dropLast())\n", "origin\n1\n\(MerkleHash.empty.base64.replacingFirst("=", with: ""))\n",
            "origin\n1\n\(root.base64)\n\nan extension after an empty line\n",
        ] {
            #expect("\(malformed)") { try Checkpoint(text: malformed) } throws: { ($0 as? NoteError)?.code == .malformedCheckpoint }
        }
    }

    @Test func base64IsStandardPaddedAndCanonical() {
        for count in 0..<40 {
            let bytes = (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
            let text = Base64.encode(bytes)
            #expect(text.utf8.count % 4 == 0)
            #expect(Base64.decode(text) == bytes)
        }
        #expect(Base64.encode(Array("foobar".utf8)) == "Zm9vYmFy" && Base64.encode(Array("fo".utf8)) == "Zm8=")
        for bad in ["Zm8", "Zm8==", "Zg=", "Z===", "Zm-v", "Zm_v", "Zm8=Zm8="] { #expect(Base64.decode(bad) == nil, "\(bad)") }
        // "Zm9=" is "fo" with an unused bit set: read as Go reads it, refused where canonical.
        #expect(Base64.decode("Zm9=") == Array("fo".utf8))
        #expect(Base64.decode("Zm9=", canonical: true) == nil)
    }
}

extension String {
    func replacingFirst(_ target: String, with replacement: String) -> String {
        guard let range = range(of: target) else { return self }
        return replacingCharacters(in: range, with: replacement)
    }
}
