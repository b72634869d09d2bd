import Benchmark
#if canImport(Glibc)
import Glibc
#endif
import PurchaseLedgerLMDB
import PurchaseLedgerPostgres
import Synchronization
import Workloads

/// Every suite measures events per second (`throughput`, with `scalingFactor` set to the events
/// one iteration handles), wall clock, peak resident memory, mallocs and bytes written to disk. Names are
/// "<subject>: <workload>", which `tools/bench` groups into RESULTS.md.
let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        // Bytes the process passed to write calls (/proc/self/io's wchar): pages written per
        // event. Not `writeBytesPhysical` (write_bytes), which counts a whole page-cache folio
        // per page dirtied.
        metrics: [.throughput, .wallClock, .peakMemoryResident, .mallocCountTotal, .writeBytesLogical],
        timeUnits: .microseconds,
        warmupIterations: 1,
        maxDuration: .seconds(5),
        maxIterations: 1000)

    appendBenchmarks(on: .lmdb)
    concurrencyBenchmarks(on: .lmdb, appenders: [1, 8, 64, 256])
    proofTreeBenchmarks(on: .lmdb)
    floorBenchmarks()
    peerBenchmarks()
    openBenchmarks()
    booksBenchmarks()
    if PostgresBench.url != nil { postgresBenchmarks() }
}

/// State a benchmark builds in its setup and uses in its iterations.
final class Box<Value>: @unchecked Sendable {
    var value: Value?
}

/// A ledger backend the same suites run on: the name its figures carry, and how a suite gets a
/// ledger of its own and gives it back.
struct BenchedBackend: Sendable {
    /// "Ledger" (LMDB) or "PostgreSQL ledger": the subject of the benchmark names.
    let subject: String
    /// A new, empty ledger for the suite `name` (letters and digits), and a token for `remove`.
    let open: @Sendable (_ name: String) async throws -> (Ledger, String)
    let remove: @Sendable (_ token: String) async -> Void

    static let lmdb = BenchedBackend(subject: "Ledger", open: { try openScratchLedger($0) }, remove: { Scratch.remove($0) })
    static let postgres = BenchedBackend(
        subject: "PostgreSQL ledger", open: { try await openPostgresLedger($0) }, remove: { await PostgresBench.dropDatabase($0) })
}

func openScratchLedger(_ name: String) throws -> (Ledger, String) {
    let directory = Scratch.directory(name)
    var configuration = LedgerFixtures.quiet
    if getenv("BENCH_NOSYNC") != nil { configuration.durability = .noSync }
    let ledger = try Ledger.open(at: directory + "/ledger", catalog: BenchmarkEvents.catalog, configuration: configuration)
    return (ledger, directory)
}

// MARK: 1–2. The ledger: durable appends (on every backend)

func appendBenchmarks(on backend: BenchedBackend) {
    let single = Box<(Ledger, String, BenchmarkEvents)>()
    Benchmark(
        "\(backend.subject): append, 1 event per commit",
        configuration: .init(scalingFactor: .one, maxDuration: .seconds(5), maxIterations: 5000),
        closure: { benchmark in
            var (ledger, _, events) = single.value!
            let event = events.next(1)[0]
            single.value!.2 = events
            benchmark.startMeasurement()
            _ = try! await ledger.append(event)
            benchmark.stopMeasurement()
        },
        setup: {
            let (ledger, token) = try await backend.open("single")
            single.value = (ledger, token, BenchmarkEvents(prefix: "s"))
        },
        teardown: {
            await single.value!.0.close()
            await backend.remove(single.value!.1)
        })

    for order in BenchmarkEvents.EventIDs.allCases {
        batchedAppendBenchmark(
            on: backend, named: "append, 1,000 events per commit\(order.suiteSuffix)", scratch: "batched\(order.scratchSuffix)",
            events: BenchmarkEvents(prefix: "b", eventIDs: order), extendingTheProofTree: false,
            iterations: order == .inOrder ? ProofTreeComparison.iterations : nil)
    }
}

