import Crypto
import Foundation
import Synchronization
import LedgerTestSupport
import Testing
@testable import PurchaseLedger
import PurchaseLedgerLocation

/// The proof-carrying ledger (docs/FORMAT.md, "The proof tree"), on each backend: the tree
/// over `export --as-forgotten`'s lines, its signed checkpoints and proofs, checked by an
/// auditor written from RFC 9162 and C2SP alone (`Scripts/verify_checkpoint.py`); a forget
/// changes no leaf; a checkpoint does not verify against a log rolled back below it or with
/// one event changed.
struct ProofTreeTests {
    static let signer: NoteSigner = {
        // A fixed test key: the same for every run, as any key would do.
        guard let signer = try? NoteSigner.generate(name: "ledger.example.com/purchases") else { fatalError("a valid name") }
        return signer
    }()

    /// The stored tree is the one the ledger's records make (`LedgerLog.proofTreeProblem()`).
    static func expectTheStoredTreeIsTheRecords(at location: String) throws {
        let log = try LedgerLog.open(location: location)
        defer { log.close() }
        #expect(try log.proofTreeProblem() == nil)
    }

    /// The leaves, a line each, as `ledger export --as-forgotten` writes them.
    static func leaves(at location: String) throws -> [[UInt8]] {
        let log = try LedgerLog.open(location: location)
        defer { log.close() }
        var bytes: [UInt8] = []
        try log.exportAsForgotten { bytes += $0 }
        return bytes.split(separator: 0x0A, omittingEmptySubsequences: false).dropLast().map(Array.init)
    }

