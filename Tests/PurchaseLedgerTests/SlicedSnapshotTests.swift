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

    /// A snapshot writes its states in the order the storage keys them (the account's length
    /// in bytes, then its bytes), found by comparing words of leading bytes: it must be that
    /// order, also for accounts that share their first sixteen bytes or differ only in bytes
    /// past 0x7F.
    @Test func statesAreOrderedAsTheStorageKeysThem() {
        var accounts = ["b", "a", "ab", "é", "e\u{301}", "\u{FF}x", "account-0000001", "account-0000000"]
        // Longer than sixteen bytes, sharing them, differing after; and a run that differs only
        // in its last byte, in no order.
        for index in [7, 3, 19, 11, 0, 12] {
            accounts.append("account-00000000-\(index)")
            accounts.append("account-0000000\(index)-tail")
            accounts.append("sixteen-bytes-ab" + String(Unicode.Scalar(UInt8(0x80 + index))))
        }
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            let length = Int.random(in: 1...24, using: &generator)
            accounts.append(String((0..<length).map { _ in Character(Unicode.Scalar(UInt8.random(in: 0x61...0x63, using: &generator))) }))
        }
        accounts = Array(Set(accounts.map { UTF8Key($0) })).map(\.string).shuffled()
        let keys = accounts.map { UTF8Key($0) }
        let ordered = AccountStorageOrder.indicesInOrder(keys).map { keys[$0] }
        // The storage's order, as LMDB compares its keys: a length byte, then the bytes.
        let expected = accounts.sorted { lhs, rhs in
            ([UInt8(lhs.utf8.count)] + Array(lhs.utf8)).lexicographicallyPrecedes([UInt8(rhs.utf8.count)] + Array(rhs.utf8))
        }
        // By their bytes: "é" and "e\u{301}" are equal `String`s.
        #expect(ordered.map { Array($0.string.utf8) } == expected.map { Array($0.utf8) })
    }
}
