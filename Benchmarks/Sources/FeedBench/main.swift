import CoreMetrics
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import PurchaseLedgerLMDB
import PurchaseLedgerServer
import Synchronization
import Workloads

// feed-bench OUTPUT.md
//
// The change feed and webhooks (docs/FEEDS.md), measured in one run on durable LMDB ledgers,
// each as a ratio to what it is compared with, and written as a Markdown section that
// tools/bench appends to RESULTS.md:
// 1. Commit to the receiver's 2xx: appends paced at 1,000 per second, each change delivered by
//    the server's webhook delivery (WebhookService, as ledger-server runs it) to a receiver on
//    loopback; p50 and p99 from the append's return to the receiver's answer.
// 2. Reading the feed from the start of a ledger against replaying that ledger.
// 3. Group commit at 64 appenders, with four webhook endpoints delivering and with none.

let output = CommandLine.arguments.dropFirst().first ?? "feed.md"
let logger: Logger = {
    var logger = Logger(label: "feed-bench")
    logger.logLevel = .error
    return logger
}()
let secret = "whsec_" + Data((0..<32).map { UInt8(truncatingIfNeeded: $0 &* 11 &+ 5) }).base64EncodedString()

/// When each position's change was answered (or committed), and how many were.
final class Arrivals: Sendable {
    let byPosition = Mutex<[UInt64: ContinuousClock.Instant]>([:])
    let count = Atomic<Int>(0)
}

/// A webhook endpoint on loopback that answers 204 to every POST at once and notes when.
final class Receiver: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart
    let arrivals: Arrivals
    private var position: UInt64?

    init(arrivals: Arrivals) { self.arrivals = arrivals }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            // The change's id is its cursor: the position, then "." or "@".
            position = head.headers.first(name: "webhook-id").flatMap { id in
                UInt64(id.prefix { $0.isNumber })
            }
        case .body:
            break
        case .end:
            let now = ContinuousClock.now
            if let position {
                arrivals.byPosition.withLock { $0[position] = now }
                arrivals.count.add(1, ordering: .relaxed)
            }
            var headers = HTTPHeaders()
            headers.add(name: "Content-Length", value: "0")
            context.write(wrapOutboundOut(.head(.init(version: .http1_1, status: .noContent, headers: headers))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        }
    }

    /// With `elsewhere`, on a thread of its own at the lowest priority (nice 19), as the
    /// server's webhook delivery is: the receiver stands for a consumer on another machine,
    /// whose work this machine's two cores should not charge to the ledger's appends.
    static func start(arrivals: Arrivals, elsewhere: Bool = false) async throws -> (any Channel, Int) {
        var group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
        if elsewhere {
            let own = MultiThreadedEventLoopGroup(numberOfThreads: 1)
            try await own.next().submit {
                var parameters = sched_param()
                _ = sched_setscheduler(0, 5, &parameters)  // SCHED_IDLE
            }.get()
            group = own
        }
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.pipeline.configureHTTPServerPipeline().flatMap {
                    channel.pipeline.addHandler(Receiver(arrivals: arrivals))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return (channel, channel.localAddress?.port ?? 0)
    }
}

/// A ledger in a scratch directory, and its webhook delivery to `endpoints` endpoints (none: no
/// delivery), running until `stop`.
struct Served: Sendable {
    let ledger: Ledger
    let directory: String
    let delivery: Task<Void, Never>?

    static func open(_ name: String, endpoints: Int, receiverPort: Int) async throws -> Served {
        let directory = Scratch.directory(name)
        var ledgerConfiguration = LedgerFixtures.quiet
        ledgerConfiguration.snapshotInterval = nil
        let ledger = try Ledger.open(at: directory + "/ledger", catalog: BenchmarkEvents.catalog, configuration: ledgerConfiguration)
        var configuration = ServerConfiguration(ledger: directory + "/ledger", keys: [])
        configuration.webhooks = (0..<endpoints).map {
            .init(name: "bench-\($0)", url: "http://127.0.0.1:\(receiverPort)/hook/\($0)", secret: secret, maxAttempts: 1000)
        }
        try configuration.check()
        var delivery: Task<Void, Never>?
        if let service = try WebhookService.configured(
            by: configuration, ledger: ledger, metricsFactory: NOOPMetricsHandler.instance, logger: logger) {
            delivery = Task { try? await service.run() }
        }
        return Served(ledger: ledger, directory: directory, delivery: delivery)
    }

    func stop() async {
        delivery?.cancel()
        _ = await delivery?.value
        await ledger.close()
        Scratch.remove(directory)
    }
}

func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}

func milliseconds(_ duration: Duration) -> Double { seconds(duration) * 1000 }

