import Testing
@testable import PurchaseLedger
@testable import PurchaseLedgerLMDB
import LedgerTestSupport

/// Periodic snapshots are written a slice at a time between commits, so that appends never wait
/// for a whole snapshot. Appends between slices must neither be lost from the next snapshot nor
/// leak into the one being written.
struct SlicedSnapshotTests {
    /// A purchase of ten hints for `account`, under ids unique to `round`.
    static func purchase(_ account: String, round: Int) -> [Event] {
        var script = Script(account)
        script.count = round * 10
        return [
            script.add("p\(round)", "com.example.tenhints"),
            script.purchased("p\(round)", "\(account)-t\(round)"),
            script.consume("hints", 3),
        ]
    }

    static func configuration(cacheCapacity: Int = 64) -> Ledger.Configuration {
        var configuration = Ledger.Configuration.testing
        configuration.snapshotInterval = 300
        configuration.snapshotSlice = .zero  // 32 accounts a slice
        configuration.cachedAccounts = cacheCapacity
        configuration.snapshotOnClose = false
        return configuration
    }

    @Test func appendsBetweenSlicesBelongToTheNextSnapshot() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/ledger"
            var configuration = Self.configuration()
            configuration.snapshotInterval = nil
            let ledger = try Ledger.open(at: path, catalog: wordGameCatalog, configuration: configuration)
            for index in 0..<100 { try await ledger.appendAll(Self.purchase("a\(index)", round: 0)) }
            let position = ledger.position

            // A snapshot of the 100 accounts, of which one slice is written...
            try ledger.onWriter {
                #expect(ledger.live.beginSnapshot())
                let completed = try ledger.live.writeSnapshotSlice(keep: 3, budget: .zero)
                #expect(completed == nil)
                #expect(ledger.live.isWritingSnapshot)
            }
            // ...then appends to accounts of the written slice, of the rest, and a new account
            // (after the first commit, the idle writer writes the remaining slices).
            for account in ["a0", "a99", "newcomer"] { try await ledger.appendAll(Self.purchase(account, round: 1)) }
            try ledger.onWriter {
                while ledger.live.isWritingSnapshot { _ = try ledger.live.writeSnapshotSlice(keep: 3, budget: .zero) }
            }
            #expect(ledger.statistics().snapshotPosition == position)
            #expect(ledger.statistics().accountsChangedSinceSnapshot == 3, "the accounts changed after the snapshot's position")
            // The cache was trimmed to its capacity, never dropping what changed since.
            #expect(ledger.statistics().accountsInMemory <= 64)
            #expect(try ledger.balances(of: "a0") == ["hints": 14])
            #expect(try ledger.balances(of: "newcomer") == ["hints": 7])
            let kept = try ledger.currentState()
            await ledger.close()

