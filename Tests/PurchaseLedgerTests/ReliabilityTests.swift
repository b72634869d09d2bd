import Foundation
import LMDB
import Synchronization
import Testing
@testable import PurchaseLedger
@testable import PurchaseLedgerLMDB
import LedgerTestSupport

/// Storage faults, corruption and concurrency: what production does to a ledger.
struct ReliabilityTests {
    // MARK: Storage faults

    @Test func aFullLedgerKeepsItsEventsAndAppendsAgainOnceTheLimitIsRaised() async throws {
        var configuration = Ledger.Configuration.testing
        configuration.snapshotOnClose = false
        var limited = LMDBOptions()
        limited.initialMapSize = 256 << 10
        limited.maximumSize = 1 << 20
        try await withTemporaryDirectory { directory in
            let path = directory + "/ledger"
            let ledger = try Ledger.open(at: path, catalog: wordGameCatalog, configuration: configuration, options: limited)
            var full: StorageError?
            var batch = 0
            while full == nil {
                batch += 1
                let events = (0..<500).map { Event.paymentAdded(id: "e\(batch)-\($0)", account: "u\($0)", at: newYear, payment: "p\(batch)", product: "com.example.gem") }
                do { _ = try await ledger.append(contentsOf: events) } catch let error as StorageError { full = error }
            }
            #expect(full?.code == .storageFull)
            let stored = ledger.position
            let before = try ledger.history(account: "u7").count
            await ledger.close()

            var raised = limited
            raised.maximumSize = 8 << 20
            let reopened = try Ledger.open(at: path, configuration: configuration, options: raised)
            #expect(reopened.position == stored)
            #expect(try reopened.history(account: "u7").count == before)
            let more = try await reopened.append(Event.paymentAdded(id: "after", account: "u7", at: newYear, payment: "after", product: "com.example.gem"))
            #expect(more == .appended(position: stored + 1))
            await reopened.close()
            let log = try LedgerLog.open(at: path)
            #expect(log.verify().isIntact)
            log.close()
        }
    }