/// The suites with the proof tree and their twins without it run the same number of
/// iterations, not for the same time: the ledger grows through a suite, and a suite timed out
/// earlier would be measured on a smaller ledger than its twin.
///
/// With the tree, the ledger keeps it as a server whose checkpoints are on does: following
/// the log (`Ledger.followProofTree()`, each commit's leaves worked out on the ledger's
/// background executor while the writer commits the next appends), and an iteration ends only once the tree
/// holds every event of the iterations before the one preceding it (`Target`): the tree is at
/// most two iterations (2,000 events) behind the log, never further, however long the suite.
enum ProofTreeComparison {
    static let iterations = 200

    /// The tree following the log as the server's does (`CheckpointService`): its batches
    /// worked out on the ledger's background executor (`Ledger.Configuration`'s default), not
    /// on the global executor beside the appenders, whose threads the harness holds one of
    /// while it waits for an iteration.
    static func follow(_ ledger: Ledger) -> Task<Void, Never> {
        Task { await ledger.followProofTree() }
    }

    /// The size the tree must reach before an iteration ends: the log's before the iteration
    /// preceding it, so that the tree lags by at most two iterations (2,000 events), and no
    /// iteration waits for the commit of the batch worked out during it. Unchecked:
    /// a suite's iterations run one at a time.
    final class Target: @unchecked Sendable {
        private var previous: UInt64 = 0

        /// `position`: the log's before this iteration.
        func next(_ position: UInt64) -> UInt64 {
            defer { previous = position }
            return previous
        }
    }

    static func configuration(iterations: Int?) -> Benchmark.Configuration {
        guard let iterations else { return .init(scalingFactor: .kilo, maxDuration: .seconds(5), maxIterations: 300) }
        return .init(scalingFactor: .kilo, maxDuration: .seconds(120), maxIterations: iterations)
    }
}

/// 1,000 events a commit, an iteration; with the proof tree following the log
/// (`ProofTreeComparison`). `iterations`: a fixed number of them (`ProofTreeComparison`),
/// else as many as 5 s allow.
func batchedAppendBenchmark(
    on backend: BenchedBackend, named name: String, scratch: String, events: BenchmarkEvents, extendingTheProofTree: Bool,
    iterations: Int? = nil
) {
    let batched = Box<(Ledger, String, BenchmarkEvents)>()
    let following = Box<Task<Void, Never>>()
    let treeTarget = ProofTreeComparison.Target()
    Benchmark(
        "\(backend.subject): \(name)",
        configuration: ProofTreeComparison.configuration(iterations: iterations),
        closure: { benchmark in
            var (ledger, _, events) = batched.value!
            let batch = events.next(1000)
            batched.value!.2 = events
            let target = treeTarget.next(ledger.position)
            benchmark.startMeasurement()
            _ = try! await ledger.append(contentsOf: batch)
            if extendingTheProofTree { try! await ledger.extendProofTree(through: target) }
            benchmark.stopMeasurement()
        },
        setup: {
            let (ledger, token) = try await backend.open(scratch)
            batched.value = (ledger, token, events)
            if extendingTheProofTree { following.value = ProofTreeComparison.follow(ledger) }
        },
        teardown: {
            following.value?.cancel()
            await following.value?.value
            await batched.value!.0.close()
            await backend.remove(batched.value!.1)
        })
}

/// The same appends with the proof tree (docs/FORMAT.md, "The proof tree") following the log,
/// at most two iterations behind (`ProofTreeComparison`): what keeping the tree costs an import
/// and group commit (issue 44's bound: at most a tenth), beside the suites without it in the
/// same run.
func proofTreeBenchmarks(on backend: BenchedBackend) {
    batchedAppendBenchmark(
        on: backend, named: "append, 1,000 events per commit, with the proof tree", scratch: "treebatched",
        events: BenchmarkEvents(prefix: "p"), extendingTheProofTree: true, iterations: ProofTreeComparison.iterations)
    groupCommitBenchmark(
        on: backend, appenders: 64, named: "group commit, 64 concurrent appenders, with the proof tree", scratch: "treeconcurrent",
        prefix: "pc", extendingTheProofTree: true, iterations: ProofTreeComparison.iterations)
}