/// The flows of `tasks` appenders, each its own purchase flows in order, `total` events in all.
func shares(_ tasks: Int, total: Int, tag: String) -> [[Event]] {
    (0..<tasks).map { task in
        var generator = BenchmarkEvents(prefix: "\(tag)-\(task)", seed: UInt64(task + 1))
        return generator.next(total / tasks)
    }
}

// MARK: 1. Commit to 2xx at 1,000 changes per second

func commitToAcknowledgement(rate: Int, seconds duration: Int) async throws -> (p50: Double, p99: Double, max: Double, changes: Int) {
    let arrivals = Arrivals()
    let (channel, port) = try await Receiver.start(arrivals: arrivals)
    let served = try await Served.open("latency", endpoints: 1, receiverPort: port)
    let commits = Arrivals()
    let total = rate * duration
    // One flow per appender task so that the rules never see a flow out of order; the tasks'
    // events are sent at the paced instants, round-robin.
    let flows = shares(50, total: total, tag: "latency")
    let start = ContinuousClock.now
    let interval = Duration.seconds(1) / rate
    try await withThrowingTaskGroup(of: Void.self) { group in
        for (task, events) in flows.enumerated() {
            group.addTask {
                for (index, event) in events.enumerated() {
                    let due = start + interval * (index * flows.count + task)
                    try await Task.sleep(until: due, clock: .continuous)
                    if case .appended(let position) = try await served.ledger.append(event) {
                        let now = ContinuousClock.now
                        commits.byPosition.withLock { $0[position] = now }
                    }
                }
            }
        }
        try await group.waitForAll()
    }
    // Until every committed change that the receiver will get has come (the feed has a change
    // for most events; the ones without never come), or ten seconds of nothing new.
    var last = -1
    var still = 0
    while still < 100 {
        let now = arrivals.count.load(ordering: .relaxed)
        still = now == last ? still + 1 : 0
        last = now
        try await Task.sleep(for: .milliseconds(100))
    }
    let committed = commits.byPosition.withLock { $0 }
    let answered = arrivals.byPosition.withLock { $0 }
    let latencies = answered.compactMap { position, arrival in committed[position].map { milliseconds(arrival - $0) } }.sorted()
    await served.stop()
    try await channel.close().get()
    guard !latencies.isEmpty else { throw CommandLineRunError("no change reached the receiver") }
    func percentile(_ p: Double) -> Double { latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))] }
    return (percentile(0.5), percentile(0.99), latencies.last ?? 0, latencies.count)
}

// MARK: 2. The feed from the start against a replay

func feedAgainstReplay(events: Int) async throws -> (replay: Double, feed: Double, changes: Int) {
    let directory = Scratch.directory("feed")
    defer { Scratch.remove(directory) }
    var configuration = LedgerFixtures.quiet
    configuration.snapshotInterval = nil
    configuration.snapshotOnClose = false
    let ledger = try Ledger.open(at: directory + "/ledger", catalog: BenchmarkEvents.catalog, configuration: configuration)
    var generator = BenchmarkEvents(accounts: max(1000, events / 20))
    for _ in 0..<(events / 10_000) { _ = try await ledger.append(contentsOf: generator.next(10_000)) }
    await ledger.close()

    let log = try LedgerLog.open(at: directory + "/ledger")
    defer { log.close() }
    let clock = ContinuousClock()
    var replayTimes: [Double] = []
    var feedTimes: [Double] = []
    var changes = 0
    for _ in 0..<3 {
        let replayStart = clock.now
        _ = try log.state(useSnapshots: false)
        replayTimes.append(seconds(clock.now - replayStart))
        let feedStart = clock.now
        changes = 0
        for try await _ in log.changes(after: .start, follow: false) { changes += 1 }
        feedTimes.append(seconds(clock.now - feedStart))
    }
    return (Double(events) / replayTimes.sorted()[1], Double(events) / feedTimes.sorted()[1], changes)
}

// MARK: 3. Group commit with four endpoints and with none

func groupCommit(endpoints: Int, appenders: Int, total: Int, receiverPort: Int, arrivals: Arrivals) async throws -> (rate: Double, delivered: Int) {
    let served = try await Served.open("group\(endpoints)", endpoints: endpoints, receiverPort: receiverPort)
    let flows = shares(appenders, total: total, tag: "group\(endpoints)")
    let before = arrivals.count.load(ordering: .relaxed)
    let start = ContinuousClock.now
    try await withThrowingTaskGroup(of: Void.self) { group in
        for events in flows {
            group.addTask { for event in events { _ = try await served.ledger.append(event) } }
        }
        try await group.waitForAll()
    }
    let elapsed = seconds(ContinuousClock.now - start)
    let delivered = arrivals.count.load(ordering: .relaxed) - before
    await served.stop()
    return (Double(appenders * (total / appenders)) / elapsed, delivered)
}