    static func object(_ leaf: [UInt8]) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(leaf)) as? [String: Any])
    }

    @Test(arguments: Backend.available)
    func anAuditorAcceptsTheCheckpointsAndProofsAndAForgetChangesNoLeaf(on backend: Backend) async throws {
        try await withLocation(on: backend) { location in
            var ledger = try Ledger.open(location: location, catalog: TransferTests.catalog, configuration: .testing)
            try await ledger.appendAll(try ForgettingTests.history())
            let first = try await ledger.signCheckpoint(with: Self.signer)
            let salts = try ledger.feedStates(prefix: "proof/account/")
            await ledger.close()
            let before = try Self.leaves(at: location)
            #expect(UInt64(before.count) == first.size)

            // Every name is a pseudonym; no leaf holds an id, a token or Apple's signature.
            for leaf in before {
                let text = String(decoding: leaf, as: UTF8.self)
                for secret in [ForgettingTests.alice, ForgettingTests.aliceToken, ForgettingTests.bob, ForgettingTests.proof, "\"signed\""] {
                    #expect(!text.contains(secret), "\(text)")
                }
                #expect(try (Self.object(leaf)["account"] as? String)?.hasPrefix("forgotten/") == true)
            }
            // Her commitment is SHA-256(salt ‖ her id), with the salt kept under her handle (1).
            let aliceSalt = try #require(salts.first { $0.key == "proof/account/1" }?.value)
            #expect(aliceSalt.count == 64)
            let commitment = Data(SHA256.hash(data: Array(aliceSalt[32..<64]) + Array(ForgettingTests.alice.utf8))).base64EncodedString()
            let hers = try before.map(Self.object).enumerated().filter { $0.element["account"] as? String == "forgotten/1" }
            #expect(!hers.isEmpty && hers.allSatisfy { $0.element["accountCommitment"] as? String == commitment })
            // Her `previous` links run back, without a gap, to her first event.
            let positions = hers.map { UInt64($0.offset + 1) }
            #expect(hers.first?.element["previous"] == nil)
            #expect(hers.dropFirst().map { ($0.element["previous"] as? NSNumber)?.uint64Value } == positions.dropLast().map { $0 })

            // Her history proven at the checkpoint; refused beyond the limit.
            ledger = try Ledger.open(location: location, configuration: .testing)
            let (projection, proof) = try ledger.provenProjection(of: ForgettingTests.alice)
            #expect(projection.account == ForgettingTests.alice && proof.checkpoint == first)
            #expect(proof.events.map(\.position) == positions && proof.events.map(\.leaf) == positions.map { before[Int($0) - 1] })
            #expect(proof.salt == Array(aliceSalt[32..<64]))
            #expect(throws: AccountProof.Refusal.tooLarge(limit: 1)) { try ledger.provenProjection(of: ForgettingTests.alice, limit: 1) }
            #expect(throws: AccountProof.Refusal.nothingToProve) { try ledger.provenProjection(of: "nobody") }

            // She is forgotten: her salt goes, every leaf stays, and the first checkpoint verifies still.
            _ = try #require(try await ledger.forget(ForgettingTests.alice, requestedBy: "ticket-4711"))
            let second = try await ledger.signCheckpoint(with: Self.signer)
            #expect(throws: AccountProof.Refusal.nothingToProve) { try ledger.provenProjection(of: ForgettingTests.alice) }
            #expect(try ledger.feedStates(prefix: "proof/account/1").first?.value.count == 32)
            var inclusion: [[String: Any]] = []
            var consistency: [[String: Any]] = []
            for (position, size) in [(1, second.size), (second.size, second.size), (3, first.size), (first.size, first.size), (2, 5)] {
                let proof = try ledger.inclusionProof(position: position, size: size)
                inclusion.append(["leafIndex": proof.leafIndex, "treeSize": proof.treeSize, "hashes": proof.hashes.map(\.base64)])
            }
            for (old, size) in [(1, second.size), (first.size, second.size), (3, first.size), (second.size, second.size)] {
                let proof = try ledger.consistencyProof(from: old, size: size)
                consistency.append(["fromSize": proof.fromSize, "treeSize": proof.treeSize, "hashes": proof.hashes.map(\.base64)])
            }
            // Out of range: refused, never trapped.
            #expect(throws: MerkleTree.OutOfRange.self) { try ledger.inclusionProof(position: 0) }
            #expect(throws: MerkleTree.OutOfRange.self) { try ledger.inclusionProof(position: 1, size: second.size + 1) }
            #expect(throws: MerkleTree.OutOfRange.self) { try ledger.consistencyProof(from: second.size, size: first.size) }
            #expect(try ledger.checkpoints().map(\.size) == [first.size, second.size])
            await ledger.close()
            let after = try Self.leaves(at: location)
            #expect(Array(after.prefix(before.count)) == before)
            #expect(after.count == before.count + 1)

            let log = try LedgerLog.open(location: location)
            for checkpoint in [first, second] {
                guard case .verified(let verified, _) = try log.verifyCheckpoint(Array(checkpoint.note.utf8), verifier: try NoteVerifier(text: Self.signer.verifierKey)) else {
                    log.close()
                    throw TestFailure("checkpoint of \(checkpoint.size) does not verify after the forget")
                }
                #expect(verified.size == checkpoint.size)
            }
            log.close()

            guard let python = await python(importing: "cryptography") else {
                try #require(!pythonPackagesAreRequired, "cryptography is not installed (tools/test installs it)")
                return
            }
            let bundle: [String: Any] = [
                "verifierKey": Self.signer.verifierKey, "note": second.note, "leaves": after.map { Data($0).base64EncodedString() },
                "inclusion": inclusion, "consistency": consistency,
            ]
            try await withTemporaryDirectory { directory in
                let path = directory + "/bundle.json"
                try JSONSerialization.data(withJSONObject: bundle).write(to: URL(fileURLWithPath: path))
                let run = try runCommand(URL(fileURLWithPath: python), [ProofAuditorTests.script, path])
                #expect(run.status == 0, "\(run.text)\(run.error)")
                #expect(run.text.hasSuffix("ok\n"), "\(run.text)")
            }
        }
    }

    /// The tree extended a few leaves a write (as a kill between writes leaves it, then the next
    /// extension) is the tree extended at once, and the stored tree agrees with its records.
    @Test(arguments: Backend.available)
    func aTreeExtendedInPartsIsTheTreeExtendedAtOnce(on backend: Backend) async throws {
        try await withLocation(on: backend) { location in
            let ledger = try Ledger.open(location: location, catalog: TransferTests.catalog, configuration: .testing)
            try await ledger.appendAll(try ForgettingTests.history())
            let last = ledger.position
            var sizes: [UInt64] = []
            while sizes.last != last {
                let size = try await ledger.writer!.writeWithAppends { try ProofTreeExtension.extend($0, through: last, limit: 3) }
                sizes.append(size)
            }
            #expect(sizes.count > 2 && sizes == sizes.sorted())
            let root = try ledger.proofTreeRoot(size: last)
            await ledger.close()
            let tree = MemoryMerkleHashes()
            for leaf in try Self.leaves(at: location) { try tree.append(leaf: leaf) }
            #expect(try MerkleTree.root(size: last, reading: tree) == root)
            try Self.expectTheStoredTreeIsTheRecords(at: location)
        }
    }

    static func treeProblem(_ log: LedgerLog, size: UInt64, comparingAtOnce batch: Int) throws -> String? {
        guard case .failure(let problem) = try log.recomputedTree(size: size, rootsAt: [], comparingAtOnce: batch) else { return nil }
        return problem.reason
    }

    /// A ledger of `ForgettingTests.history()` with its tree extended over it; the tree's size.
    static func historyWithItsTree(at location: String) async throws -> UInt64 {
        let ledger = try Ledger.open(location: location, catalog: TransferTests.catalog, configuration: .testing)
        try await ledger.appendAll(try ForgettingTests.history())
        let size = try await ledger.extendProofTree()
        await ledger.close()
        return size
    }

    /// Rewrites one tile of the stored tree, as damage would.
    static func changeTile(at location: String, level: Int, tile: UInt64, _ change: @escaping @Sendable (inout [UInt8]) -> Void) async throws {
        let ledger = try Ledger.open(location: location, catalog: TransferTests.catalog, configuration: .testing)
        let key = ProofTreeStore.tileKey(level: level, tile: tile)
        try await ledger.writer!.writeWithAppends { storage in
            var bytes = try #require(try storage.feedState(key))
            change(&bytes)
            try storage.setFeedState(key, bytes)
        }
        await ledger.close()
    }

    /// One hash of the stored tree changed is found by `verify`, whichever batch of subtrees
    /// compared at once holds it.
    @Test(arguments: Backend.available)
    func aChangedHashOfTheStoredTreeIsFoundWhereverItIs(on backend: Backend) async throws {
        try await withLocation(on: backend) { location in
            let size = try await Self.historyWithItsTree(at: location)
            try #require(size >= 4)
            do {
                let log = try LedgerLog.open(location: location)
                defer { log.close() }
                #expect(try Self.treeProblem(log, size: size, comparingAtOnce: 1) == nil)
            }
            // The second hash of level 1: the subtree of leaves 2 and 3.
            try await Self.changeTile(at: location, level: 1, tile: 0) { $0[33] ^= 1 }
            let log = try LedgerLog.open(location: location)
            defer { log.close() }
            for batch in [1, 2, 3, LedgerLog.subtreesComparedAtOnce] {
                #expect(
                    try Self.treeProblem(log, size: size, comparingAtOnce: batch)
                        == "the stored tree's hash of subtree 1 at level 1 is not the records'", "comparing \(batch) at once")
            }
            #expect(try log.proofTreeProblem() != nil)
        }
    }

    /// A tile of the stored tree with a byte too many is damage `verify` names, even where
    /// every hash in it is right.
    @Test(arguments: Backend.available)
    func aTileOfTheStoredTreeWithAByteTooManyIsFound(on backend: Backend) async throws {
        try await withLocation(on: backend) { location in
            let size = try await Self.historyWithItsTree(at: location)
            try await Self.changeTile(at: location, level: 0, tile: 0) { $0.append(0) }
            let log = try LedgerLog.open(location: location)
            defer { log.close() }
            let key = ProofTreeStore.tileKey(level: 0, tile: 0)
            #expect(try Self.treeProblem(log, size: size, comparingAtOnce: 1) == "the proof state \(key) holds \(min(size, 32) * 32 + 1) bytes, not a whole number of hashes")
        }
    }

    /// A tree of more leaves than three tiles of level 1 hold (32² · 3 + 5), extended in parts
    /// of 1, 31, 33 and 1,024 leaves (so that levels move past tiles within a write and
    /// between writes), is the tree its leaves make, and verifying it hashes again the roots
    /// the stored tree gives.
    @Test(arguments: Backend.available)
    func aTreeOverManyTilesExtendedInUnevenPartsIsTheTreeOfItsLeaves(on backend: Backend) async throws {
        try await withLocation(on: backend) { location in
            let ledger = try Ledger.open(location: location, catalog: TransferTests.catalog, configuration: .testing)
            let count = 32 * 32 * 3 + 5
            let events = try (0..<count).map { index in
                try Event(jsonLine: #"{"id":"m\#(index)","type":"paymentAdded","account":"a\#(index % 97)","at":"2026-01-01T00:00:00Z","payment":"p\#(index)","product":"coins"}"#)
            }
            for start in stride(from: 0, to: count, by: 1000) {
                try await ledger.appendAll(Array(events[start..<min(count, start + 1000)]))
            }
            let last = ledger.position
            var limits = [1, 31, 33, 1024].makeIterator()
            var size: UInt64 = 0
            while size < last {
                let limit = UInt64(limits.next() ?? 1024)
                size = try await ledger.writer!.writeWithAppends { try ProofTreeExtension.extend($0, through: last, limit: limit) }
            }
            let sizes: [UInt64] = [1, 31, 32, 64, 65, 1024, 1025, 2048, 3071, last]
            let stored = try sizes.map { try ledger.proofTreeRoot(size: $0) }
            await ledger.close()
            let tree = MemoryMerkleHashes()
            for leaf in try Self.leaves(at: location) { try tree.append(leaf: leaf) }
            #expect(tree.size == last)
            #expect(try sizes.map { try MerkleTree.root(size: $0, reading: tree) } == stored)
            let log = try LedgerLog.open(location: location)
            defer { log.close() }
            guard case .success(let roots) = try log.recomputedTree(size: last, rootsAt: Set(sizes), comparingAtOnce: 100) else {
                throw TestFailure("the stored tree is not its records'")
            }
            #expect(sizes.map { roots[$0] } == stored)
        }
    }

    /// The accounts a follower keeps between batches (`ProofTreeAccounts`) stay right when
    /// others extend the tree in between: a few leaves added by the writer's own extension (a
    /// checkpoint's signing) move them, more than a batch's worth make it start again, and a
    /// reopened ledger knows none. Every leaf is then checked against one rendered from the
    /// records alone, each account's `previous` with it, and the older form of a kept
    /// commitment (with a position, here a wrong one) is read past.
    @Test(arguments: Backend.available)
    func theAccountsAFollowerKeepsStayRightWhenOthersExtendTheTree(on backend: Backend) async throws {
        try await withLocation(on: backend) { location in
            var ledger = try Ledger.open(location: location, catalog: TransferTests.catalog, configuration: .testing)
            var next = 0
            func append(_ count: Int) async throws {
                let events = try (next..<next + count).map { index in
                    try Event(jsonLine: #"{"id":"k\#(index)","type":"paymentAdded","account":"a\#(index % 13)","at":"2026-01-01T00:00:00Z","payment":"p\#(index)","product":"coins"}"#)
                }
                next += count
                try await ledger.appendAll(events)
            }
            func extendByTheWriter(_ count: UInt64) async throws {
                let target = try ledger.proofTreeSize() + count
                _ = try await ledger.writer!.writeWithAppends { try ProofTreeExtension.extend($0, through: target, limit: .max) }
            }
            func kept() -> (size: UInt64, accounts: Int) {
                ledger.proofTreeAccounts.withLock { ($0.size, $0.accounts.count) }
            }
            try await append(100)
            #expect(try await ledger.extendProofTree() == 100)
            #expect(kept() == (100, 13))
            // Moved over leaves the writer added.
            try await append(50)
            try await extendByTheWriter(20)
            try await append(30)
            #expect(try await ledger.extendProofTree() == 180)
            #expect(kept() == (180, 13))
            // More than a batch's worth: started again from what the batch read.
            try await append(1500)
            try await extendByTheWriter(1100)
            #expect(try await ledger.extendProofTree() == 1680)
            #expect(kept() == (1680, 13))
            // Alice's commitment as ledgers written before kept it, with a wrong position.
            let key = AccountCommitment.key(1)
            let current = try #require(try ledger.feedStates(prefix: key).first?.value)
            _ = try await ledger.writer!.writeWithAppends { writer in
                try writer.setFeedState(key, Array(current.prefix(32)) + ProofTreeStore.sizeBytes(3) + Array(current.suffix(32)))
            }
            await ledger.close()
            ledger = try Ledger.open(location: location, configuration: .testing)
            #expect(kept() == (0, 0))
            try await append(40)
            #expect(try await ledger.extendProofTree() == 1720)
            // Rewritten in the new form by the batch that read it: a version from before,
            // which would take the stale position as her newest leaf, fails on it instead.
            #expect(try ledger.feedStates(prefix: key).first?.value == current)
            await ledger.close()
            try Self.expectTheStoredTreeIsTheRecords(at: location)
        }
    }

    /// Alice's leaves worked out on a reader (`ProofLeafBatch`, as `extendProofTree()` does, off
    /// the writer) before any commitment of hers was kept, then her forget, which makes her
    /// commitment without a salt: the batch is not written, and the tree made after carries the
    /// forget's commitment, with no salt kept anywhere.
    @Test(arguments: Backend.available)
    func aBatchWorkedOutBeforeAForgetMadeTheCommitmentIsNotWritten(on backend: Backend) async throws {
        try await withLocation(on: backend) { location in
            let ledger = try Ledger.open(location: location, catalog: TransferTests.catalog, configuration: .testing)
            try await ledger.appendAll(try ForgettingTests.history())
            let early = try ProofLeafBatch(working: try #require(try ledger.storage.read { try ProofLeafBatch.read($0, through: try $0.lastPosition(), limit: .max) }))
            _ = try #require(try await ledger.forget(ForgettingTests.alice, requestedBy: "ticket-4711"))
            let forgotten = try #require(try ledger.feedStates(prefix: "proof/account/1").first?.value)
            #expect(forgotten.count == 32)
            #expect(try await ledger.writer!.writeWithAppends { try early.write($0) } == false)
            #expect(try ledger.proofTreeSize() == 0)
            #expect(try await ledger.extendProofTree() == ledger.position)
            let kept = try #require(try ledger.feedStates(prefix: "proof/account/1").first?.value)
            #expect(kept.count == 32 && kept.prefix(32) == forgotten.prefix(32))
            await ledger.close()
            try Self.expectTheStoredTreeIsTheRecords(at: location)
        }
    }

    /// A batch worked out before the tree grew is not written. Alice's later leaves worked
    /// out on a reader while her salt was kept, then her forget: that batch is written
    /// (nothing it depends on moved), and her salt stays destroyed.
    @Test(arguments: Backend.available)
    func aBatchWrittenAfterAForgetKeepsNoSalt(on backend: Backend) async throws {
        try await withLocation(on: backend) { location in
            let ledger = try Ledger.open(location: location, catalog: TransferTests.catalog, configuration: .testing)
            try await ledger.appendAll(try ForgettingTests.history())
            let stale = try ProofLeafBatch(working: try #require(try ledger.storage.read { try ProofLeafBatch.read($0, through: try $0.lastPosition(), limit: .max) }))
            // Her first event (position 1) in the tree: her salt is kept.
            #expect(try await ledger.writer!.writeWithAppends { try ProofTreeExtension.extend($0, through: 1, limit: 1) } == 1)
            #expect(try await ledger.writer!.writeWithAppends { try stale.write($0) } == false)
            #expect(try ledger.proofTreeSize() == 1)
            #expect(try ledger.feedStates(prefix: "proof/account/1").first?.value.count == 64)
            let rest = try ProofLeafBatch(working: try #require(try ledger.storage.read { try ProofLeafBatch.read($0, through: try $0.lastPosition(), limit: .max) }))
            _ = try #require(try await ledger.forget(ForgettingTests.alice, requestedBy: "ticket-4711"))
            #expect(try await ledger.writer!.writeWithAppends { try rest.write($0) } == true)
            #expect(try ledger.proofTreeSize() == rest.last && rest.last < ledger.position)
            #expect(try ledger.feedStates(prefix: "proof/account/1").first?.value.count == 32)
            try await ledger.extendProofTree()
            await ledger.close()
            try Self.expectTheStoredTreeIsTheRecords(at: location)
        }
    }

    /// `ledger copy` of a ledger in use reads the consumers' state (Alice's commitment, with
    /// its salt) before it copies the events, her forget among them: the copy's commitment
    /// is the source's, and its salt stays destroyed.
    @Test(arguments: Backend.available)
    func aCopyNeverBringsBackASaltItsForgetDestroyed(on backend: Backend) async throws {
        try await withLocation(on: backend) { sourceLocation in
            let source = try Ledger.open(location: sourceLocation, catalog: TransferTests.catalog, configuration: .testing)
            try await source.appendAll(try ForgettingTests.history())
            try await source.extendProofTree()
            let states = try source.feedStates(prefix: "")
            let salted = try #require(states.first { $0.key == "proof/account/1" }?.value)
            #expect(salted.count == 64)
            _ = try #require(try await source.forget(ForgettingTests.alice, requestedBy: "ticket-4711"))
            await source.close()
            let log = try LedgerLog.open(location: sourceLocation)
            defer { log.close() }
            try await withLocation(on: backend) { location in
                var configuration = Ledger.Configuration.testing
                configuration.copying = true
                let copy = try Ledger.open(location: location, catalog: TransferTests.catalog, configuration: configuration)
                try await copy.appendAll(try ForgettingTests.history())
                _ = try #require(try await copy.forget(ForgettingTests.alice, requestedBy: "ticket-4711"))
                try await copy.copyFeed(from: log, through: try log.lastPosition(), states: states)
                let copied = try #require(try copy.feedStates(prefix: "proof/account/1").first?.value)
                #expect(copied == Array(salted.prefix(32)))
                await copy.close()
            }
        }
    }

    /// The tree's leaves are read and hashed on the ledger's background executor, not on the
    /// caller's: by default threads of its own; here one that counts what it runs. Without one
    /// (nil), on the caller's executor, the same tree.
    @Test func theTreesLeavesAreWorkedOutOnTheBackgroundExecutor() async throws {
        let counting = CountingExecutor()
        for executor in [counting, nil] as [CountingExecutor?] {
            try await withTemporaryDirectory { directory in
                var configuration = Ledger.Configuration.testing
                configuration.backgroundExecutor = executor
                let ledger = try Ledger.open(location: directory + "/ledger", catalog: TransferTests.catalog, configuration: configuration)
                try await ledger.appendAll(try (0..<300).map { index in
                    try Event(jsonLine: #"{"id":"w\#(index)","type":"paymentAdded","account":"a\#(index % 5)","at":"2026-01-01T00:00:00Z","payment":"p\#(index)","product":"coins"}"#)
                })
                #expect(try await ledger.extendProofTree() == 300)
                #expect(try await ledger.signCheckpoint(with: Self.signer).size == 300)
                await ledger.close()
            }
            if executor != nil { #expect(counting.jobsRun > 0) }
        }
    }

    /// A tree that follows the log (`followProofTree()`) while events are appended and
    /// checkpoints signed, both extending it at once: it reaches the log's head by itself,
    /// every checkpoint verifies, and the stored tree is its records'. Within two minutes of
    /// having its database (a time limit on the test would count its wait for one too).
    @Test(arguments: Backend.available)
    func aFollowedTreeReachesTheHeadAndAgreesWithSignedCheckpoints(on backend: Backend) async throws {
        try await withLocation(on: backend) { location in
            let ledger = try Ledger.open(location: location, catalog: TransferTests.catalog, configuration: .testing)
            let following = Task { await ledger.followProofTree() }
            let signed: Result<[StoredCheckpoint], any Error>
            do {
                signed = .success(try await withTimeout(.seconds(120)) {
                    var checkpoints: [StoredCheckpoint] = []
                    for part in 0..<3 {
                        try await ledger.appendAll(try (0..<200).map { index in
                            try Event(jsonLine: #"{"id":"f\#(part)-\#(index)","type":"paymentAdded","account":"a\#(index % 13)","at":"2026-01-01T00:00:00Z","payment":"p\#(part)-\#(index)","product":"coins"}"#)
                        })
                        checkpoints.append(try await ledger.signCheckpoint(with: Self.signer))
                    }
                    try await ledger.appendAll(try (0..<300).map { index in
                        try Event(jsonLine: #"{"id":"g\#(index)","type":"paymentAdded","account":"b\#(index % 7)","at":"2026-01-01T00:00:00Z","payment":"q\#(index)","product":"coins"}"#)
                    })
                    // Reached by the follower alone: nothing else extends the tree from here. Read
                    // in a turn of the tree's own, so that each reading waits for the follower's
                    // batch instead of spinning against it.
                    while try await ledger.proofTreeTurns.inTurn({ try ledger.proofTreeSize() }) < ledger.position {
                        try Task.checkCancellation()
                        await Task.yield()
                    }
                    return checkpoints
                })
            } catch {
                signed = .failure(error)
            }
            following.cancel()
            await following.value
            await ledger.close()
            let checkpoints = try signed.get()
            #expect(checkpoints.map(\.size) == [200, 400, 600])
            let log = try LedgerLog.open(location: location)
            defer { log.close() }
            #expect(try log.proofTreeProblem() == nil)
            for checkpoint in checkpoints {
                guard case .verified = try log.verifyCheckpoint(Array(checkpoint.note.utf8), verifier: try NoteVerifier(text: Self.signer.verifierKey)) else {
                    throw TestFailure("the checkpoint of \(checkpoint.size) does not verify")
                }
            }
        }
    }

    /// A checkpoint of one ledger, checked against another holding the same proof state (its
    /// commitments, its stored tree: what an operator rolling back or rewriting would keep)
    /// but other records: rolled back below the checkpoint, or with one event changed.
    @Test(arguments: Backend.available)
    func aCheckpointDoesNotVerifyAgainstARolledBackOrChangedLog(on backend: Backend) async throws {
        let events = try ForgettingTests.history()
        let (note, proofState) = try await withLocation(on: backend) { location in
            let ledger = try Ledger.open(location: location, catalog: TransferTests.catalog, configuration: .testing)
            try await ledger.appendAll(events)
            let checkpoint = try await ledger.signCheckpoint(with: Self.signer)
            let state = try ledger.feedStates(prefix: "proof/")
            await ledger.close()
            let log = try LedgerLog.open(location: location)
            defer { log.close() }
            // The genuine ledger verifies, to show the check can pass.
            guard case .verified = try log.verifyCheckpoint(Array(checkpoint.note.utf8), verifier: try NoteVerifier(text: Self.signer.verifierKey)) else {
                throw TestFailure("the genuine ledger does not verify")
            }
            return (checkpoint.note, state)
        }
        var changed = events
        guard case .storeTransaction(var fact) = changed[1].payload else { throw TestFailure("not a store report") }
        fact.price = (fact.price ?? 0) + 1000
        changed[1].payload = .storeTransaction(fact)
        for (name, forged) in [("rolled back", Array(events.dropLast())), ("one event changed", changed)] {
            try await withLocation(on: backend) { location in
                let ledger = try Ledger.open(location: location, catalog: TransferTests.catalog, configuration: .testing)
                try await ledger.appendAll(forged)
                try await ledger.updateFeedState { state in
                    for (key, value) in proofState { try state.set(key, value) }
                }
                await ledger.close()
                let log = try LedgerLog.open(location: location)
                defer { log.close() }
                let verdict = try log.verifyCheckpoint(Array(note.utf8), verifier: try NoteVerifier(text: Self.signer.verifierKey))
                guard case .failed(let reason) = verdict else { throw TestFailure("\(name): \(verdict)") }
                #expect(!reason.isEmpty)
            }
        }
        // The account table changed under the tree (an id given another handle's place): the
        // leaves name handles and stay, the commitment no longer matches the id.
        try await withLocation(on: backend) { location in
            let ledger = try Ledger.open(location: location, catalog: TransferTests.catalog, configuration: .testing)
            try await ledger.appendAll(events)
            let checkpoint = try await ledger.signCheckpoint(with: Self.signer)
            try ledger.storage.write { try $0.renameAccount(handle: 1, from: ForgettingTests.alice, to: "mallory") }
            await ledger.close()
            let log = try LedgerLog.open(location: location)
            defer { log.close() }
            #expect(try log.proofTreeProblem()?.contains("commitment") == true)
            guard case .failed(let reason) = try log.verifyCheckpoint(Array(checkpoint.note.utf8), verifier: try NoteVerifier(text: Self.signer.verifierKey)) else {
                throw TestFailure("a checkpoint verified over a changed account table")
            }
            #expect(reason.contains("commitment"), "\(reason)")
            // Another log's name: refused, unless it is the one asked for.
            #expect(try log.verifyCheckpoint(Array(checkpoint.note.utf8), verifier: try NoteVerifier(text: Self.signer.verifierKey), origin: "other.example/log")
                    == .failed("the checkpoint is of the log \"\(Self.signer.name)\", not \"other.example/log\""))
        }
        // Another key's checkpoint, or a changed byte of the note, does not verify either.
        try await withLocation(on: backend) { location in
            let ledger = try Ledger.open(location: location, catalog: TransferTests.catalog, configuration: .testing)
            try await ledger.appendAll(events)
            await ledger.close()
            let log = try LedgerLog.open(location: location)
            defer { log.close() }
            let other = try NoteSigner.generate(name: Self.signer.name)
            var flipped = Array(note.utf8)
            flipped[flipped.count / 2] ^= 1
            for (bytes, key) in [(Array(note.utf8), other.verifierKey), (flipped, Self.signer.verifierKey)] {
                guard case .failed = try log.verifyCheckpoint(bytes, verifier: try NoteVerifier(text: key)) else {
                    throw TestFailure("a note that should not verify did")
                }
            }
        }
    }
}

/// A tree held whole in memory, built leaf by leaf: the test's own, to compare with the stored one.
final class MemoryMerkleHashes: MerkleHashReader {
    private(set) var levels: [[MerkleHash]] = []

    var size: UInt64 { UInt64(levels.first?.count ?? 0) }

    func hash(level: Int, index: UInt64) throws -> MerkleHash {
        guard level < levels.count, index < UInt64(levels[level].count) else {
            throw MerkleTree.OutOfRange(description: "no subtree \(index) at level \(level)")
        }
        return levels[level][Int(index)]
    }

    func append(leaf data: [UInt8]) throws {
        for (subtree, hash) in try MerkleTree.completedSubtrees(appending: .leaf(data), at: size, reading: self) {
            if subtree.level == levels.count { levels.append([]) }
            levels[subtree.level].append(hash)
        }
    }
}

/// Salts are never handed out twice: each account's commitment is its own.
struct SaltSourceTests {
    @Test func everySaltIsNewAndThirtyTwoBytes() {
        var salts = SaltSource()
        let drawn = (0..<100).map { _ in salts.next() }
        #expect(drawn.allSatisfy { $0.count == 32 })
        #expect(Set(drawn).count == drawn.count)
    }
}

/// A task executor on a thread of its own that counts the jobs it runs.
final class CountingExecutor: TaskExecutor, @unchecked Sendable {
    private let queue = DispatchQueue(label: "counting-executor")
    private let count = Mutex(0)

    var jobsRun: Int { count.withLock { $0 } }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.async { [self] in
            count.withLock { $0 += 1 }
            job.runSynchronously(on: asUnownedTaskExecutor())
        }
    }
}

extension ProofLeafBatch {
    /// A batch read knowing no account, as a process's first one does.
    static func read(_ reader: any LedgerStorageReader, through end: UInt64, limit: UInt64) throws -> Reading? {
        var known = ProofTreeAccounts()
        return try read(reader, through: end, limit: limit, known: &known)
    }
}
