import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import LedgerTestSupport
import Logging
import PurchaseLedger
import PurchaseLedgerLocation
@testable import PurchaseLedgerServer
import Testing

/// A server configured to sign checkpoints (docs/SERVER.md, "Checkpoints and proofs"): it
/// signs when the log has grown and once more on shutdown; `proofs:read` reads the notes and
/// the proofs, which check against the roots of the notes and the leaves the ledger exports;
/// a key without the scope, or a size out of range, is refused.
struct CheckpointRouteTests {
    /// The test server, configured to sign a checkpoint every second with a new key.
    static func signingServer(in directory: String) async throws -> (some ApplicationProtocol, NoteSigner, NoteVerifier) {
        let signer = try NoteSigner.generate(name: "ledger.example.com/purchases")
        try (signer.text + "\n").write(toFile: directory + "/checkpoint.key", atomically: true, encoding: .utf8)
        var configuration = try LedgerServerTests.configuration(in: directory)
        configuration.checkpoints = .init(keyFile: directory + "/checkpoint.key", everySeconds: 1)
        var logger = Logger(label: "test")
        logger.logLevel = .warning
        let app = try await LedgerServer.application(configuration: configuration, logger: logger)
        return (app, signer, try NoteVerifier(text: signer.verifierKey))
    }

