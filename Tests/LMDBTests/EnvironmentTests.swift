import LedgerTestSupport
import Testing
@testable import LMDB

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The safe LMDB layer against the real liblmdb, one temporary directory per test.
struct EnvironmentTests {
    struct Tables {
        var numbers: Table<UInt64, String>
        var names: Table<String, UInt64>
        var blobs: Table<UInt64, [UInt8]>
    }

    private func withEnvironment<R>(
        _ configure: (inout Environment.Configuration) -> Void = { _ in },
        _ body: (Environment, Tables, String) throws -> R
    ) throws -> R {
        var template = Array("/tmp/lmdb-test-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw LMDBError(code: .invalidArgument, operation: "mkdtemp") }
        let directory = String(cString: made)
        defer {
            unlink(directory + "/data.mdb")
            unlink(directory + "/lock.mdb")
            rmdir(directory)
        }
        var configuration = Environment.Configuration()
        configure(&configuration)
        let environment = try Environment(directory: directory, configuration: configuration)
        defer { environment.close() }
        let tables = try environment.openTables { opener in
            Tables(numbers: try opener.table("numbers"), names: try opener.table("names"), blobs: try opener.table("blobs"))
        }
        return try body(environment, tables, directory)
    }

    @Test func writesAndReadsTypedValues() throws {
        try withEnvironment { environment, tables, _ in
            try environment.write { txn throws in
                try txn.put("one", in: tables.numbers, forKey: 1)
                try txn.put("two", in: tables.numbers, forKey: 2)
                try txn.put(1, in: tables.names, forKey: "one")
                // A write transaction reads its own writes.
                #expect(try txn.value(in: tables.numbers, forKey: 2) == "two")
            }
            try environment.read { txn throws in
                #expect(try txn.value(in: tables.numbers, forKey: 1) == "one")
                #expect(try txn.value(in: tables.numbers, forKey: 3) == nil)
                #expect(try txn.value(in: tables.names, forKey: "one") == 1)
                #expect(try txn.count(tables.numbers) == 2)
                #expect(try txn.contains(tables.numbers, key: 2))
            }
        }
    }

    @Test func insertRefusesExistingKeysAndAppendRefusesOutOfOrderKeys() throws {
        try withEnvironment { environment, tables, _ in
            try environment.write { txn throws in
                #expect(try txn.insert("a", in: tables.numbers, forKey: 1))
                #expect(try !txn.insert("b", in: tables.numbers, forKey: 1))
                try txn.append("c", in: tables.numbers, forKey: 5)
                let error = #expect(throws: LMDBError.self) { try txn.append("d", in: tables.numbers, forKey: 4) }
                #expect(error?.code == .keyExists)
                #expect(error?.message.isEmpty == false)
            }
        }
    }

    @Test func bigEndianKeysScanInNumericOrder() throws {
        try withEnvironment { environment, tables, _ in
            try environment.write { txn throws in
                for key: UInt64 in [300, 2, 70_000, 1, 256] { try txn.put("\(key)", in: tables.numbers, forKey: key) }
            }
            var keys: [UInt64] = []
            try environment.read { txn throws in
                try txn.scan(tables.numbers, from: 2) { key, _ in
                    keys.append(try UInt64(lmdbBytes: key))
                    return true
                }
                #expect(try txn.lastKey(tables.numbers) == 70_000)
            }
            #expect(keys == [2, 256, 300, 70_000])
        }
    }

    @Test func aThrowingWriteLeavesNothing() throws {
        struct Stop: Error {}
        try withEnvironment { environment, tables, _ in
            #expect(throws: Stop.self) {
                try environment.write { txn throws in
                    try txn.put("lost", in: tables.numbers, forKey: 1)
                    throw Stop()
                }
            }
            try environment.read { txn throws in #expect(try txn.count(tables.numbers) == 0) }
        }
    }

    @Test func aDiscardedWriteDoesNotTouchTheFile() throws {
        try withEnvironment { environment, tables, directory in
            try environment.write { txn throws in try txn.put("kept", in: tables.numbers, forKey: 1) }
            let before = try contents(directory + "/data.mdb")
            try environment.write { txn throws in
                try txn.put("dropped", in: tables.numbers, forKey: 2)
                txn.discard()
            }
            #expect(try contents(directory + "/data.mdb") == before)
            try environment.read { txn throws in #expect(try txn.count(tables.numbers) == 1) }
        }
    }

    @Test func theMapGrowsByItselfAndTheWriteRunsAgain() throws {
        try withEnvironment({ $0.initialMapSize = 64 << 10 }) { environment, tables, _ in
            var attempts = 0
            let value = String(repeating: "v", count: 1000)
            try environment.write { txn throws in
                attempts += 1
                for key in 0..<UInt64(2000) { try txn.put(value, in: tables.numbers, forKey: key) }
            }
            #expect(attempts > 1, "the first attempt must have hit MDB_MAP_FULL")
            let info = try environment.info()
            #expect(info.growthCount >= 1)
            #expect(info.mapSize >= 2 << 20)
            try environment.read { txn throws in #expect(try txn.count(tables.numbers) == 2000) }
        }
    }

    /// The span `releaseEveryReadPage` lets go of is addresses in the map: when the map is
    /// mapped again, at a growth, they point elsewhere (perhaps at this process's heap, which
    /// `MADV_DONTNEED` would zero), so the span is forgotten first.
    @Test func theSpanOfReadPagesIsForgottenWhenTheMapGrows() throws {
        try withEnvironment({ $0.initialMapSize = 64 << 10 }) { environment, tables, _ in
            try environment.write { txn throws in try txn.put("small", in: tables.numbers, forKey: 1) }
            try environment.read { txn throws in #expect(try txn.value(in: tables.numbers, forKey: 1) == "small") }
            #expect(environment.readSpan.current != nil, "the read joined the environment's span")
            let value = String(repeating: "v", count: 1000)
            try environment.write { txn throws in
                for key in 2..<UInt64(2000) { try txn.put(value, in: tables.numbers, forKey: key) }
            }
            #expect(try environment.info().growthCount >= 1)
            #expect(environment.readSpan.current == nil, "the growth forgot the old map's span")
            try environment.read { txn throws in
                #expect(try txn.value(in: tables.numbers, forKey: 1999) == value)
                txn.releaseEveryReadPage()
                #expect(try txn.value(in: tables.numbers, forKey: 1) == "small")
            }
        }
    }

    @Test func aMaximumMapSizeEndsGrowthWithMapFull() throws {
        try withEnvironment({ $0.initialMapSize = 64 << 10; $0.maximumMapSize = 256 << 10 }) { environment, tables, _ in
            let value = [UInt8](repeating: 7, count: 4000)
            let error = #expect(throws: LMDBError.self) {
                try environment.write { txn throws in
                    for key in 0..<UInt64(1000) { try txn.put(value, in: tables.blobs, forKey: key) }
                }
            }
            #expect(error?.code == .mapFull)
            let mapSize = try environment.info().mapSize
            #expect(mapSize <= 256 << 10)
        }
    }

    @Test func readersOnManyTasksWhileTheMapGrows() async throws {
        try await withEnvironmentAsync { environment, tables in
            try environment.write { txn throws in try txn.put("seed", in: tables.numbers, forKey: 0) }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<8 {
                    group.addTask {
                        for _ in 0..<300 {
                            try environment.read { txn throws in
                                #expect(try txn.value(in: tables.numbers, forKey: 0) == "seed")
                            }
                            await Task.yield()
                        }
                    }
                }
                group.addTask {
                    let value = String(repeating: "w", count: 2000)
                    for batch in 0..<UInt64(20) {
                        try environment.write { txn throws in
                            for key in 1...UInt64(100) { try txn.put(value, in: tables.numbers, forKey: batch * 1000 + key) }
                        }
                    }
                }
                try await group.waitForAll()
            }
            #expect(try environment.info().growthCount >= 2)
        }
    }

    private func withEnvironmentAsync(_ body: (Environment, Tables) async throws -> Void) async throws {
        var template = Array("/tmp/lmdb-test-XXXXXX".utf8CString)
        let directory = String(cString: mkdtemp(&template)!)
        defer {
            unlink(directory + "/data.mdb")
            unlink(directory + "/lock.mdb")
            rmdir(directory)
        }
        var configuration = Environment.Configuration()
        configuration.initialMapSize = 64 << 10
        let environment = try Environment(directory: directory, configuration: configuration)
        let tables = try environment.openTables { opener in
            Tables(numbers: try opener.table("numbers"), names: try opener.table("names"), blobs: try opener.table("blobs"))
        }
        try await body(environment, tables)
        environment.close()
    }

    /// A scan maps in every page it reads; letting them go takes them out of the process's
    /// resident memory, and the values stay readable (they come back from the page cache).
    @Test func pagesReadAreLetGoAndStayReadable() throws {
        try withEnvironment({ $0.initialMapSize = 64 << 20 }) { environment, tables, directory in
            let values = (0..<2_000 as Range<UInt64>).map { key in [UInt8](repeating: UInt8(truncatingIfNeeded: key), count: 4_000) }
            try environment.write { txn throws in
                for (key, value) in values.enumerated() { try txn.put(value, in: tables.blobs, forKey: UInt64(key)) }
            }
            func readAll(_ txn: ReadTransaction) throws -> Int {
                var matching = 0
                try txn.scan(tables.blobs) { key, value in
                    let key = try UInt64(lmdbBytes: key)
                    if value.count == 4_000, value.allSatisfy({ $0 == UInt8(truncatingIfNeeded: key) }) { matching += 1 }
                    return true
                }
                return matching
            }
            try environment.read { txn throws in
                #expect(try readAll(txn) == 2_000)
                let touched = try residentBytes(ofMappingsOf: directory + "/data.mdb")
                #expect(touched >= 7_000_000, "the scan mapped in the 8 MB it read")
                txn.releaseReadPages()
                #expect(try residentBytes(ofMappingsOf: directory + "/data.mdb") < 1_000_000)
                #expect(try readAll(txn) == 2_000, "the same transaction reads the values again")
            }
        }
    }

    /// Lookups count as reads, as scans do: `releaseReadPages` lets go of the pages they
    /// mapped in. `releaseEveryReadPage` lets go of what every read of the environment handed
    /// out, a transaction's that ended without letting go too, and of what lies between; in a
    /// transaction or, after it, on the environment.
    @Test func lookupsAndEarlierTransactionsReadsAreLetGo() throws {
        try withEnvironment({ $0.initialMapSize = 64 << 20 }) { environment, tables, directory in
            let count: UInt64 = 100_000
            try environment.write { txn throws in
                for key in 0..<count { try txn.put([UInt8](repeating: 7, count: 100), in: tables.blobs, forKey: key) }
            }
            let file = directory + "/data.mdb"
            func lookUpAllOver(_ txn: ReadTransaction) throws {
                // About 2,400 of the table's 2,900 leaves, 10 MB.
                for key in stride(from: 0, to: count, by: 41) {
                    #expect(try txn.withValue(in: tables.blobs, forKey: key) { $0.count } == 100)
                }
                #expect(try residentBytes(ofMappingsOf: file) > 4_000_000, "lookups all over the table mapped much of it")
            }
            try environment.read { txn throws in
                try lookUpAllOver(txn)
                txn.releaseReadPages()
                #expect(try residentBytes(ofMappingsOf: file) < 1_000_000, "the lookups' pages went")
            }
            try environment.read { txn throws in try lookUpAllOver(txn) }
            try environment.read { txn throws in
                #expect(try txn.withValue(in: tables.blobs, forKey: count / 2) { $0.count } == 100)
                txn.releaseReadPages()
                #expect(try residentBytes(ofMappingsOf: file) > 4_000_000, "an earlier transaction's pages are not this one's")
                txn.releaseEveryReadPage()
                #expect(try residentBytes(ofMappingsOf: file) < 1_000_000, "every read's pages went")
                #expect(try txn.withValue(in: tables.blobs, forKey: count - 1) { $0.count } == 100)
            }
            try environment.read { txn throws in try lookUpAllOver(txn) }
            environment.releaseEveryReadPage()
            #expect(try residentBytes(ofMappingsOf: file) < 1_000_000, "the environment let go of every read's pages")
        }
    }

    /// A scan that lets go of its pages as it goes lets go of its own, not of the pages the
    /// lookups made between its values mapped (a replay's reads of states and names, all over
    /// the file: letting go of them made each map again, at a cost that grew with the file).
    /// Those go with every read page once the reads handed out `releasesReadPagesEvery`.
    @Test func aScanLetsGoOfItsOwnPagesNotOfTheLookupsBetweenItsValues() throws {
        try withEnvironment({ $0.initialMapSize = 64 << 20; $0.releasesReadPagesEvery = 20_000_000 }) { environment, tables, directory in
            let blobs: UInt64 = 2_000
            let numbers: UInt64 = 100_000
            try environment.write { txn throws in
                for key in 0..<blobs { try txn.put([UInt8](repeating: 7, count: 4_000), in: tables.blobs, forKey: key) }
                for key in 0..<numbers { try txn.put(String(repeating: "n", count: 100), in: tables.numbers, forKey: key) }
            }
            let file = directory + "/data.mdb"
            func scanLookingUp(_ txn: ReadTransaction, lookingUp: Bool) throws {
                var scanned = 0
                try txn.scan(tables.blobs, releasingPagesEvery: 64 << 10) { key, value in
                    scanned += value.count
                    if lookingUp {
                        // About 2,000 of the numbers' 2,900 leaves, 8 MB.
                        let number = try UInt64(lmdbBytes: key) * (numbers / blobs)
                        #expect(try txn.withValue(in: tables.numbers, forKey: number) { $0.count } == 100)
                    }
                    return true
                }
                #expect(scanned == Int(blobs) * 4_000)
            }
            try environment.read { txn throws in
                try scanLookingUp(txn, lookingUp: true)
                #expect(try residentBytes(ofMappingsOf: file) > 4_000_000, "the lookups' pages stayed: 16.2 MB counted of 20 (8 MB scanned, 2,000 lookups of a page)")
                try scanLookingUp(txn, lookingUp: false)
                #expect(try residentBytes(ofMappingsOf: file) < 1_000_000, "the second scan crossed 20 MB: every read page went")
            }
        }
    }

    /// Lookups alone count too: a read that only looks up (a timeline reading its records by
    /// position) keeps about `releasesReadPagesEvery` resident, not every page it touched.
    @Test func lookupsAloneLetGoOnceTheyHandedOutTheInterval() throws {
        for interval in [nil, 1_000_000] as [Int?] {
            // Read whole: a value's overflow page is mapped when its bytes are read.
            let resident = try residentAfterLookups(lookingUp: 0..<2_000, of: 2_000, valuesOf: 4_000, releasingEvery: interval) {
                $0.count == 4_000 && $0.allSatisfy { $0 == 7 }
            }
            if interval == nil {
                #expect(resident > 7_000_000, "without an interval, the 8 MB looked up stay")
            } else {
                #expect(resident < 2_500_000, "\(resident) bytes stayed resident, past 1 MB and the pages around it")
            }
        }
    }

    /// A lookup of a small value maps the page it lies in: it counts as a page, or lookups of
    /// small values all over a table would keep it all resident before they counted to the
    /// interval.
    @Test func aLookupOfASmallValueCountsAsItsPage() throws {
        for interval in [nil, 1_000_000] as [Int?] {
            // About 2,400 of the table's 2,900 leaves, 10 MB; 240 KB of values.
            let resident = try residentAfterLookups(
                lookingUp: stride(from: 0, to: 100_000, by: 41), of: 100_000, valuesOf: 100, releasingEvery: interval
            ) { $0.count == 100 }
            if interval == nil {
                #expect(resident > 4_000_000, "without an interval, the leaves looked up stay")
            } else {
                #expect(resident < 3_000_000, "\(resident) bytes stayed resident, past 1 MB and the pages around it")
            }
        }
    }

    /// The data file's resident bytes after one read looked up `keys` among `count` values of
    /// `size` bytes (each checked by `check`), in an environment letting go every `interval`.
    private func residentAfterLookups(
        lookingUp keys: some Sequence<UInt64>, of count: UInt64, valuesOf size: Int, releasingEvery interval: Int?,
        check: (UnsafeRawBufferPointer) -> Bool
    ) throws -> Int {
        try withEnvironment({ $0.initialMapSize = 64 << 20; $0.releasesReadPagesEvery = interval }) { environment, tables, directory in
            try environment.write { txn throws in
                for key in 0..<count { try txn.put([UInt8](repeating: 7, count: size), in: tables.blobs, forKey: key) }
            }
            return try environment.read { txn throws in
                for key in keys {
                    #expect(try txn.withValue(in: tables.blobs, forKey: key, check) == true)
                }
                return try residentBytes(ofMappingsOf: directory + "/data.mdb")
            }
        }
    }

    @Test func errorsCarryTheCodeAndLMDBsText() throws {
        var template = Array("/tmp/lmdb-test-XXXXXX".utf8CString)
        let directory = String(cString: mkdtemp(&template)!)
        defer {
            unlink(directory + "/data.mdb")
            rmdir(directory)
        }
        let fd = open(directory + "/data.mdb", O_WRONLY | O_CREAT, 0o644)
        _ = write(fd, Array(repeating: UInt8(0x41), count: 8192), 8192)
        close(fd)
        var configuration = Environment.Configuration()
        configuration.readOnly = true
        let error = #expect(throws: LMDBError.self) { try Environment(directory: directory, configuration: configuration) }
        #expect(error?.code == .invalid)
        #expect(error?.description.contains("mdb_env_open") == true)
        #expect(error?.message == "MDB_INVALID: File is not an LMDB file")

        let missing = #expect(throws: LMDBError.self) { try Environment(directory: directory + "/nope") }
        #expect(missing?.code == .noSuchFile)
    }

    @Test func aClosedEnvironmentRefusesTransactions() throws {
        try withEnvironment { environment, tables, _ in
            environment.close()
            #expect(throws: LMDBError.self) { try environment.read { txn throws in try txn.count(tables.numbers) } }
        }
    }

    private func contents(_ path: String) throws -> [UInt8] {
        let fd = open(path, O_RDONLY)
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count <= 0 { return bytes }
            bytes += chunk[0..<count]
        }
    }
}
