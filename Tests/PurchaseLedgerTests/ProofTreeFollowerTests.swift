import Foundation
import Synchronization
import LedgerTestSupport
import Testing
@testable import PurchaseLedger
import PurchaseLedgerLocation

/// The accounts the proof tree's extension keeps between batches (`ProofTreeAccounts`) and
/// the history's `newestPositions`, under what could leave them wrong: forgets, signings,
/// other processes, reopens, bucket edges. Each sequence ends with every leaf's `previous`
/// and the stored tree checked against the records.
struct ProofTreeFollowerTests {
    static func event(_ index: Int, account: String) throws -> Event {
        try Event(jsonLine: #"{"id":"r\#(index)","type":"paymentAdded","account":"\#(account)","at":"2026-01-01T00:00:00Z","payment":"p\#(index)","product":"coins"}"#)
    }

    /// Every leaf's `previous` is the position of the leaf before it with the same `account`
    /// (the pseudonym names the handle), and the stored tree is the one the records make.
    static func checkTree(at location: String) throws {
        let leaves = try ProofTreeTests.leaves(at: location)
        var newest: [String: Int] = [:]
        for (offset, leaf) in leaves.enumerated() {
            let object = try ProofTreeTests.object(leaf)
            let account = try #require(object["account"] as? String)
            let previous = (object["previous"] as? NSNumber)?.intValue
            #expect(previous == newest[account], "position \(offset + 1)")
            newest[account] = offset + 1
        }
        try ProofTreeTests.expectTheStoredTreeIsTheRecords(at: location)
    }

    /// A warm cache, then: an account made by a forget before its first leaf, a forget of a
    /// kept account, a checkpoint's in-writer extension, (PostgreSQL) another process's
    /// batches of at most and more than a batch's worth, and a reopen.
    @Test(arguments: Backend.available)
    func aWarmCacheSurvivesForgetsSigningsOtherWritersAndReopens(on backend: Backend) async throws {
        try await withLocation(on: backend) { location in
            var a = try Ledger.open(location: location, catalog: TransferTests.catalog, configuration: .testing)
            let b: Ledger? = backend == .postgres ? try Ledger.open(location: location, configuration: .testing) : nil
            var next = 0
            func append(_ ledger: Ledger, _ count: Int, accounts: [String]) async throws {
                let events = try (next..<next + count).map { try Self.event($0, account: accounts[$0 % accounts.count]) }
                next += count
                try await ledger.appendAll(events)
            }
            let some = (0..<13).map { "a\($0)" }
            try await append(a, 100, accounts: some)
            #expect(try await a.extendProofTree() == 100)
            // "late" and "later": events after the tree, forgotten before their first leaf.
            try await append(a, 30, accounts: some + ["late", "later"])
            _ = try #require(try await a.forget("late", requestedBy: "t1"))
            _ = try #require(try await a.forget("a3", requestedBy: "t2"))
            try await append(a, 10, accounts: ["later", "a4"])
            _ = try #require(try await a.forget("later", requestedBy: "t3"))
            try await a.extendProofTree()
            try await append(a, 7, accounts: some)
            _ = try await a.signCheckpoint(with: ProofTreeTests.signer)
            try await append(a, 50, accounts: some + ["late"])
            if let b {
                // Fewer than a batch's worth by the other process: moved over.
                try await b.catchUp()
                try await append(b, 300, accounts: some + ["b0", "b1"])
                try await b.extendProofTree()
                try await a.catchUp()
                try await append(a, 5, accounts: some)
                try await a.extendProofTree()
                // More than a batch's worth: started again.
                try await b.catchUp()
                try await append(b, 1500, accounts: some + ["b2"])
                _ = try #require(try await b.forget("a5", requestedBy: "t4"))
                try await b.extendProofTree()
                try await a.catchUp()
                try await append(a, 5, accounts: some)
                try await a.extendProofTree()
            }
            try await a.extendProofTree()
            await a.close()
            await b?.close()
            try Self.checkTree(at: location)
            a = try Ledger.open(location: location, configuration: .testing)
            try await append(a, 40, accounts: some + ["late", "b0"])
            try await a.extendProofTree()
            await a.close()
            try Self.checkTree(at: location)
        }
    }

    /// Others' leaves exactly a batch's worth past the kept size (moved over), then one more
    /// than that (started again), added by the writer's own extension.
    @Test(arguments: Backend.available)
    func exactlyABatchOfOthersLeaves(on backend: Backend) async throws {
        try await withLocation(on: backend) { location in
            let ledger = try Ledger.open(location: location, catalog: TransferTests.catalog, configuration: .testing)
            var next = 0
            func append(_ count: Int) async throws {
                let events = try (next..<next + count).map { try Self.event($0, account: "c\($0 % 7)") }
                next += count
                try await ledger.appendAll(events)
            }
            func extendByTheWriter(_ count: UInt64) async throws {
                let target = try ledger.proofTreeSize() + count
                _ = try await ledger.writer!.writeWithAppends { try ProofTreeExtension.extend($0, through: target, limit: .max) }
            }
            try await append(50)
            try await ledger.extendProofTree()
            try await append(Int(Ledger.proofTreeLeavesPerWrite) + 10)
            try await extendByTheWriter(Ledger.proofTreeLeavesPerWrite)
            try await ledger.extendProofTree()
            #expect(ledger.proofTreeAccounts.withLock { $0.accounts.count } == 7)
            try await append(Int(Ledger.proofTreeLeavesPerWrite) + 10)
            try await extendByTheWriter(Ledger.proofTreeLeavesPerWrite + 1)
            try await ledger.extendProofTree()
            await ledger.close()
            try Self.checkTree(at: location)
        }
    }

    /// LMDB: a log past the first bucket edge (65,536) with the index's tail moved several
    /// times; a dormant account whose only earlier event is in bucket 0, a forget-made one,
    /// and a cold cache (reopen) when the tree crosses the edge.
    @Test func aColdCacheAcrossTheFirstBucketEdge() async throws {
        try await withLocation(on: .lmdb) { location in
            var ledger = try Ledger.open(location: location, catalog: TransferTests.catalog, configuration: .testing)
            var next = 0
            func append(_ count: Int, _ account: (Int) -> String) async throws {
                for start in stride(from: next, to: next + count, by: 4096) {
                    let end = min(start + 4096, next + count)
                    try await ledger.appendAll(try (start..<end).map { try Self.event($0, account: account($0)) })
                }
                next += count
            }
            try await append(3) { _ in "dormant" }
            try await append(65_530) { "d\($0 % 101)" }
            try await ledger.extendProofTree()
            await ledger.close()
            ledger = try Ledger.open(location: location, configuration: .testing)
            try await append(20) { $0 % 2 == 0 ? "dormant" : "ghost" }
            _ = try #require(try await ledger.forget("ghost", requestedBy: "t"))
            try await append(9_000) { "d\($0 % 101)" }
            try await append(2) { _ in "dormant" }
            try await ledger.extendProofTree()
            await ledger.close()
            try Self.checkTree(at: location)
        }
    }

    /// A batch worked out on the copy before `copyFeed` replaced its tree (of the same size)
    /// and commitments with the source's is not written after: its leaves carry the copy's own
    /// commitments.
    @Test(arguments: Backend.available)
    func aBatchWorkedOutBeforeACopysTreeReplacedItsOwnIsNotWritten(on backend: Backend) async throws {
        try await withLocation(on: backend) { sourceLocation in
            let source = try Ledger.open(location: sourceLocation, catalog: TransferTests.catalog, configuration: .testing)
            try await source.appendAll(try (0..<20).map { try Self.event($0, account: "a\($0 % 5)") })
            #expect(try await source.extendProofTree() == 20)
            let states = try source.feedStates(prefix: "")
            await source.close()
            let log = try LedgerLog.open(location: sourceLocation)
            defer { log.close() }
            try await withLocation(on: backend) { location in
                let copy = try Ledger.open(location: location, catalog: TransferTests.catalog, configuration: .testing)
                try await copy.appendAll(try (0..<30).map { try Self.event($0, account: "a\($0 % 5)") })
                // The copy's own tree of the same size, with its own commitments.
                #expect(try await copy.writer!.writeWithAppends { try ProofTreeExtension.extend($0, through: 20, limit: .max) } == 20)
                // A follower's batch, read before the copy's feed state is written...
                let batch = try ProofLeafBatch(working: try #require(try copy.storage.read {
                    try ProofLeafBatch.read($0, through: try $0.lastPosition(), limit: .max)
                }))
                try await copy.copyFeed(from: log, through: 20, states: states)
                // ...is not written after it: the tree it extends is not the one stored.
                let written = try await copy.writer!.writeWithAppends { try batch.write($0) }
                #expect(written == false)
                await copy.close()
                try ProofTreeTests.expectTheStoredTreeIsTheRecords(at: location)
            }
        }
    }

    /// `copyFeed` stores a source's commitment of the older form (72 bytes, with a position) in
    /// the new one (64), as migration 5 and every batch of the tree do.
    @Test(arguments: Backend.available)
    func aCopyStoresACommitmentOfTheOlderFormInTheNewOne(on backend: Backend) async throws {
        try await withLocation(on: backend) { sourceLocation in
            let source = try Ledger.open(location: sourceLocation, catalog: TransferTests.catalog, configuration: .testing)
            try await source.appendAll(try (0..<5).map { try Self.event($0, account: "a\($0 % 5)") })
            await source.close()
            let log = try LedgerLog.open(location: sourceLocation)
            defer { log.close() }
            try await withLocation(on: backend) { location in
                let copy = try Ledger.open(location: location, catalog: TransferTests.catalog, configuration: .testing)
                try await copy.appendAll(try (0..<5).map { try Self.event($0, account: "a\($0 % 5)") })
                let older = [UInt8](repeating: 7, count: 32) + ProofTreeStore.sizeBytes(3) + [UInt8](repeating: 9, count: 32)
                try await copy.copyFeed(from: log, through: 5, states: [(key: AccountCommitment.key(1), value: older)])
                let stored = try #require(try copy.feedState(AccountCommitment.key(1)))
                #expect(stored.count == 64, "stored \(stored.count) bytes")
                await copy.close()
            }
        }
    }
}