let swiftVersion = ProcessInfo.processInfo.environment["SWIFT_VERSION_LINE"] ?? "Swift"
// FEED_BENCH_ONLY=feed runs the feed against a replay alone (for a profiler), and writes nothing.
if ProcessInfo.processInfo.environment["FEED_BENCH_ONLY"] == "feed" {
    let reading = try await feedAgainstReplay(events: 200_000)
    print("feed \(Int(reading.feed)) events/s, replay \(Int(reading.replay)) events/s")
    exit(0)
}
/// Group commit at 64 appenders with four endpoints delivering and with none, alternating, five
/// of each, so that drift in the machine weighs on both alike: the medians, and the deliveries
/// made during a run with endpoints.
func groupCommitWithAndWithout(receiverElsewhere: Bool) async throws -> (plain: Double, endpoints: Double, delivered: Int) {
    let arrivals = Arrivals()
    let (channel, port) = try await Receiver.start(arrivals: arrivals, elsewhere: receiverElsewhere)
    let runs = 5
    var plain: [Double] = []
    var withEndpoints: [Double] = []
    var delivered = 0
    for _ in 0..<runs {
        plain.append(try await groupCommit(endpoints: 0, appenders: 64, total: 60_000, receiverPort: port, arrivals: arrivals).rate)
        let run = try await groupCommit(endpoints: 4, appenders: 64, total: 60_000, receiverPort: port, arrivals: arrivals)
        withEndpoints.append(run.rate)
        delivered += run.delivered
    }
    try await channel.close().get()
    return (plain.sorted()[runs / 2], withEndpoints.sorted()[runs / 2], delivered / runs)
}
// FEED_BENCH_ONLY=group runs the group commit alone, and writes nothing.
if ProcessInfo.processInfo.environment["FEED_BENCH_ONLY"] == "group" {
    for elsewhere in [true, false] {
        let run = try await groupCommitWithAndWithout(receiverElsewhere: elsewhere)
        print("receiver elsewhere: \(elsewhere): none \(Int(run.plain)) events/s, four endpoints \(Int(run.endpoints)) events/s, ratio \(run.endpoints / run.plain)")
    }
    exit(0)
}
print("feed-bench: commit to 2xx at 1,000 changes/s…")
let latency = try await commitToAcknowledgement(rate: 1000, seconds: 10)
print("feed-bench: the feed against a replay…")
let reading = try await feedAgainstReplay(events: 200_000)
print("feed-bench: group commit with four endpoints and none…")

let elsewhere = try await groupCommitWithAndWithout(receiverElsewhere: true)
let sameThreads = try await groupCommitWithAndWithout(receiverElsewhere: false)

func grouped(_ value: Double) -> String {
    let formatter = NumberFormatter()
    formatter.numberStyle = .decimal
    formatter.maximumFractionDigits = 0
    return formatter.string(from: NSNumber(value: value)) ?? "\(Int(value))"
}

let markdown = """

## The change feed and webhooks

`feed-bench` (Benchmarks/Sources/FeedBench), one run, durable LMDB ledgers, the server's own
webhook delivery (`WebhookService`) to a receiver on loopback answering 204 at once.

| measure | figure | against | goal |
|---|---|---|---|
| commit to the receiver's 2xx, appends paced at 1,000/s for 10 s | p50 \(String(format: "%.1f", latency.p50)) ms, p99 \(String(format: "%.1f", latency.p99)) ms (max \(String(format: "%.1f", latency.max)) ms; \(grouped(Double(latency.changes))) changes) | | p99 under 50 ms |
| reading the feed from the start (\(grouped(200_000)) events, \(grouped(Double(reading.changes))) changes) | \(grouped(reading.feed)) events/s | a full replay: \(grouped(reading.replay)) events/s, ratio \(String(format: "%.2f", reading.feed / reading.replay)) | at least 0.5 |
| group commit, 64 appenders, 60,000 events, four endpoints delivering | \(grouped(elsewhere.endpoints)) events/s (\(grouped(Double(elsewhere.delivered))) deliveries during a run) | none: \(grouped(elsewhere.plain)) events/s, ratio \(String(format: "%.2f", elsewhere.endpoints / elsewhere.plain)) | at least 0.9 |
| the same, the receiver on this process's own threads at normal priority | \(grouped(sameThreads.endpoints)) events/s (\(grouped(Double(sameThreads.delivered))) deliveries during a run) | none: \(grouped(sameThreads.plain)) events/s, ratio \(String(format: "%.2f", sameThreads.endpoints / sameThreads.plain)) | |

Medians of three runs (the latency: one), and of five for the group commit, alternating with and
without endpoints. The server's delivery runs at its default `feedPriority` (Linux's idle class).
In the group commit's first row the receiver runs on a thread of its own in the idle class too,
standing for a consumer on another machine, whose work this machine's two cores should not
charge to the ledger; the second row charges it. \(swiftVersion).

"""
try markdown.write(toFile: output, atomically: true, encoding: .utf8)
print(markdown)
