import Foundation
import HTTPTypes
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
    @Test func theServerSignsTheLogAndItsProofsCheckAgainstTheNotes() async throws {
        try await withTemporaryDirectory { directory in
            let signer = try NoteSigner.generate(name: "ledger.example.com/purchases")
            try (signer.text + "\n").write(toFile: directory + "/checkpoint.key", atomically: true, encoding: .utf8)
            let verifier = try NoteVerifier(text: signer.verifierKey)
            var configuration = try LedgerServerTests.configuration(in: directory)
            configuration.checkpoints = .init(keyFile: directory + "/checkpoint.key", everySeconds: 1)
            var logger = Logger(label: "test")
            logger.logLevel = .warning
            let app = try await LedgerServer.application(configuration: configuration, logger: logger)
            let proofs = try await app.test(.live) { client -> [(position: Int, proof: [String: Any])] in
                let auditor = PatientClient(port: try #require(client.port))
                #expect(try await client.send(.get, "/v1/checkpoint").status == .unauthorized)
                #expect(try await client.send(.get, "/v1/checkpoint", key: TestKeys.reader).status == .forbidden)
                _ = try await client.post(events: [
                    Lines.added("e1", "ana", payment: "A1", product: "com.example.tenhints"),
                    Lines.purchased("e2", "ana", payment: "A1", transaction: "t1"),
                    Lines.added("e3", "ben", payment: "B1", product: "com.example.tenhints"),
                ])
                let first = try await Self.checkpoint(reaching: 3, auditor, verifier)
                _ = try await client.post(events: [
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
                _ = try await client.post(events: [Lines.finished("e6", "ben", payment: "B1")])
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