    /// On a real, small file system (a tmpfs, where this machine lets the tests mount one).
    @Test func aFullFileSystemIsStorageFullAndRecoverable() async throws {
        try await withTemporaryDirectory { directory in
            let mountPoint = directory + "/small"
            try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: true)
            guard shell("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", mountPoint) == 0 else {
                print("skipped: this machine does not let the tests mount a tmpfs")
                return
            }
            defer { _ = shell("umount", mountPoint) }
            var configuration = Ledger.Configuration.testing
            configuration.snapshotOnClose = false
            var largeMap = LMDBOptions()
            largeMap.initialMapSize = 64 << 20
            let path = mountPoint + "/ledger"
            let ledger = try Ledger.open(at: path, catalog: wordGameCatalog, configuration: configuration, options: largeMap)
            var full: StorageError?
            var batch = 0
            while full == nil, batch < 1000 {
                batch += 1
                let events = (0..<200).map { Event.paymentAdded(id: "e\(batch)-\($0)", account: "u\($0)", at: newYear, payment: "p\(batch)", product: "com.example.gem") }
                do { _ = try await ledger.append(contentsOf: events) } catch let error as StorageError { full = error }
            }
            #expect(full?.code == .storageFull, "\(String(describing: full)) \(String(describing: full?.cause))")
            let stored = ledger.position
            #expect(stored > 0)
            // Room again: the same ledger appends.
            #expect(shell("mount", "-o", "remount,size=16m", mountPoint) == 0)
            let more = try await ledger.append(Event.paymentAdded(id: "after", account: "u1", at: newYear, payment: "after", product: "com.example.gem"))
            #expect(more == .appended(position: stored + 1))
            await ledger.close()
            let log = try LedgerLog.open(at: path)
            #expect(log.verify().isIntact)
            log.close()
        }
    }

    private func shell(_ arguments: String...) -> Int32 {
        guard let process = try? ChildProcess("/usr/bin/env", arguments) else { return -1 }
        return process.waitUntilExit().status
    }

    // MARK: Corruption

    /// A ledger with a snapshot at 100 and 60 events after it, closed without a new snapshot.
    private func ledgerWithTail(_ path: String) async throws -> [LogRecord] {
        var configuration = Ledger.Configuration.testing
        configuration.snapshotInterval = nil
        configuration.snapshotOnClose = false
        let ledger = try Ledger.open(at: path, catalog: wordGameCatalog, configuration: configuration)
        var s = Script("tail")
        var events: [Event] = []
        for index in 0..<80 { events += [s.add("p\(index)", "com.example.tenhints"), s.purchased("p\(index)", "t\(index)")] }
        try await ledger.appendAll(Array(events[0..<100]))
        try await ledger.writeSnapshot()
        try await ledger.appendAll(Array(events[100...]))
        var records: [LogRecord] = []
        for try await record in ledger.records() { records.append(record) }
        await ledger.close()
        return records
    }

    @Test func aDamagedTailStopsTheOpenWithAClearError() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/ledger"
            let records = try await ledgerWithTail(path)
            let target = records[129]   // position 130, after the snapshot at 100
            try flipByte(at: LiveBytes.record(at: target.position, in: path) + 7, in: path + "/data.mdb")
            let error = #expect(throws: StorageError.self) { try Ledger.open(at: path, configuration: .testing) }
            #expect(error?.code == .damaged)
            #expect(error?.position == 130)
            let log = try LedgerLog.open(at: path)
            #expect(log.verify().damage?.position == 130)
            log.close()
        }
    }

    @Test func damageBeforeTheSnapshotIsFoundByVerifyAndByAFullReplay() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/ledger"
            let records = try await ledgerWithTail(path)
            let target = records[41]
            try flipByte(at: LiveBytes.record(at: target.position, in: path) + 7, in: path + "/data.mdb")
            // The snapshot still answers (the damaged record is behind it)…
            let ledger = try Ledger.open(at: path, configuration: .testing)
            #expect(try ledger.balances(of: "tail") == ["hints": 800])
            await ledger.close()
            // …but the audit paths refuse the damaged log.
            let log = try LedgerLog.open(at: path)
            let report = log.verify()
            #expect(report.damage?.kind == .checksum)
            #expect(report.damage?.position == 42)
            #expect(throws: StorageError.self) { try log.state(useSnapshots: false) }
            log.close()
        }
    }

    @Test func aRecordThatPassesItsChecksumButDoesNotDecodeIsUndecodable() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/ledger"
            _ = try await ledgerWithTail(path)
            let storage = try LMDBLedgerStorage(directory: path, configuration: .init())
            try storage.write { writer in
                let lmdb = writer as! LMDBLedgerStorage.Writer
                // Version 1, position 50, an unknown event tag, then a valid CRC.
                var body: [UInt8] = [1, 50, 99, 0, 0]
                body += withUnsafeBytes(of: CRC32C.checksum(body).littleEndian) { Array($0) }
                try (lmdb.txn as! LMDB.WriteTransaction).put(body, in: lmdb.tables.log, forKey: UInt64(50))
            }
            storage.close()
            let log = try LedgerLog.open(at: path)
            let report = log.verify()
            #expect(report.damage?.kind == .undecodable)
            #expect(report.damage?.position == 50)
            log.close()
        }
    }

    /// In the event-id index's table, `events`, where the ids of the log's tail move when they
    /// are many (before, a small ledger's are only in their records).
    @Test func aFlippedByteInAnIndexIsAnIndexMismatch() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/ledger"
            let records = try await ledgerWithTail(path)
            try LiveBytes.moveIndexTail(in: path)
            // The live entry of the event-id index (not the id inside the record).
            let target = records[70]
            try flipByte(at: LiveBytes.eventID(target.event.id, in: path) + target.event.id.utf8.count - 1, in: path + "/data.mdb")
            let log = try LedgerLog.open(at: path)
            let report = log.verify()
            #expect(report.damage?.kind == .indexMismatch)
            #expect(report.damage?.position == target.position)
            log.close()
        }
    }

    private func flipByte(at offset: Int, in file: String) throws {
        var bytes = try fileBytes(file)
        bytes[offset] ^= 0x08
        try writeFile(file, bytes)
    }

    // MARK: Concurrency

    /// 64 tasks append purchase flows (buy ten hints, spend 3, sometimes a refund) while 16
    /// tasks read. Every read is one consistent state: for each account, the balance equals
    /// the credits of its purchases, minus their refunds, minus 3 for each consumption, and
    /// each purchase was consumed or is the one about to be.
    @Test func readersAlwaysSeeAConsistentState() async throws {
        var configuration = Ledger.Configuration.testing
        configuration.snapshotInterval = 500
        try await withLedger(configuration: configuration) { ledger, _ in
            let progress = Progress()
            try await withThrowingTaskGroup(of: Void.self) { group in
                for task in 0..<64 {
                    group.addTask {
                        var script = Script("user-\(task % 32)")
                        script.count = task * 10_000
                        for flow in 0..<12 {
                            let payment = "p\(task)-\(flow)"
                            let transaction = "t\(task)-\(flow)"
                            let events = [script.add(payment, "com.example.tenhints"), script.purchased(payment, transaction),
                                          script.finish(payment), script.consume("hints", 3)]
                            for event in events { _ = try await ledger.append(event) }
                            if flow % 4 == 3 { _ = try await ledger.append(script.revoke(transaction)) }
                        }
                    }
                }
                for reader in 0..<16 {
                    group.addTask {
                        var account = reader
                        while progress.running.load(ordering: .relaxed) {
                            account = (account + 1) % 32
                            try Self.checkConsistent(ledger, account: "user-\(account)")
                            progress.reads.add(1, ordering: .relaxed)
                            await Task.yield()
                        }
                    }
                }
                // Wait for the appenders (the first 64 tasks), then stop the readers.
                var finished = 0
                while finished < 64 {
                    try await group.next()
                    finished += 1
                }
                progress.running.store(false, ordering: .relaxed)
                try await group.waitForAll()
            }
            #expect(progress.reads.load(ordering: .relaxed) > 100)
            for account in 0..<32 { try Self.checkConsistent(ledger, account: "user-\(account)") }
            #expect(try ledger.state(at: ledger.position) == (try ledger.currentState()))
        }
    }

    private final class Progress: Sendable {
        let running = Atomic<Bool>(true)
        let reads = Atomic<Int>(0)
    }

    private static func checkConsistent(_ ledger: Ledger, account: String) throws {
        try ledger.live.withAccount(UTF8Key(account)) { state, _, isRevoked in
            var purchases: Int64 = 0
            var refunded: Int64 = 0
            for entry in state.entries.values where entry.state == .purchased {
                purchases += 1
                if let transaction = entry.transaction, try isRevoked(UTF8Key(transaction)) { refunded += 1 }
            }
            let balance = state.balances[UTF8Key("hints")] ?? 0
            let spent = 10 * purchases - 10 * refunded - balance
            #expect(spent % 3 == 0, "account \(account): balance \(balance) after \(purchases) purchases, \(refunded) refunds")
            // Each appender buys, then spends; several appenders share an account.
            #expect(spent / 3 <= purchases && spent >= 0, "account \(account): \(spent / 3) consumptions for \(purchases) purchases")
        }
    }
}
