import Foundation
import PurchaseLedger
import Workloads

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// command-line-bench OUTPUT.jmh.json
//
// What takes seconds an iteration, timed here, child process by child process (wall clock and
// peak memory from wait4), rather than in package-benchmark: it records no throughput for an
// iteration of two seconds or more, and its JMH export then drops the suite. Writes the
// figures in the JMH shape that bench-report reads.
//
// - The `ledger` tool end to end, as a user meets it: the release binary (`LEDGER_BINARY`,
//   built by tools/bench) importing a file of 1,000,000 generated events into a new ledger, and
//   replaying the 1,000,000-event fixture (`replay --json --no-snapshot`).
// - The physical SQLite peer (`SQLITE_PEER_BINARY`, Benchmarks/peers/sqlite-peer.c, compiled
//   by tools/bench): inserting the same file into a new database, 1,000 rows per transaction,
//   and scanning it in position order; what the two `ledger` runs are compared with, timed the
//   same way.
// - The library's full replay: this program again (`--open-without-snapshot PATH`), opening the
//   fixture with `useSnapshots = false`, so that its peak memory is the replay's alone.
// - The same import, replay, insert and scan with both sides on tmpfs (`BENCH_TMPFS`, or
//   /dev/shm), so that the disk decides nothing and the CPU's work is compared; and the whole
//   change feed (`ledger changes`) of the ledger imported there, against its replay.
// - One account with a long history (`LongAccount`), 10,000 and 40,000 events, on tmpfs: the
//   feed of its consumables and the timeline of its renewals and of its consumables, which
//   grow linearly with its history (×4 events should cost about ×4).

/// One run of the binary: wall clock in microseconds and peak resident memory in bytes.
func timedRun(_ binary: String, _ arguments: [String]) throws -> (micros: Double, peakBytes: Double) {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
    let argv = ([binary] + arguments).map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) } }
    let clock = ContinuousClock()
    let start = clock.now
    var pid: pid_t = 0
    let spawned = posix_spawn(&pid, binary, &actions, nil, argv, environ)
    guard spawned == 0 else { throw CommandLineRunError("cannot run \(binary): \(String(cString: strerror(spawned)))") }
    var status: Int32 = 0
    var usage = rusage()
    while wait4(pid, &status, 0, &usage) < 0 {
        guard errno == EINTR else { throw CommandLineRunError("wait4: \(String(cString: strerror(errno)))") }
    }
    let elapsed = clock.now - start
    // WIFEXITED && WEXITSTATUS == 0, spelled out: the macros are not imported.
    guard status & 0x7F == 0, (status >> 8) & 0xFF == 0 else {
        throw CommandLineRunError("\(binary) \(arguments.joined(separator: " ")) failed (wait status \(status))")
    }
    let micros = Double(elapsed.components.seconds) * 1e6 + Double(elapsed.components.attoseconds) / 1e12
    return (micros, Double(usage.ru_maxrss) * 1024)
}

/// A JMH element as package-benchmark writes it, with the metrics bench-report reads.
func element(_ name: String, _ runs: [(micros: Double, peakBytes: Double)]) -> [String: Any] {
    let times = runs.map(\.micros).sorted()
    let median = times[times.count / 2]
    return [
        "benchmark": "package.benchmark.CommandLineBench.\(name.replacingOccurrences(of: " ", with: "_"))",
        "mode": "thrpt",
        "measurementIterations": runs.count,
        "primaryMetric": ["score": 1_000_000 / median, "scorePercentiles": ["50.0": 1_000_000 / median], "scoreUnit": "# / s"],
        "secondaryMetrics": [
            "Time (wall clock)": ["scorePercentiles": ["50.0": median, "100.0": times.last ?? median], "scoreUnit": "μs"],
            "Memory (resident peak)": ["scorePercentiles": ["100.0": runs.map(\.peakBytes).max() ?? 0], "scoreUnit": "#"],
        ],
    ]
}

/// The C SQLite peer's runs on the events file: three inserts into new databases, then five
/// ordered scans of the first one (after a warm-up scan, as the replays have).
func sqlitePeerElements(_ peer: String, events: String) throws -> [[String: Any]] {
    let scanned = Scratch.directory("c-sqlite-scan")
    defer { Scratch.remove(scanned) }
    let scannedDatabase = scanned + "/events.sqlite"
    var inserts = [try timedRun(peer, ["insert", scannedDatabase, events])]
    for _ in 1..<3 {
        let directory = Scratch.directory("c-sqlite-insert")
        defer { Scratch.remove(directory) }
        inserts.append(try timedRun(peer, ["insert", directory + "/events.sqlite", events]))
    }
    _ = try timedRun(peer, ["scan", scannedDatabase])  // warm-up: the page cache
    var scans: [(micros: Double, peakBytes: Double)] = []
    for _ in 0..<5 { scans.append(try timedRun(peer, ["scan", scannedDatabase])) }
    return [
        element("C SQLite peer: insert of 1,000,000 events, 1,000 per transaction", inserts),
        element("C SQLite peer: ordered scan of 1,000,000 rows", scans),
    ]
}

