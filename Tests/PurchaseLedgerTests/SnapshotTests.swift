import LedgerTestSupport
import LMDB
import Testing
@testable import PurchaseLedger
@testable import PurchaseLedgerLMDB

/// Opening from a snapshot and the log after it gives the answers a full replay gives; a
/// snapshot that cannot be trusted is ignored (or, for one damaged account, worked around).
struct SnapshotTests {
    static func configuration(interval: UInt64?, keep: Int = 3, onClose: Bool = true) -> Ledger.Configuration {
        var configuration = Ledger.Configuration.testing
        configuration.snapshotInterval = interval
        configuration.snapshotsKept = keep
        configuration.snapshotOnClose = onClose
        return configuration
    }

    static var fullReplay: Ledger.Configuration {
        var configuration = Ledger.Configuration.testing
        configuration.useSnapshots = false
        configuration.snapshotOnClose = false
        return configuration
    }

    /// Fills a ledger from a generated stream in batches, with a snapshot every `interval`
    /// events; returns the projections kept while appending.
    private func fill(_ path: String, seed: UInt64, batches: Int, interval: UInt64?, onClose: Bool = false) async throws -> LedgerState {
        let ledger = try Ledger.open(at: path, catalog: wordGameCatalog, configuration: Self.configuration(interval: interval, onClose: onClose))
        var generator = EventStreamGenerator(seed: seed)
        var random = SeededGenerator(seed: seed &+ 1)
        for _ in 0..<batches {
            _ = try await ledger.append(contentsOf: generator.events(Int.random(in: 1...30, using: &random)))
        }
        let state = try ledger.currentState()
        await ledger.close()
        return state
    }

    private func open(_ path: String, _ configuration: Ledger.Configuration = .testing) throws -> Ledger {
        try Ledger.open(at: path, configuration: configuration)
    }

    private func projections(_ ledger: Ledger, accounts: [String]) throws -> [AccountProjection?] {
        try accounts.map { try ledger.projection(of: $0, asOf: newYear) }
    }

    @Test(arguments: 1...8)
    func openingFromASnapshotEqualsAFullReplay(seed: UInt64) async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/ledger"
            let filled = try await fill(path, seed: seed, batches: 30, interval: 37, onClose: true)
            // A short tail of a single new account after the last snapshot.
            let tail = try open(path, Self.configuration(interval: nil, onClose: false))
            var newcomer = Script("newcomer")
            try await tail.appendAll([newcomer.add("p1", "com.example.gem"), newcomer.purchased("p1", "n1")])
            let kept = try tail.currentState()
            await tail.close()
            #expect(kept.position == filled.position + 2)
            let accounts = kept.accountIDs

            let fromSnapshot = try open(path)
            let statistics = fromSnapshot.statistics()
            #expect(statistics.snapshotPosition != nil)
            #expect(statistics.snapshotPosition! < kept.position, "there is a tail after the snapshot")
            #expect(statistics.accountsInMemory == 1, "accounts not in the tail stay on disk")
            #expect(try fromSnapshot.currentState() == kept)
            let viaSnapshot = try projections(fromSnapshot, accounts: accounts)
            #expect(statistics.accounts == accounts.count)
            #expect(statistics.entries == kept.entryCount)
            #expect(statistics.unfinishedEntries == kept.unfinishedCount)
            await fromSnapshot.close()

            let replayed = try open(path, Self.fullReplay)
            #expect(try projections(replayed, accounts: accounts) == viaSnapshot)
            #expect(try replayed.currentState() == kept)
            await replayed.close()