            let written = try LedgerLog.open(at: path)
            #expect(try written.snapshots().map(\.accountsWritten) == [100])
            written.close()
            // Opened from that snapshot and the tail, the ledger has everything; the snapshot
            // itself holds the states as of its position (verify compares it with a replay).
            let reopened = try Ledger.open(at: path, configuration: .testing)
            #expect(reopened.statistics().snapshotPosition == position)
            #expect(try reopened.currentState() == kept)
            #expect(try reopened.balances(of: "a0") == ["hints": 14])
            #expect(try reopened.balances(of: "a50") == ["hints": 7])
            // The next snapshot holds what changed between the slices: opened from it, no tail.
            let next = try await reopened.writeSnapshot()
            #expect(next == kept.position)
            await reopened.close()
            let fromNext = try Ledger.open(at: path, configuration: .testing)
            #expect(fromNext.statistics().snapshotPosition == kept.position)
            #expect(fromNext.statistics().accountsInMemory == 0)
            #expect(try fromNext.currentState() == kept)
            await fromNext.close()
            let log = try LedgerLog.open(at: path)
            #expect(log.verify().isIntact)
            log.close()
        }
    }

    @Test func aSnapshotAbandonedHalfwayLeavesThePreviousOneInForce() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/ledger"
            var configuration = Self.configuration()
            configuration.snapshotInterval = nil
            let ledger = try Ledger.open(at: path, catalog: wordGameCatalog, configuration: configuration)
            for index in 0..<50 { try await ledger.appendAll(Self.purchase("a\(index)", round: 0)) }
            let first = try #require(try await ledger.writeSnapshot())
            for index in 0..<100 { try await ledger.appendAll(Self.purchase("a\(index)", round: 1)) }
            // Some of the next snapshot's states are stored, without its header (as after a crash).
            try ledger.onWriter {
                #expect(ledger.live.beginSnapshot())
                let completed = try ledger.live.writeSnapshotSlice(keep: 3, budget: .zero)
                #expect(completed == nil)
                ledger.live.abandonSnapshot()
            }
            #expect(ledger.statistics().snapshotPosition == first)
            let kept = try ledger.currentState()
            await ledger.close()

            let reopened = try Ledger.open(at: path, configuration: Self.configuration())
            #expect(reopened.statistics().snapshotPosition == first)
            #expect(try reopened.currentState() == kept)
            // The next snapshot supersedes the stray states.
            let second = try #require(try await reopened.writeSnapshot())
            #expect(second == kept.position)
            await reopened.close()
            let log = try LedgerLog.open(at: path)
            #expect(log.verify().isIntact)
            #expect(try log.snapshots().map(\.position) == [first, second])
            #expect(try log.state(at: second, useSnapshots: true) == log.state(at: second, useSnapshots: false))
            log.close()
        }
    }

    @Test func periodicSnapshotsUnderConcurrentAppendsEqualAFullReplay() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/ledger"
            let ledger = try Ledger.open(at: path, catalog: wordGameCatalog, configuration: Self.configuration(cacheCapacity: 40))
            try await withThrowingTaskGroup(of: Void.self) { group in
                for lane in 0..<8 {
                    group.addTask {
                        for round in 0..<6 {
                            for index in 0..<40 {
                                _ = try await ledger.append(contentsOf: Self.purchase("l\(lane)-a\((index * 7 + round) % 40)", round: round * 40 + index))
                            }
                        }
                    }
                }
                try await group.waitForAll()
            }
            let kept = try ledger.currentState()
            #expect(kept.position == 8 * 6 * 40 * 3)
            await ledger.close()

            let log = try LedgerLog.open(at: path)
            #expect(try log.snapshots().count >= 2, "periodic snapshots were written")
            #expect(log.verify().isIntact)
            #expect(try log.state(at: kept.position, useSnapshots: false) == kept)
            log.close()
            let reopened = try Ledger.open(at: path, configuration: .testing)
            #expect(try reopened.currentState() == kept)
            await reopened.close()
        }
    }

    /// A snapshot writes its states in the order the storage keys them (LMDB's
    /// `accountStates`), found by comparing a length and two words of leading bytes: it must
    /// be that order where the second word begins and ends and just past it, for bytes past
    /// 0x7F, and for accounts that share their first sixteen bytes.
    @Test func statesAreOrderedAsTheStorageKeysThem() throws {
        var accounts = ["b", "a", "ab", "é", "e\u{301}", "\u{FF}x", "account-0000001", "account-0000000"]
        // Two bytes each, so that the accounts built of them have one length: 0x30, 0x39,
        // 0x7F (below 0x80, as a signed comparison would put 0xC3) and 0xC3 0xA9.
        for bytes in ["00", "99", "\u{7F}x", "é"] {
            accounts.append("eight-by" + bytes + "-tail")  // the second word's first bytes
            accounts.append("sixteen-bytes-" + bytes)  // the second word's last bytes
            accounts.append("sixteen-bytes-ab" + bytes)  // the first bytes past the words
            accounts.append("account-00000000-" + bytes)
        }
        // Seventeen bytes, the sixteen of the words shared: only the last byte decides.
        for byte in ["0", "5", "9", "A", "z", "\u{7F}"] { accounts.append("sixteen-bytes-ab" + byte) }
        var generator = SeededGenerator(seed: 42)
        for _ in 0..<300 {
            let length = Int.random(in: 1...24, using: &generator)
            accounts.append(String((0..<length).map { _ in Character(Unicode.Scalar(UInt8.random(in: 0x61...0x63, using: &generator))) }))
        }
        let keys = Array(Set(accounts.map { UTF8Key($0) })).sorted().shuffled(using: &generator)
        let ordered = AccountStorageOrder.indicesInOrder(keys).map { keys[$0] }
        // The storage's own keys, in LMDB's order (their bytes).
        let expected = try keys.sorted { lhs, rhs in
            let (left, right) = try (#require(LMDBLedgerStorage.historyKey(lhs.string, 0)), #require(LMDBLedgerStorage.historyKey(rhs.string, 0)))
            return left.lexicographicallyPrecedes(right)
        }
        #expect(ordered == expected)
    }
}