/// Where the tmpfs rows run: `BENCH_TMPFS`, or /dev/shm when it is a directory; nil (no tmpfs
/// rows) otherwise.
func tmpfsRoot() -> String? {
    if let root = ProcessInfo.processInfo.environment["BENCH_TMPFS"], !root.isEmpty { return root }
    var isDirectory: ObjCBool = false
    return FileManager.default.fileExists(atPath: "/dev/shm", isDirectory: &isDirectory) && isDirectory.boolValue ? "/dev/shm" : nil
}

/// A new empty directory under `root`, removed by the caller.
func directory(under root: String, _ name: String) -> String {
    let path = "\(root)/purchase-ledger-bench-\(name)-\(getpid())"
    Scratch.remove(path)
    mkdirPath(path)
    return path
}

/// Both sides on tmpfs: the ledger's import, replay and whole feed, the C peer's insert and scan.
func tmpfsElements(ledger binary: String, peer: String?, root: String) throws -> [[String: Any]] {
    let input = try CommandLineRuns.eventsFile(events: 1_000_000)
    var elements: [[String: Any]] = []
    let kept = directory(under: root, "tmpfs-ledger")
    defer { Scratch.remove(kept) }
    var imports: [(micros: Double, peakBytes: Double)] = []
    for run in 0..<3 {
        let directory = run == 0 ? kept : directory(under: root, "tmpfs-import")
        defer { if run > 0 { Scratch.remove(directory) } }
        imports.append(try timedRun(binary, ["import", "--catalog", input.catalog, directory + "/ledger", input.events]))
    }
    elements.append(element("Command line on tmpfs: ledger import of 1,000,000 events", imports))
    let ledger = kept + "/ledger"
    _ = try timedRun(binary, ["replay", "--json", "--no-snapshot", ledger])
    var replays: [(micros: Double, peakBytes: Double)] = []
    for _ in 0..<5 { replays.append(try timedRun(binary, ["replay", "--json", "--no-snapshot", ledger])) }
    elements.append(element("Command line on tmpfs: ledger replay --json --no-snapshot of 1,000,000 events", replays))
    var feeds: [(micros: Double, peakBytes: Double)] = []
    for _ in 0..<3 { feeds.append(try timedRun(binary, ["changes", "--json", ledger])) }
    elements.append(element("Command line on tmpfs: ledger changes --json of 1,000,000 events", feeds))
    if let peer {
        let scanned = directory(under: root, "tmpfs-sqlite")
        defer { Scratch.remove(scanned) }
        var inserts: [(micros: Double, peakBytes: Double)] = []
        for run in 0..<3 {
            let database = scanned + "/events-\(run).sqlite"
            inserts.append(try timedRun(peer, ["insert", database, input.events]))
        }
        _ = try timedRun(peer, ["scan", scanned + "/events-0.sqlite"])
        var scans: [(micros: Double, peakBytes: Double)] = []
        for _ in 0..<5 { scans.append(try timedRun(peer, ["scan", scanned + "/events-0.sqlite"])) }
        elements.append(element("C SQLite peer on tmpfs: insert of 1,000,000 events, 1,000 per transaction", inserts))
        elements.append(element("C SQLite peer on tmpfs: ordered scan of 1,000,000 rows", scans))
    }
    return elements
}

/// One account of 10,000 and of 40,000 events, imported on tmpfs: its feed (consumables) and its
/// timeline (renewals, consumables), three runs each.
func longAccountElements(ledger binary: String, root: String) throws -> [[String: Any]] {
    var elements: [[String: Any]] = []
    for kind in LongAccount.allCases {
        for events in [10_000, 40_000] {
            let input = try kind.eventsFile(events: events)
            let directory = directory(under: root, "long-\(kind.rawValue)-\(events)")
            defer { Scratch.remove(directory) }
            let ledger = directory + "/ledger"
            _ = try timedRun(binary, ["import", "--catalog", input.catalog, ledger, input.events])
            let count = events.formatted(.number.grouping(.automatic).locale(Locale(identifier: "en_US")))
            var timelines: [(micros: Double, peakBytes: Double)] = []
            for _ in 0..<3 {
                timelines.append(try timedRun(binary, ["replay", "--timeline", "--account", LongAccount.account, ledger]))
            }
            elements.append(element("Long account: ledger replay --timeline, \(kind.rawValue), \(count) events", timelines))
            // A renewal's change lists every purchase before it: the feed of renewals is the
            // square of the history by what it prints (docs/FEEDS.md), not by its work.
            guard kind == .consumables else { continue }
            var feeds: [(micros: Double, peakBytes: Double)] = []
            for _ in 0..<3 { feeds.append(try timedRun(binary, ["changes", "--json", ledger])) }
            elements.append(element("Long account: ledger changes --json, \(kind.rawValue), \(count) events", feeds))
        }
    }
    return elements
}