            let log = try LedgerLog.open(at: path)
            #expect(log.verify().isIntact)
            log.close()
        }
    }

    @Test func timeTravelStartsFromTheNewestSnapshotAtOrBefore() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/ledger"
            let kept = try await fill(path, seed: 21, batches: 120, interval: 20)
            let log = try LedgerLog.open(at: path)
            defer { log.close() }
            let snapshots = try log.snapshots()
            #expect(kept.position > 100)
            #expect(snapshots.count == 3, "the last three are kept")
            for position in Set([1, 19, 20, 21, kept.position / 2, kept.position - 1, kept.position] + snapshots.flatMap { [$0.position - 1, $0.position, $0.position + 1] }) where position <= kept.position {
                #expect(try log.state(at: position) == (try log.state(at: position, useSnapshots: false)), "at \(position)")
            }
        }
    }

    @Test func appendsAfterAReopenFromASnapshotBehaveAsWithout() async throws {
        try await withTemporaryDirectory { directory in
            let a = directory + "/a"
            let b = directory + "/b"
            var generator = EventStreamGenerator(seed: 33)
            let first = generator.events(400)
            let second = generator.events(400)
            // a: snapshots, reopened in the middle; b: no snapshots, one session.
            let ledgerA = try Ledger.open(at: a, catalog: wordGameCatalog, configuration: Self.configuration(interval: 25))
            _ = try await ledgerA.append(contentsOf: first)
            await ledgerA.close()
            let reopenedA = try open(a, Self.configuration(interval: 25))
            let resultsA = try await reopenedA.append(contentsOf: second)
            let stateA = try reopenedA.currentState()
            await reopenedA.close()

            let ledgerB = try Ledger.open(at: b, catalog: wordGameCatalog, configuration: Self.configuration(interval: nil, onClose: false))
            _ = try await ledgerB.append(contentsOf: first)
            let resultsB = try await ledgerB.append(contentsOf: second)
            let stateB = try ledgerB.currentState()
            await ledgerB.close()
            #expect(resultsA.map(\.summary) == resultsB.map(\.summary))
            #expect(stateA == stateB)
        }
    }

    @Test func aSnapshotHoldsEveryChangeSinceTheLastOne() async throws {
        try await withLedger(configuration: Self.configuration(interval: nil, onClose: false)) { ledger, _ in
            var s = Script()
            try await ledger.appendAll([s.add("p1", "com.example.tenhints"), s.purchased("p1", "1")])
            #expect(ledger.statistics().accountsChangedSinceSnapshot == 1)
            #expect(try await ledger.writeSnapshot() == 2)
            #expect(ledger.statistics().accountsChangedSinceSnapshot == 0)
            #expect(try await ledger.writeSnapshot() == nil, "nothing changed since")
            #expect(try ledger.balances(of: "u1") == ["hints": 10], "read back from the snapshot")
            try await ledger.appendAll([s.consume("hints", 4)])
            #expect(try ledger.balances(of: "u1") == ["hints": 6])
        }
    }

    // MARK: Snapshots that cannot be trusted

    enum Tampering: String, CaseIterable, Sendable {
        case olderFormat, otherRules, badHeaderChecksum, beyondTheLog
    }

    @Test(arguments: Tampering.allCases)
    func anUnusableSnapshotFallsBackToAFullReplay(_ tampering: Tampering) async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/ledger"
            let kept = try await fill(path, seed: 44, batches: 20, interval: 30, onClose: true)
            try tamperWithNewestHeader(path, tampering, lastPosition: kept.position)

            let log = try LedgerLog.open(at: path)
            let newest = try #require(try log.snapshots().last)
            #expect(newest.problem != nil)
            log.close()

            let reopened = try open(path)
            #expect(try reopened.currentState() == kept)
            // The fresh snapshot written after the full replay replaced the unusable ones.
            let fresh = reopened.statistics().snapshotPosition
            #expect(fresh == kept.position)
            await reopened.close()
            let after = try LedgerLog.open(at: path)
            #expect(try after.snapshots().allSatisfy { $0.problem == nil })
            #expect(after.verify().isIntact)
            after.close()
        }
    }

    private func tamperWithNewestHeader(_ path: String, _ tampering: Tampering, lastPosition: UInt64) throws {
        let storage = try LMDBLedgerStorage(directory: path, configuration: .init())
        defer { storage.close() }
        try storage.write { writer in
            let (position, bytes) = try #require(try writer.snapshotHeaders().last)
            var header = try SnapshotHeader.decode(bytes, key: position)
            switch tampering {
            case .olderFormat:
                var old = header.encode()
                old[0] = 0
                try writer.putSnapshotHeader(resealed(old), position: position)
            case .otherRules:
                header.fingerprint ^= 1
                try writer.putSnapshotHeader(header.encode(), position: position)
            case .badHeaderChecksum:
                var damaged = bytes
                damaged[damaged.count / 2] ^= 0x10
                try writer.putSnapshotHeader(damaged, position: position)
            case .beyondTheLog:
                header.position = lastPosition + 100
                try writer.putSnapshotHeader(header.encode(), position: lastPosition + 100)
            }
        }
    }

    /// Bytes with their trailing CRC-32C recomputed.
    private func resealed(_ bytes: [UInt8]) -> [UInt8] {
        let body = Array(bytes.dropLast(4))
        return body + withUnsafeBytes(of: CRC32C.checksum(body).littleEndian) { Array($0) }
    }

    @Test func aDamagedAccountStateIsRebuiltFromTheAccountsHistory() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/ledger"
            let kept = try await fill(path, seed: 55, batches: 25, interval: 40, onClose: true)
            // Flip a byte in every stored state of one account.
            let victim = kept.accountIDs[0]
            do {
                let storage = try LMDBLedgerStorage(directory: path, configuration: .init())
                try storage.write { writer in
                    for version in try writer.accountStateVersions(victim) {
                        var bytes: [UInt8] = []
                        _ = try writer.accountState(victim, atOrBefore: version) { _, raw in bytes = Array(raw) }
                        bytes[bytes.count / 2] ^= 0x04
                        try writer.putAccountState(bytes, account: victim, version: version)
                    }
                }
                storage.close()
            }
            let reopened = try open(path, Self.configuration(interval: nil, onClose: false))
            #expect(try reopened.projection(of: victim, asOf: newYear) == kept.projection(of: victim, asOf: newYear))
            #expect(try reopened.currentState() == kept)
            await reopened.close()
            let log = try LedgerLog.open(at: path)
            let report = log.verify()
            #expect(report.damage?.kind == .snapshot)
            #expect(try log.state() == kept)
            log.close()
        }
    }

    @Test(arguments: 1...4)
    func rebuildingAnyAccountFromItsHistoryMatchesAFullReplay(seed: UInt64) async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/ledger"
            let kept = try await fill(path, seed: seed &* 7, batches: 30, interval: nil)
            let storage = try LMDBLedgerStorage(directory: path, configuration: .init())
            defer { storage.close() }
            try storage.read { reader in
                for account in kept.accountIDs {
                    let rebuilt = try AccountRebuilder(reader: reader, catalog: wordGameCatalog, names: storage.accountNames).state(of: account, through: kept.position)
                    #expect(rebuilt == kept.accounts[UTF8Key(account)], "account \(account)")
                }
            }
        }
    }
}