extension BenchmarkEvents.EventIDs {
    /// What a suite's name says of its ids: nothing when they are in order, as in every suite
    /// before ids in no order were measured.
    var suiteSuffix: String {
        switch self {
        case .inOrder: ""
        case .inNoOrder: ", ids in no order"
        }
    }

    /// The same for a suite's scratch ledger (lower-case letters: PostgreSQL folds a database's
    /// name to them).
    var scratchSuffix: String {
        switch self {
        case .inOrder: ""
        case .inNoOrder: "noorder"
        }
    }
}

// MARK: 3. Group commit: concurrent appenders, one event per call (on every backend)

func concurrencyBenchmarks(on backend: BenchedBackend, appenders: [Int]) {
    for tasks in appenders {
        groupCommitBenchmark(
            on: backend, appenders: tasks, named: "group commit, \(tasks) concurrent appenders", scratch: "concurrent\(tasks)",
            prefix: "c\(tasks)", extendingTheProofTree: false, iterations: tasks == 64 ? ProofTreeComparison.iterations : nil)
    }
}

/// 1,000 events an iteration, one a call, from `tasks` concurrent appenders; with the proof
/// tree following the log (`ProofTreeComparison`).
func groupCommitBenchmark(
    on backend: BenchedBackend, appenders tasks: Int, named name: String, scratch: String, prefix: String, extendingTheProofTree: Bool,
    iterations: Int? = nil
) {
    let state = Box<(Ledger, String)>()
    let following = Box<Task<Void, Never>>()
    let treeTarget = ProofTreeComparison.Target()
    var configuration = ProofTreeComparison.configuration(iterations: iterations)
    if iterations == nil { configuration.maxIterations = 200 }
    Benchmark(
        "\(backend.subject): \(name)",
        configuration: configuration,
        closure: { benchmark in
            let (ledger, _) = state.value!
            // 1,000 events per iteration, shared out among the tasks: each task its own
            // purchase flows, in order. (Dealing one stream's events round-robin split each
            // flow across tasks; when a task's "purchasing" overtook another's "addPayment",
            // the rules rightly answered unknownPayment and the `try!` below trapped: the
            // crash of the full benchmark runs.)
            let run = UInt64.random(in: 0..<UInt64.max)
            let shares = (0..<tasks).map { task in
                var generator = BenchmarkEvents(prefix: "\(prefix)-\(run)-\(task)", seed: UInt64(task + 1))
                return generator.next(1000 / tasks + (task < 1000 % tasks ? 1 : 0))
            }
            let target = treeTarget.next(ledger.position)
            benchmark.startMeasurement()
            await withTaskGroup(of: Void.self) { group in
                for share in shares {
                    group.addTask {
                        for event in share { _ = try! await ledger.append(event) }
                    }
                }
            }
            if extendingTheProofTree { try! await ledger.extendProofTree(through: target) }
            benchmark.stopMeasurement()
        },
        setup: {
            state.value = try await backend.open(scratch)
            if extendingTheProofTree, let ledger = state.value?.0 { following.value = ProofTreeComparison.follow(ledger) }
        },
        teardown: {
            following.value?.cancel()
            await following.value?.value
            await state.value!.0.close()
            await backend.remove(state.value!.1)
        })
}

// MARK: 5. The floor: raw LMDB through CLMDB

