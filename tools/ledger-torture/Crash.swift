import ArgumentParser
import Foundation
import Logging
import PurchaseLedger
import PurchaseLedgerLMDB

extension TortureCommand {
    /// Kills a child that appends, again and again, and checks after each kill that nothing it
    /// was told had been appended is missing.
    struct Crash: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Kill an appending child with SIGKILL at random moments; check the ledger after each kill.",
            discussion: """
                The child appends a long stream (single appends, batches, eight concurrent appenders, snapshots \
                every 250 events) and writes each acknowledgement to a journal right after receiving it. After each \
                kill: verify passes; every acknowledged event is in the log at its acknowledged position; every batch \
                is all there or not at all; and the projections opened from the newest snapshot equal a full replay.
                """)

        @Option(help: "How many times to kill the child.")
        var kills = 200

        @Option(help: "Seed of the workload and of the kill times.")
        var seed: UInt64 = 1

        @Option(help: "Shortest time the child runs before it is killed, in milliseconds.")
        var minimumMilliseconds = 40

        @Option(help: "Longest time the child runs before it is killed, in milliseconds.")
        var maximumMilliseconds = 600

        @Option(help: "Where to keep the ledgers and the journals (default: a new temporary directory).")
        var directory: String?

        @Option(help: "Start a new ledger after this many kills (checks scan the whole log after each kill).")
        var killsPerLedger = 20

        func validate() throws {
            guard kills > 0, killsPerLedger > 0 else { throw ValidationError("--kills and --kills-per-ledger must be at least 1") }
            guard minimumMilliseconds > 0, maximumMilliseconds >= minimumMilliseconds else {
                throw ValidationError("need 0 < --minimum-milliseconds ≤ --maximum-milliseconds")
            }
        }

        func run() async throws {
            let base = directory ?? NSTemporaryDirectory() + "ledger-torture-\(UUID().uuidString)"
            try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true)
            var random = SplitMix(seed: seed &+ 17)
            var totals = Totals()
            let clock = ContinuousClock()
            let started = clock.now
            for run in 1...kills {
                let ledger = base + "/ledger-\((run - 1) / killsPerLedger)"
                let journal = base + "/journal-\(run)"
                var child = try spawnChild(ledger: ledger, run: run, journal: journal)
                let wait = Int(random.next() % UInt64(maximumMilliseconds - minimumMilliseconds + 1)) + minimumMilliseconds
                try await Task.sleep(for: .milliseconds(wait))
                if !child.isRunning {
                    throw TortureFailure("run \(run): the child stopped by itself (wait status \(child.exitStatus())); see \(journal)")
                }
                child.kill()
                _ = child.exitStatus()
                let checked = try await check(ledger: ledger, journal: journal, run: run)
                totals.add(checked)
                print("kill \(run)/\(kills): after \(wait) ms; \(checked.acknowledged) acknowledged events checked, "
                      + "\(checked.batches) batches whole, log at \(checked.position)")
            }
            print("""
                survived \(kills) kills in \(clock.now - started): \(totals.acknowledged) acknowledged events, \
                all in the log at their positions; \(totals.batches) batches, none half-there; \
                projections equal a full replay after every kill; events lost: 0
                """)
            if directory == nil { try? FileManager.default.removeItem(atPath: base) }
        }

        private func spawnChild(ledger: String, run: Int, journal: String) throws -> SpawnedChild {
            let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
            return try SpawnedChild(executable, ["child", "--directory", ledger, "--run", String(run), "--seed", String(seed), "--journal", journal])
        }

        struct Checked {
            var acknowledged = 0
            var batches = 0
            var position: UInt64 = 0
        }

        struct Totals {
            var acknowledged = 0
            var batches = 0

            mutating func add(_ checked: Checked) {
                acknowledged += checked.acknowledged
                batches += checked.batches
            }
        }

        /// The promises, after a kill.
        private func check(ledger: String, journal: String, run: Int) async throws -> Checked {
            var checked = Checked()
            let log = try LedgerLog.open(at: ledger)
            defer { log.close() }
            let report = log.verify()
            if let damage = report.damage {
                throw TortureFailure("run \(run): verify found damage: \(damage)")
            }
            var positions: [String: UInt64] = [:]
            try log.forEachRecord { positions[$0.event.id] = $0.position }
            checked.position = try log.lastPosition()

            let text = (try? String(contentsOfFile: journal, encoding: .utf8)) ?? ""
            // A line cut short by the kill has no newline; it is ignored.
            var lines = text.split(separator: "\n", omittingEmptySubsequences: false)
            if !text.hasSuffix("\n") { lines.removeLast() }
            for line in lines where !line.isEmpty {
                let fields = line.split(separator: " ").map(String.init)
                switch fields.first {
                case "A":
                    let id = fields[1]
                    let position = UInt64(fields[2])!
                    guard positions[id] == position else {
                        throw TortureFailure("run \(run): event \(id) was acknowledged at position \(position), but the log has it at \(positions[id].map(String.init) ?? "no position")")
                    }
                    checked.acknowledged += 1
                case "B":
                    let ids = fields.dropFirst(2)
                    let present = ids.count { positions[$0] != nil }
                    guard present == 0 || present == ids.count else {
                        throw TortureFailure("run \(run): batch \(fields[1]) is half there: \(present) of \(ids.count) events")
                    }
                    checked.batches += 1
                case "X":
                    throw TortureFailure("run \(run): the child reported: \(line)")
                default:
                    continue
                }
            }

            // Projections from the newest snapshot and the tail equal a full replay.
            let replayed = try log.state(useSnapshots: false)
            log.close()
            var configuration = Ledger.Configuration()
            configuration.logger.logLevel = .error
            configuration.readOnly = true
            let opened = try Ledger.open(at: ledger, configuration: configuration)
            let fromSnapshot = try opened.currentState()
            await opened.close()
            guard fromSnapshot == replayed else {
                throw TortureFailure("run \(run): the projections opened from the snapshot differ from a full replay")
            }
            return checked
        }
    }

    /// The appending child (internal).
    struct Child: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Append the torture workload until killed (run by `crash`).", shouldDisplay: false)

        @Option var directory: String
        @Option var run: Int
        @Option var seed: UInt64
        @Option var journal: String

        func run() async throws {
            var configuration = Ledger.Configuration()
            configuration.logger.logLevel = .error
            configuration.snapshotInterval = 250
            // Slices of 32 accounts: kills land in the middle of snapshots too.
            configuration.snapshotSlice = .zero
            configuration.snapshotOnClose = false
            configuration.maximumBatchEvents = 128
            let ledger = try Ledger.open(at: directory, catalog: Workload.catalog, configuration: configuration)
            let output = try Journal(path: journal)
            let seed = self.seed
            let run = self.run
            try await withThrowingTaskGroup(of: Void.self) { group in
                // Lane 1 appends batches; the others append one event at a time.
                for lane in 0..<10 {
                    group.addTask {
                        var workload = Workload(run: run, lane: lane, seed: seed)
                        var batch = 0
                        while true {
                            if lane == 1 {
                                batch += 1
                                var events: [Event] = []
                                for _ in 0..<(1 + workload.next() % 6) { events += workload.flowEvents() }
                                output.write("B r\(run)-b\(batch) " + events.map(\.id).joined(separator: " ") + "\n")
                                let results = try await ledger.append(contentsOf: events)
                                try output.acknowledge(zip(events, results))
                            } else {
                                for event in workload.flowEvents() {
                                    output.write("S \(event.id)\n")
                                    let result = try await ledger.append(contentsOf: [event])
                                    try output.acknowledge(zip([event], result))
                                }
                            }
                        }
                    }
                }
                try await group.waitForAll()
            }
        }
    }
}

/// The child's journal: submissions before they are made, acknowledgements right after.
final class Journal: Sendable {
    let fd: Int32

    init(path: String) throws {
        fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw TortureFailure("cannot write \(path)") }
    }

    /// One `write` per call: lines of concurrent lanes never interleave.
    func write(_ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
    }

    func acknowledge(_ outcomes: some Sequence<(Event, AppendResult)>) throws {
        var text = ""
        for (event, result) in outcomes {
            guard case .success(.appended(let position)) = result else {
                write("X \(event.id) \(result)\n")
                throw TortureFailure("event \(event.id) was not appended: \(result)")
            }
            text += "A \(event.id) \(position)\n"
        }
        write(text)
    }
}

/// SplitMix64, seeded.
struct SplitMix: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D2_49D1_33B8_11EB
        return z ^ (z >> 31)
    }
}