    @Test func theServerSignsTheLogAndItsProofsCheckAgainstTheNotes() async throws {
        try await withTemporaryDirectory { directory in
            let (app, signer, verifier) = try await Self.signingServer(in: directory)
            let proofs = try await app.test(.live) { client -> [(position: Int, proof: [String: Any])] in
                let auditor = PatientClient(port: try #require(client.port))
                #expect(try await auditor.send(.get, "/v1/checkpoint").status == .unauthorized)
                #expect(try await auditor.send(.get, "/v1/checkpoint", key: TestKeys.reader).status == .forbidden)
                _ = try await auditor.post(events: [
                    Lines.added("e1", "ana", payment: "A1", product: "com.example.tenhints"),
                    Lines.purchased("e2", "ana", payment: "A1", transaction: "t1"),
                    Lines.added("e3", "ben", payment: "B1", product: "com.example.tenhints"),
                ])
                let first = try await Self.checkpoint(reaching: 3, auditor, verifier)
                _ = try await auditor.post(events: [
                    Lines.finished("e4", "ana", payment: "A1"),
                    Lines.purchased("e5", "ben", payment: "B1", transaction: "t2"),
                ])
                let second = try await Self.checkpoint(reaching: 5, auditor, verifier)
                #expect(first.origin == signer.name && second.origin == signer.name)

                // The listing, in the CLI's shape; after the first size, only the later.
                let listed = try await auditor.send(.get, "/v1/checkpoints", key: TestKeys.auditor).array
                #expect(listed.compactMap { $0["size"] as? Int }.contains(3) && listed.last?["size"] as? Int == 5)
                let later = try await auditor.send(.get, "/v1/checkpoints?after=3", key: TestKeys.auditor).array
                #expect(later.allSatisfy { ($0["size"] as? Int ?? 0) > 3 } && !later.isEmpty)

                // The consistency proof from the first to the second checks against their roots.
                let consistency = try await auditor.send(.get, "/v1/proofs/consistency?from=3&size=5", key: TestKeys.auditor).object
                let path = (consistency["hashes"] as? [String] ?? []).compactMap(MerkleHash.init(base64:))
                #expect(MerkleProofVerification.consistency(oldSize: 3, oldRoot: first.root, size: 5, root: second.root, proof: path))

                // Out of range, or not a number: 400, saying the range.
                for query in ["position=0", "position=6&size=5", "position=1&size=99", "position=x", "size=3", "position=1&size=-1"] {
                    let answer = try await auditor.send(.get, "/v1/proofs/inclusion?\(query)", key: TestKeys.auditor)
                    #expect(answer.status == .badRequest && answer.errorCode == "badRequest", "\(query): \(answer.body)")
                }
                #expect(try await auditor.send(.get, "/v1/proofs/inclusion?position=1&size=99", key: TestKeys.auditor).body.contains("from 1 to"))
                // Each position's inclusion in the second tree, checked below against its leaf.
                var proofs: [(Int, [String: Any])] = []
                for position in 1...5 {
                    proofs.append((position, try await auditor.send(.get, "/v1/proofs/inclusion?position=\(position)", key: TestKeys.auditor).object))
                }
                // An event after the last signing: the shutdown signs it.
                _ = try await auditor.post(events: [Lines.finished("e6", "ben", payment: "B1")])
                return proofs
            }
            let log = try LedgerLog.open(location: directory + "/ledger")
            defer { log.close() }
            let newest = try #require(try log.checkpoints().last)
            #expect(newest.size == 6)
            var leaves: [UInt8] = []
            try log.exportAsForgotten { leaves += $0 }
            let lines = leaves.split(separator: 0x0A).map(Array.init)
            #expect(lines.count == 6)
            guard case .verified(let verified, 6) = try log.verifyCheckpoint(Array(newest.note.utf8), verifier: verifier) else {
                throw TestFailure("the checkpoint signed on shutdown does not verify")
            }
            #expect(verified.size == 6)
            let fiveRoot = try log.checkpoints().first { $0.size == 5 }?.checkpoint?.root
            for (position, proof) in proofs {
                #expect(proof["treeSize"] as? Int == 5 && proof["leafIndex"] as? Int == position - 1)
                let path = (proof["hashes"] as? [String] ?? []).compactMap(MerkleHash.init(base64:))
                #expect(MerkleProofVerification.inclusion(
                    leaf: .leaf(lines[position - 1]), index: UInt64(position - 1), size: 5, path: path, root: try #require(fiveRoot)))
            }
        }
    }

    static let accountVerifier = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../docs/verify_account_proof.py").standardizedFileURL.path

    /// `?proof=true`: the account's answer at the newest checkpoint with every event of its
    /// history up to it proven; docs/verify_account_proof.py, which knows only the verifier
    /// key, accepts it, and refuses it with a leaf changed, an event left out, or asked about
    /// another account.
    @Test func aProofCarryingAnswerChecksWithOnlyTheVerifierKey() async throws {
        guard let python = await LedgerTestSupport.python(importing: "cryptography") else {
            try #require(!pythonPackagesAreRequired, "cryptography is not installed (tools/test installs it)")
            return
        }
        try await withTemporaryDirectory { directory in
            let (app, signer, verifier) = try await Self.signingServer(in: directory)
            try await app.test(.live) { client in
                let auditor = PatientClient(port: try #require(client.port))
                #expect(try await auditor.send(.get, "/v1/accounts/ana?proof=true", key: TestKeys.auditor).status == .notFound)
                _ = try await auditor.post(events: [
                    Lines.added("e1", "ana", payment: "A1", product: "com.example.tenhints"),
                    Lines.added("e2", "ben", payment: "B1", product: "com.example.tenhints"),
                    Lines.purchased("e3", "ana", payment: "A1", transaction: "t1"),
                    Lines.purchased("e4", "ben", payment: "B1", transaction: "t2"),
                    Lines.finished("e5", "ana", payment: "A1"),
                ])
                _ = try await Self.checkpoint(reaching: 5, auditor, verifier)
                // Ana's sixth event comes after the checkpoint: the answer is at 5, without it.
                _ = try await auditor.post(events: [Lines.consumed("e6", "ana", item: "hint", amount: 1)])
                #expect(try await auditor.send(.get, "/v1/accounts/ana?proof=true", key: TestKeys.reader).status == .forbidden)
                #expect(try await auditor.send(.get, "/v1/accounts/ana?proof=maybe", key: TestKeys.auditor).status == .badRequest)
                #expect(try await auditor.send(.get, "/v1/accounts/zoe?proof=true", key: TestKeys.auditor).errorCode == "notFound")
                let answer = try await auditor.send(.get, "/v1/accounts/ana?proof=true", key: TestKeys.auditor)
                #expect(answer.status == .ok, "\(answer.body)")
                let object = try answer.object
                let proof = try #require(object["proof"] as? [String: Any])
                let events = try #require(proof["events"] as? [[String: Any]])
                #expect(object["position"] as? Int == 5 && events.compactMap { $0["position"] as? Int } == [1, 3, 5])
                #expect((object["balances"] as? [String: Any])?.isEmpty == false, "\(object)")

                func check(_ document: [String: Any], account: String = "ana", origin: [String] = []) throws -> CommandRun {
                    let path = directory + "/answer-\(UUID().uuidString).json"
                    try JSONSerialization.data(withJSONObject: document).write(to: URL(fileURLWithPath: path))
                    return try runCommand(URL(fileURLWithPath: python), [Self.accountVerifier, path, signer.verifierKey, account] + origin)
                }
                let genuine = try check(object)
                #expect(genuine.status == 0 && genuine.text.hasPrefix("ok: 3 events of ana"), "\(genuine.text)\(genuine.error)")
                #expect(try check(object, account: "ben").status == 1)
                #expect(try check(object, origin: ["other.example/log"]).status == 1)
                // Ana's proof presented as ben's answer: the answer is about another account.
                var renamed = object
                renamed["account"] = "ben"
                #expect(try check(renamed, account: "ben").status == 1)
                var changed = events
                changed[1]["leaf"] = (changed[1]["leaf"] as? String ?? "").replacingOccurrences(of: "\"t1\"", with: "\"t9\"")
                var gap = events
                gap.remove(at: 1)
                for forged in [changed, gap] {
                    var document = object
                    var forgedProof = proof
                    forgedProof["events"] = forged
                    document["proof"] = forgedProof
                    let run = try check(document)
                    #expect(run.status == 1 && run.text.hasPrefix("does not verify"), "\(run.text)")
                }
            }
        }
    }

    /// Polls `GET /v1/checkpoint` until its tree holds `size` leaves; the note opened with `verifier`.
    static func checkpoint(reaching size: UInt64, _ client: PatientClient, _ verifier: NoteVerifier) async throws -> Checkpoint {
        for _ in 0..<600 {
            let answer = try await client.send(.get, "/v1/checkpoint", key: TestKeys.auditor)
            if answer.status == .ok {
                #expect(answer.headers[.contentType]?.hasPrefix("text/plain") == true)
                let checkpoint = try Checkpoint(text: try SignedNote.open(answer.body, verifier: verifier))
                if checkpoint.size >= size { return checkpoint }
            } else {
                #expect(answer.status == .notFound && answer.errorCode == "notFound", "\(answer.body)")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw TestFailure("no checkpoint of \(size) leaves within thirty seconds")
    }
}