func floorBenchmarks() {
    let single = Box<(RawLMDB, String, BenchmarkEvents)>()
    Benchmark(
        "LMDB floor: 1 put per commit",
        configuration: .init(scalingFactor: .one, maxDuration: .seconds(5), maxIterations: 5000),
        closure: { benchmark in
            let record = Array(single.value!.2.next(1)[0].jsonLine.utf8)
            benchmark.startMeasurement()
            single.value!.0.append([record])
            benchmark.stopMeasurement()
        },
        setup: {
            let directory = Scratch.directory("floor-single")
            single.value = (RawLMDB(directory: directory), directory, BenchmarkEvents(prefix: "fs"))
        },
        teardown: { Scratch.remove(single.value!.1) })

    // 1,000 records an iteration, all in one commit (the floor of batched appends) or N to a
    // commit (the floor of group commit with N appenders: the most one commit of theirs holds).
    groupedFloor("LMDB floor: 1,000 puts per commit", perCommit: 1000, maxIterations: 300)
    for perCommit in [8, 64, 256] {
        groupedFloor("LMDB floor: 1,000 puts in commits of \(perCommit)", perCommit: perCommit, maxIterations: 200)
    }

    let disk = Box<DiskFloor>()
    Benchmark(
        "Disk floor: fdatasync of a 4 KiB write",
        configuration: .init(scalingFactor: .one, maxDuration: .seconds(5), maxIterations: 5000),
        closure: { _ in disk.value!.commit() },
        setup: { disk.value = DiskFloor(directory: Scratch.directory("floor-disk")) },
        teardown: { Scratch.remove(disk.value!.directory) })

    let scan = Box<(RawLMDB, String)>()
    Benchmark(
        "LMDB floor: cursor scan of 1,000,000 records",
        configuration: .init(warmupIterations: 1, scalingFactor: .mega, maxDuration: .seconds(10), maxIterations: 10),
        closure: { benchmark in
            blackHole(scan.value!.0.scan())
        },
        setup: {
            let directory = "\(Scratch.root)/floor-scan-1m"
            let lmdb = RawLMDB(directory: try prepared(directory))
            if lmdb.scan() == 0 {
                var generator = BenchmarkEvents(prefix: "fscan")
                for _ in 0..<100 { lmdb.append(generator.next(10_000).map { Array($0.jsonLine.utf8) }) }
            }
            scan.value = (lmdb, directory)
        })
}

/// Raw LMDB appending 1,000 records an iteration, `perCommit` to a durable commit.
func groupedFloor(_ name: String, perCommit: Int, maxIterations: Int) {
    let floor = Box<(RawLMDB, String, BenchmarkEvents)>()
    Benchmark(
        name,
        configuration: .init(scalingFactor: .kilo, maxDuration: .seconds(5), maxIterations: maxIterations),
        closure: { benchmark in
            let records = floor.value!.2.next(1000).map { Array($0.jsonLine.utf8) }
            benchmark.startMeasurement()
            for start in stride(from: 0, to: records.count, by: perCommit) {
                floor.value!.0.append(Array(records[start..<min(start + perCommit, records.count)]))
            }
            benchmark.stopMeasurement()
        },
        setup: {
            let directory = Scratch.directory("floor-\(perCommit)")
            floor.value = (RawLMDB(directory: directory), directory, BenchmarkEvents(prefix: "f\(perCommit)"))
        },
        teardown: { Scratch.remove(floor.value!.1) })
}

/// Makes `directory` exist (kept between runs).
func prepared(_ directory: String) throws -> String {
    if !Scratch.exists(directory) { mkdirPath(directory) }
    return directory
}

// MARK: 6. The peer: SQLite through GRDB