// A child that builds what the runs read, when missing. Not this process: a child's peak
// memory (wait4's ru_maxrss) counts its parent's at the spawn, and building a fixture takes
// hundreds of megabytes.
if CommandLine.arguments.count == 2, CommandLine.arguments[1] == "--prepare" {
    _ = try CommandLineRuns.eventsFile(events: 1_000_000)
    _ = try await LedgerFixtures.ledger(events: 1_000_000, tail: 0)
    exit(0)
}

// The child of the library's replay: open without a snapshot (a replay of the whole log), close.
if CommandLine.arguments.count == 3, CommandLine.arguments[1] == "--open-without-snapshot" {
    var configuration = LedgerFixtures.quiet
    configuration.readOnly = true
    configuration.useSnapshots = false
    let ledger = try Ledger.open(at: CommandLine.arguments[2], configuration: configuration)
    guard ledger.position > 0 else { throw CommandLineRunError("the fixture at \(CommandLine.arguments[2]) is empty") }
    await ledger.close()
    exit(0)
}

guard CommandLine.arguments.count == 2 else {
    FileHandle.standardError.write(Data("usage: command-line-bench OUTPUT.jmh.json\n".utf8))
    exit(64)
}
var elements: [[String: Any]] = []
let itself = "/proc/self/exe"
_ = try timedRun(itself, ["--prepare"])
if let binary = CommandLineRuns.binary {
    let input = try CommandLineRuns.eventsFile(events: 1_000_000)
    var imports: [(micros: Double, peakBytes: Double)] = []
    for _ in 0..<3 {
        let directory = Scratch.directory("cli-import")
        defer { Scratch.remove(directory) }
        imports.append(try timedRun(binary, ["import", "--catalog", input.catalog, directory + "/ledger", input.events]))
    }
    elements.append(element("Command line: ledger import of 1,000,000 events", imports))

    let fixture = try await LedgerFixtures.ledger(events: 1_000_000, tail: 0)
    _ = try timedRun(binary, ["replay", "--json", "--no-snapshot", fixture])  // warm-up: the page cache
    var replays: [(micros: Double, peakBytes: Double)] = []
    for _ in 0..<5 { replays.append(try timedRun(binary, ["replay", "--json", "--no-snapshot", fixture])) }
    elements.append(element("Command line: ledger replay --json --no-snapshot of 1,000,000 events", replays))
} else {
    FileHandle.standardError.write(Data("LEDGER_BINARY is not set: no command-line figures\n".utf8))
}
if let peer = CommandLineRuns.sqlitePeerBinary {
    elements += try sqlitePeerElements(peer, events: try CommandLineRuns.eventsFile(events: 1_000_000).events)
} else {
    FileHandle.standardError.write(Data("SQLITE_PEER_BINARY is not set: no C SQLite figures\n".utf8))
}
if let binary = CommandLineRuns.binary, let root = tmpfsRoot() {
    elements += try tmpfsElements(ledger: binary, peer: CommandLineRuns.sqlitePeerBinary, root: root)
    elements += try longAccountElements(ledger: binary, root: root)
} else {
    FileHandle.standardError.write(Data("no LEDGER_BINARY or no tmpfs (BENCH_TMPFS, /dev/shm): no tmpfs or long-account figures\n".utf8))
}

let fixture = try await LedgerFixtures.ledger(events: 1_000_000, tail: 0)
_ = try timedRun(itself, ["--open-without-snapshot", fixture])  // warm-up: the page cache
var opens: [(micros: Double, peakBytes: Double)] = []
for _ in 0..<5 { opens.append(try timedRun(itself, ["--open-without-snapshot", fixture])) }
elements.append(element("Ledger: full replay of 1,000,000 events (open without snapshot)", opens))
try JSONSerialization.data(withJSONObject: elements, options: [.prettyPrinted, .sortedKeys])
    .write(to: URL(fileURLWithPath: CommandLine.arguments[1]))
print("command-line-bench: wrote \(elements.count) figures to \(CommandLine.arguments[1])")