func peerBenchmarks() {
    let single = Box<(SQLitePeer, String, BenchmarkEvents)>()
    Benchmark(
        "SQLite peer: 1 insert per transaction",
        configuration: .init(scalingFactor: .one, maxDuration: .seconds(5), maxIterations: 5000),
        closure: { benchmark in
            let event = single.value!.2.next(1)[0]
            benchmark.startMeasurement()
            try! single.value!.0.insert([(event.id, event.account, Array(event.jsonLine.utf8))])
            benchmark.stopMeasurement()
        },
        setup: {
            let directory = Scratch.directory("sqlite-single")
            single.value = (try SQLitePeer(path: directory + "/events.sqlite"), directory, BenchmarkEvents(prefix: "qs"))
        },
        teardown: { Scratch.remove(single.value!.1) })

    for order in BenchmarkEvents.EventIDs.allCases {
        let batched = Box<(SQLitePeer, String, BenchmarkEvents)>()
        Benchmark(
            "SQLite peer: 1,000 inserts per transaction\(order.suiteSuffix)",
            configuration: .init(scalingFactor: .kilo, maxDuration: .seconds(5), maxIterations: 300),
            closure: { benchmark in
                let rows = batched.value!.2.next(1000).map { ($0.id, $0.account, Array($0.jsonLine.utf8)) }
                benchmark.startMeasurement()
                try! batched.value!.0.insert(rows)
                benchmark.stopMeasurement()
            },
            setup: {
                let directory = Scratch.directory("sqlite-batched\(order.scratchSuffix)")
                batched.value = (try SQLitePeer(path: directory + "/events.sqlite"), directory, BenchmarkEvents(prefix: "qb", eventIDs: order))
            },
            teardown: { Scratch.remove(batched.value!.1) })
    }

    let scan = Box<SQLitePeer>()
    Benchmark(
        "SQLite peer: ordered scan of 1,000,000 rows",
        configuration: .init(warmupIterations: 1, scalingFactor: .mega, maxDuration: .seconds(10), maxIterations: 10),
        closure: { benchmark in
            blackHole(try! scan.value!.scan())
        },
        setup: {
            let directory = try prepared("\(Scratch.root)/sqlite-scan-1m")
            let peer = try SQLitePeer(path: directory + "/events.sqlite")
            if try peer.scan() == 0 {
                var generator = BenchmarkEvents(prefix: "qscan")
                for _ in 0..<100 {
                    try peer.insert(generator.next(10_000).map { ($0.id, $0.account, Array($0.jsonLine.utf8)) })
                }
            }
            scan.value = peer
        })
}

// MARK: 4. Replay: open a 1,000,000-event ledger without a snapshot
// Timed by command-line-bench, in a child process: an iteration takes about two seconds, and
// package-benchmark records no throughput for one of two seconds or more.

// MARK: Open: the newest snapshot plus a 10,000-event tail, at three log lengths

func openBenchmarks() {
    for events in [100_000, 1_000_000, 5_000_000] {
        let path = Box<String>()
        Benchmark(
            "Ledger: open from a snapshot + 10,000-event tail, \(events / 1000)k-event log",
            configuration: .init(warmupIterations: 1, scalingFactor: .one, maxDuration: .seconds(10), maxIterations: 30),
            closure: { benchmark in
                var configuration = LedgerFixtures.quiet
                configuration.readOnly = true
                let ledger = try! Ledger.open(at: path.value!, configuration: configuration)
                blackHole(ledger.position)
                benchmark.stopMeasurement()
                await ledger.close()
            },
            setup: { path.value = try await LedgerFixtures.ledger(events: events, tail: 10_000) })
    }
}

/// The books over 1,000,000 store reports, in one pass (a full replay, then every account
/// added up by month over two years), against the full replay of the same ledger alone: the
/// issue asks the books to run at half the replay's speed or better.
func booksBenchmarks() {
    let events = 1_000_000
    let path = Box<String>()
    let setup: @Sendable () async throws -> Void = { path.value = try await LedgerFixtures.storeLedger(events: events) }
    Benchmark(
        "Ledger: full replay of 1,000,000 store reports",
        configuration: .init(warmupIterations: 1, scalingFactor: .mega, maxDuration: .seconds(20), maxIterations: 5),
        closure: { _ in
            let log = try! LedgerLog.open(at: path.value!)
            blackHole(try! log.state(useSnapshots: false).position)
            log.close()
        },
        setup: setup)
    Benchmark(
        "Ledger: books of 1,000,000 store reports, by month over two years",
        configuration: .init(warmupIterations: 1, scalingFactor: .mega, maxDuration: .seconds(20), maxIterations: 5),
        closure: { _ in
            let log = try! LedgerLog.open(at: path.value!)
            let query = try! BooksQuery(
                from: Timestamp(rfc3339: "2023-01-01T00:00:00Z"), to: Timestamp(rfc3339: "2025-01-01T00:00:00Z"), by: .month,
                at: Timestamp(rfc3339: "2024-01-01T00:00:00Z")!)
            blackHole(try! log.books(query, useSnapshots: false).periods.count)
            log.close()
        },
        setup: setup)
}

// MARK: 7. The PostgreSQL backend, against the LMDB backend above and raw INSERT/SELECT

/// A PostgreSQL ledger in a database of its own, dropped in teardown.
func openPostgresLedger(_ name: String) async throws -> (Ledger, String) {
    let database = "bench_\(name)_\(getpid())"
    let (url, _) = try await PostgresBench.createDatabase(database)
    var configuration = LedgerFixtures.quiet
    configuration.snapshotOnClose = false
    return (try Ledger.open(postgres: url, catalog: BenchmarkEvents.catalog, configuration: configuration), database)
}

func postgresBenchmarks() {
    appendBenchmarks(on: .postgres)
    concurrencyBenchmarks(on: .postgres, appenders: [64, 256])

    let replayURL = Box<String>()
    Benchmark(
        // 100,000 events: package-benchmark's throughput counts whole iterations per second, and
        // an iteration over a million events here takes longer than a second.
        "PostgreSQL ledger: full replay of 100,000 events (open without snapshot)",
        configuration: .init(warmupIterations: 1, scalingFactor: .kilo, maxDuration: .seconds(20), maxIterations: 10),
        closure: { benchmark in
            var configuration = LedgerFixtures.quiet
            configuration.readOnly = true
            configuration.useSnapshots = false
            let ledger = try! Ledger.open(postgres: replayURL.value!, configuration: configuration)
            blackHole(ledger.position)
            benchmark.stopMeasurement()
            await ledger.close()
        },
        setup: { replayURL.value = try await PostgresBench.replayFixture(events: 100_000) })

    let rawSingle = Box<(PostgresPeer, String, BenchmarkEvents)>()
    Benchmark(
        "PostgreSQL raw: 1 insert per transaction",
        configuration: .init(scalingFactor: .one, maxDuration: .seconds(5), maxIterations: 5000),
        closure: { benchmark in
            let event = rawSingle.value!.2.next(1)[0]
            benchmark.startMeasurement()
            try! await rawSingle.value!.0.insert([(event.id, event.account, event.jsonLine)])
            benchmark.stopMeasurement()
        },
        setup: {
            let database = "bench_raw_single_\(getpid())"
            let (url, _) = try await PostgresBench.createDatabase(database)
            rawSingle.value = (try await PostgresPeer(url: url), database, BenchmarkEvents(prefix: "rs"))
        },
        teardown: {
            await rawSingle.value!.0.close()
            await PostgresBench.dropDatabase(rawSingle.value!.1)
        })

    let rawBatched = Box<(PostgresPeer, String, BenchmarkEvents)>()
    Benchmark(
        "PostgreSQL raw: 1,000 inserts per transaction",
        configuration: .init(scalingFactor: .kilo, maxDuration: .seconds(5), maxIterations: 300),
        closure: { benchmark in
            let rows = rawBatched.value!.2.next(1000).map { ($0.id, $0.account, $0.jsonLine) }
            benchmark.startMeasurement()
            try! await rawBatched.value!.0.insert(rows)
            benchmark.stopMeasurement()
        },
        setup: {
            let database = "bench_raw_batched_\(getpid())"
            let (url, _) = try await PostgresBench.createDatabase(database)
            rawBatched.value = (try await PostgresPeer(url: url), database, BenchmarkEvents(prefix: "rb"))
        },
        teardown: {
            await rawBatched.value!.0.close()
            await PostgresBench.dropDatabase(rawBatched.value!.1)
        })

    let rawScan = Box<PostgresPeer>()
    Benchmark(
        "PostgreSQL raw: ordered scan of 1,000,000 rows",
        configuration: .init(warmupIterations: 1, scalingFactor: .mega, maxDuration: .seconds(20), maxIterations: 5),
        closure: { benchmark in
            blackHole(try! await rawScan.value!.scan())
        },
        setup: {
            let (url, existed) = try await PostgresBench.createDatabase("bench_raw_scan_v1_1000000", keepExisting: true)
            let peer = try await PostgresPeer(url: url)
            let rows = existed ? try await peer.scan() : 0
            if rows == 0 {
                var generator = BenchmarkEvents(prefix: "rscan")
                for _ in 0..<100 { try await peer.insert(generator.next(10_000).map { ($0.id, $0.account, $0.jsonLine) }) }
            }
            rawScan.value = peer
        })
}
