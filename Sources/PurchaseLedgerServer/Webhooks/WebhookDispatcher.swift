import AsyncHTTPClient
import CoreMetrics
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import PurchaseLedger

/// Delivers one endpoint's feed (docs/FEEDS.md): each change POSTed with Standard Webhooks'
/// headers, at least once, in order per account; accounts do not wait for each other. A change
/// not acknowledged (2xx) is retried with exponential backoff and jitter; after `maxAttempts` it
/// is parked and the account's later changes go on. Progress is stored in the ledger every
/// `progressInterval` while it moves, and one server at a time delivers (a lease in the
/// ledger's storage).
actor WebhookDispatcher {
    let endpoint: ServerConfiguration.Webhook
    private let ledger: Ledger
    /// The derivation of the feed in the endpoint's scope, shared with the scope's other readers.
    private let hub: ChangeFeedHub
    private let client: HTTPClient
    private let signature: WebhookSignature
    private let logger: Logger
    private let metrics: WebhookMetrics
    private let holder = UUID().uuidString
    private let timing: Timing
    /// Changes read ahead and not done, at most.
    static let window = 1000
    /// How often moved progress is stored: one write for every change done in between, instead
    /// of one each (the ledger's one writer commits appends too). A server killed loses at most
    /// this much progress, and sends those changes again.
    static let progressInterval = Duration.milliseconds(100)

    /// The configuration's timings (docs/FEEDS.md).
    struct Timing: Sendable {
        /// Later retries double it, up to four hours, with jitter.
        var firstRetry: Duration
        /// For an attempt's head, and then for its body.
        var attemptTimeout: TimeAmount
        /// Renewed every third of it.
        var leaseSeconds: Int64
    }

    // One delivery session's state.
    private var queues: [String: [LedgerChange]] = [:]
    /// Read and not done yet, in cursor order.
    private var outstanding: [FeedCursor] = []
    /// Done after the checkpoint, in cursor order.
    private var done: [FeedCursor] = []
    private var checkpoint = FeedCursor.start
    /// The greatest cursor this session read: `done` entries beyond it (done in an earlier
    /// session) cannot move the checkpoint, since changes before them may not be read yet.
    private var readThrough = FeedCursor.start
    /// The checkpoint or the done changes moved since progress was last stored.
    private var progressMoved = false
    /// The ledger's forget generation when the session began: a forget since makes what the
    /// session holds (changes, cursors) name old names, so it ends (`ForgetRestart`) and a new
    /// one reads the feed again from the stored checkpoint, which the forget renamed.
    private var generation: UInt64 = 0

    /// A forget ended the session: nothing it holds is sent, parked, stored or logged after it.
    private struct ForgetRestart: Error {}

    /// Throws `ForgetRestart` once a forget happened since the session began.
    private func checkNoForget() throws {
        guard ledger.forgetGeneration == generation else { throw ForgetRestart() }
    }

    init(
        endpoint: ServerConfiguration.Webhook, ledger: Ledger, hub: ChangeFeedHub, client: HTTPClient, timing: Timing,
        metricsFactory: any MetricsFactory, logger: Logger
    ) throws {
        guard let key = endpoint.key else { throw ServerConfigurationError("webhook \"\(endpoint.name)\": bad secret") }
        self.endpoint = endpoint
        self.ledger = ledger
        self.hub = hub
        self.client = client
        self.signature = WebhookSignature(key: key)
        self.timing = timing
        var logger = logger
        logger[metadataKey: "webhook"] = "\(endpoint.name)"
        self.logger = logger
        metrics = WebhookMetrics(endpoint: endpoint.name, factory: metricsFactory)
    }

    /// Delivers while this server holds the endpoint's lease; otherwise waits for it.
    func run() async throws {
        while !Task.isCancelled {
            var leased = false
            do {
                leased = try await takeLease()
            } catch {
                logger.error("the webhook's lease could not be read or taken; trying again", metadata: ["error": "\(error)"])
            }
            if leased {
                do {
                    try await deliverWhileLeased()
                } catch let end as LeaseEnd {
                    switch end {
                    case .takenByAnother:
                        logger.warning("another server took the webhook's lease; this one stops delivering")
                    case .expiredBeforeRenewal:
                        logger.warning("the webhook's lease could not be renewed before it expired; this one stops delivering")
                    }
                } catch is CancellationError {
                    throw CancellationError()
                } catch {
                    logger.error("webhook delivery failed; it starts again from its checkpoint", metadata: ["error": "\(error)"])
                }
            }
            try await Task.sleep(for: .milliseconds(timing.leaseSeconds * 1000 / 3))
        }
    }

    // MARK: The lease

    /// Why this server stopped delivering while it meant to go on.
    enum LeaseEnd: Error {
        /// Another server holds the lease (seen when renewing it or in a fenced write).
        case takenByAnother
        /// Renewing did not commit before the lease ran out (an overloaded writer, say): the
        /// holder stops then, since from that instant another server may take it over.
        case expiredBeforeRenewal
    }

    /// Until when, on this server's monotonic clock, its lease surely holds: the lease's
    /// length from before the write that took or renewed it, which ends no later than the
    /// expiry that write stored.
    private var leaseHeldUntil = ContinuousClock.now
    private var holdsLease = false

    /// Takes or renews the lease when free, expired, or this server's.
    private func takeLease() async throws -> Bool {
        let key = WebhookState.leaseKey(endpoint.name)
        let (holder, leaseSeconds) = (self.holder, timing.leaseSeconds)
        let asked = ContinuousClock.now
        let taken = try await ledger.updateFeedState { state in
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            if let lease = try WebhookState.decode(WebhookState.Lease.self, try state.value(key), key: key),
               lease.holder != holder, lease.until > now {
                return false
            }
            try state.set(key, WebhookState.encode(WebhookState.Lease(holder: holder, until: now + leaseSeconds * 1000)))
            return true
        }
        if taken {
            leaseHeldUntil = asked + .seconds(leaseSeconds)
            if !holdsLease { metrics.leasesTaken.increment() }
            holdsLease = true
            metrics.leaseHeld.record(1)
        }
        return taken
    }

    /// Renews the lease, or ends delivery (cancelling attempts in flight) when another server
    /// holds it or when it runs out before the renewal commits: at no instant do two servers
    /// deliver, however slow the writer.
    private func renewLease() async throws {
        let expiry = leaseHeldUntil
        let renewed = try await withThrowingTaskGroup(of: Bool?.self) { group in
            group.addTask { try await self.takeLease() }
            group.addTask {
                try await Task.sleep(until: expiry, clock: .continuous)
                return nil
            }
            let first = try await group.next() ?? nil
            group.cancelAll()
            return first
        }
        switch renewed {
        case true?: return
        case false?: throw LeaseEnd.takenByAnother
        case nil: throw LeaseEnd.expiredBeforeRenewal
        }
    }

    private func releaseLease() async {
        let key = WebhookState.leaseKey(endpoint.name)
        let holder = self.holder
        _ = try? await ledger.updateFeedState { state in
            if try WebhookState.decode(WebhookState.Lease.self, try state.value(key), key: key)?.holder == holder {
                try state.set(key, nil)
            }
        }
        holdsLease = false
        metrics.leaseHeld.record(0)
    }

    // MARK: Delivering

    /// Delivers while renewing the lease; both stop when either ends: the lease lost, or
    /// delivery failed (the storage, say), which then releases the lease for another server.
    private func deliverWhileLeased() async throws {
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    // A forget starts the session again, from the checkpoint stored before it
                    // (renamed by the forget): what was done since is sent again (at least once).
                    while true {
                        do {
                            try await self.deliver()
                        } catch is ForgetRestart {
                            continue
                        }
                    }
                }
                group.addTask {
                    while true {
                        try await Task.sleep(for: .milliseconds(self.timing.leaseSeconds * 1000 / 3))
                        try await self.renewLease()
                    }
                }
                try await group.next()
                group.cancelAll()
            }
        } catch {
            // What was done since the last store, kept for the next holder (fenced: not once
            // the lease is lost, nor once a forget made it stale), and the lease given up; in a
            // task of its own, which a shutdown has not cancelled (a cancelled task's write is
            // withdrawn).
            await Task {
                try? await self.storeProgress()
                await self.releaseLease()
            }.value
            throw error
        }
    }

    /// Reads the endpoint's feed from its checkpoint and hands each change to its account's
    /// worker, at most `window` ahead of the oldest not yet done.
    private func deliver() async throws {
        // Before anything is read: a forget after this reading ends the session, whatever it
        // read (the stream first, so that no forget falls between the two).
        let forgets = ledger.forgets()
        generation = ledger.forgetGeneration
        let key = WebhookState.progressKey(endpoint.name)
        let progress = try WebhookState.decode(WebhookState.Progress.self, try ledger.feedState(key), key: key) ?? .start
        guard let start = FeedCursor(progress.checkpoint) else {
            throw StorageError(.damaged, "the stored \(key) holds no cursor")
        }
        checkpoint = start
        readThrough = start
        done = progress.done.compactMap { FeedCursor($0) }.sorted()
        outstanding = []
        queues = [:]
        progressMoved = false
        let parkedPrefix = WebhookState.parkedPrefix(endpoint.name)
        let parked = Set(try ledger.feedStates(prefix: parkedPrefix).map(\.key))
        // A child's failure (the storage, say) cancels the session, which starts again from
        // the checkpoint; children are not kept once done. The feed is read by a child too, which
        // names each account that has changes to send: when any child fails, the others are
        // cancelled, the feed's reader among them, which ends the names, and so the session.
        let (starts, starting) = AsyncStream.makeStream(of: String.self)
        try await withThrowingDiscardingTaskGroup { group in
            group.addTask {
                while true {
                    try await self.deliverRetries()
                    try await Task.sleep(for: .seconds(1))
                }
            }
            group.addTask {
                while true {
                    try await Task.sleep(for: Self.progressInterval)
                    try await self.storeProgress()
                }
            }
            group.addTask {
                for await _ in forgets { throw ForgetRestart() }
            }
            group.addTask {
                defer { starting.finish() }
                try await self.read(from: start, parked: parked, parkedPrefix: parkedPrefix) { _ = starting.yield($0) }
            }
            for await account in starts {
                group.addTask { try await self.deliverQueue(of: account) }
            }
        }
    }

    /// Reads the feed from `start` and queues each change for its account, at most `window`
    /// ahead of the oldest not yet done; `starting` is told each account whose queue was idle.
    private func read(
        from start: FeedCursor, parked: Set<String>, parkedPrefix: String, starting deliveringTo: (String) -> Void
    ) async throws {
        try checkNoForget()
        for try await change in hub.changes(following: start) {
            readThrough = change.cursor
            if done.contains(change.cursor) || parked.contains(parkedPrefix + change.id) {
                try await foldIntoCheckpoint()
                continue
            }
            // Room in the window: cancellable, so that a lost lease or a shutdown never waits here.
            while outstanding.count >= Self.window {
                try await Task.sleep(for: .milliseconds(20))
            }
            outstanding.append(change.cursor)
            metrics.backlog.record(outstanding.count)
            let idle = queues[change.account, default: []].isEmpty
            queues[change.account, default: []].append(change)
            if idle { deliveringTo(change.account) }
        }
    }

    /// Sends the account's changes one after the other until its queue is empty.
    private func deliverQueue(of account: String) async throws {
        while let change = queues[account]?.first {
            let body = Array(change.json.utf8)
            let (attempts, failure) = try await attempt(id: change.id, body: body)
            if let failure {
                try await park(id: change.id, account: change.account, attempts: attempts, error: failure, body: body)
            }
            try await markDone(change)
            queues[account]?.removeFirst()
            if queues[account]?.isEmpty == true { queues[account] = nil }
        }
    }

    /// Attempts a delivery up to `maxAttempts` times; the attempts made and, when none was
    /// acknowledged, the last error.
    private func attempt(id: String, body: [UInt8]) async throws -> (attempts: Int, failure: String?) {
        let maximum = endpoint.maxAttempts ?? ServerConfiguration.Webhook.defaultMaxAttempts
        var attempt = 0
        while true {
            attempt += 1
            metrics.attempts.increment()
            try checkNoForget()
            guard let failure = await post(id: id, body: body) else { return (attempt, nil) }
            // An attempt cut short by a shutdown or a lost lease is no refusal: the change is
            // sent again by whoever delivers next, never parked for it.
            try Task.checkCancellation()
            try checkNoForget()
            metrics.failures.increment()
            logger.debug("webhook delivery failed", metadata: ["change": "\(id)", "attempt": "\(attempt)", "error": "\(failure)"])
            guard attempt < maximum else { return (attempt, failure) }
            try await Task.sleep(for: backoff(after: attempt))
        }
    }

    /// Sends again what `ledger webhooks retry` asked for (parked changes, older than what the
    /// feed delivers now): once acknowledged it is gone; refused again, it is parked again.
    private func deliverRetries() async throws {
        let prefix = WebhookState.retryPrefix(endpoint.name)
        for (key, value) in try ledger.feedStates(prefix: prefix) {
            guard let parked = try WebhookState.decode(WebhookState.Parked.self, value, key: key) else { continue }
            let body = Array(parked.body.utf8)
            let (attempts, failure) = try await attempt(id: parked.id, body: body)
            if let failure {
                try await park(id: parked.id, account: parked.account, attempts: attempts, error: failure, body: body)
            }
            try await fencedUpdate { state in try state.set(key, nil) }
        }
    }

    /// Exponential, with jitter: the first retry within seconds, later ones up to four hours apart.
    private func backoff(after attempt: Int) -> Duration {
        let first = timing.firstRetry
        let base = Double(first.components.seconds) + Double(first.components.attoseconds) / 1e18
        let seconds = min(base * pow(2, Double(min(attempt - 1, 30))), 4 * 3600) * Double.random(in: 0.5...1.0)
        return .milliseconds(Int64(seconds * 1000))
    }

    /// One attempt; nil when the endpoint acknowledged (2xx), else what went wrong.
    private func post(id: String, body: [UInt8]) async -> String? {
        var request = HTTPClientRequest(url: endpoint.url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "User-Agent", value: "PurchaseLedger-Webhooks")
        for (name, value) in signature.headers(id: id, timestamp: Int64(Date().timeIntervalSince1970), body: body) {
            request.headers.add(name: name, value: value)
        }
        request.body = .bytes(body)
        do {
            let response = try await client.execute(request, timeout: timing.attemptTimeout)
            // The status decides; the body (at most 64 KiB, read and dropped) may take no longer
            // than the head may, so a receiver trickling or never ending it holds nothing up.
            await Self.drain(response.body, within: timing.attemptTimeout)
            return (200..<300).contains(response.status.code) ? nil : "HTTP \(response.status.code)"
        } catch {
            return "\(error)"
        }
    }

    private static func drain(_ body: HTTPClientResponse.Body, within timeout: TimeAmount) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { _ = try? await body.collect(upTo: 65_536) }
            group.addTask { try? await Task.sleep(for: .nanoseconds(timeout.nanoseconds)) }
            await group.next()
            group.cancelAll()
        }
    }

    private func park(id: String, account: String, attempts: Int, error: String, body: [UInt8]) async throws {
        try checkNoForget()
        metrics.parked.increment()
        logger.warning("a change was parked after its last attempt", metadata: [
            "change": "\(id)", "account": "\(LogSafe.metadata(account))", "attempts": "\(attempts)", "error": "\(error)",
        ])
        let parked = WebhookState.Parked(
            id: id, account: account, attempts: attempts, error: String(error.prefix(1024)),
            parkedAt: Timestamp.now().description, body: String(decoding: body, as: UTF8.self))
        let key = WebhookState.parkedPrefix(endpoint.name) + id
        try await fencedUpdate { state in try state.set(key, WebhookState.encode(parked)) }
    }

    /// Records the change done (acknowledged or parked) and moves the checkpoint past every
    /// change done before the oldest outstanding one (stored within `progressInterval`).
    private func markDone(_ change: LedgerChange) async throws {
        if let index = outstanding.firstIndex(of: change.cursor) { outstanding.remove(at: index) }
        let insertAt = done.firstIndex { $0 > change.cursor } ?? done.count
        done.insert(change.cursor, at: insertAt)
        metrics.delivered.increment()
        try await foldIntoCheckpoint()
    }

    /// Moves the checkpoint over the done changes that nothing read and not done precedes:
    /// below the oldest outstanding change and within what this session read.
    private func foldIntoCheckpoint() async throws {
        let oldest = outstanding.first
        while let first = done.first, first <= readThrough, oldest.map({ first < $0 }) ?? true {
            checkpoint = first
            done.removeFirst()
        }
        metrics.backlog.record(outstanding.count)
        if let oldest = outstanding.first, let waiting = queuedChange(at: oldest) {
            metrics.lagSeconds.record(max(0, Timestamp.now().seconds - waiting.asOf.seconds))
        } else {
            metrics.lagSeconds.record(0)
        }
        progressMoved = true
    }

    /// Stores the checkpoint and the done changes after it, when they moved.
    private func storeProgress() async throws {
        // A forget since the session began is refused in the write itself (`fencedUpdate`).
        guard progressMoved else { return }
        progressMoved = false
        let progress = WebhookState.Progress(checkpoint: checkpoint.description, done: done.map(\.description))
        let key = WebhookState.progressKey(endpoint.name)
        do {
            try await fencedUpdate { state in try state.set(key, WebhookState.encode(progress)) }
        } catch {
            progressMoved = true
            throw error
        }
    }

    /// A write of this endpoint's state, made only while this server holds the lease and no
    /// forget happened since the session began (both checked in the same transaction): a server
    /// that lost the lease never overwrites the new holder's, and a session never stores back a
    /// name a forget renamed in the stored state. (A forget of this process moves the generation
    /// on the writer, between transactions; another process's is read at the start of this one.)
    private func fencedUpdate(_ body: @escaping @Sendable (FeedStateTransaction) throws -> Void) async throws {
        let key = WebhookState.leaseKey(endpoint.name)
        let (holder, generation, ledger) = (self.holder, self.generation, self.ledger)
        try await ledger.updateFeedState { state in
            guard ledger.forgetGeneration == generation else { throw ForgetRestart() }
            guard try WebhookState.decode(WebhookState.Lease.self, try state.value(key), key: key)?.holder == holder else {
                throw LeaseEnd.takenByAnother
            }
            try body(state)
        }
    }

    private func queuedChange(at cursor: FeedCursor) -> LedgerChange? {
        guard let account = cursor.account else { return nil }
        return queues[account]?.first { $0.cursor == cursor }
    }
}

/// Per endpoint: attempts, failures, changes delivered and parked, the backlog (changes read
/// and not done), how far behind it is in seconds, and whether this server holds the lease.
struct WebhookMetrics {
    let attempts: Counter
    let failures: Counter
    let delivered: Counter
    let parked: Counter
    let backlog: Gauge
    let lagSeconds: Gauge
    /// 1 while this server holds the endpoint's lease, else 0.
    let leaseHeld: Gauge
    /// Times this server took the lease (renewals not counted).
    let leasesTaken: Counter

    init(endpoint: String, factory: any MetricsFactory) {
        let dimensions = [("endpoint", endpoint)]
        attempts = Counter(label: "ledger_webhook_attempts_total", dimensions: dimensions, factory: factory)
        failures = Counter(label: "ledger_webhook_failures_total", dimensions: dimensions, factory: factory)
        delivered = Counter(label: "ledger_webhook_done_total", dimensions: dimensions, factory: factory)
        parked = Counter(label: "ledger_webhook_parked_total", dimensions: dimensions, factory: factory)
        backlog = Gauge(label: "ledger_webhook_backlog_changes", dimensions: dimensions, factory: factory)
        lagSeconds = Gauge(label: "ledger_webhook_lag_seconds", dimensions: dimensions, factory: factory)
        leaseHeld = Gauge(label: "ledger_webhook_lease_held", dimensions: dimensions, factory: factory)
        leasesTaken = Counter(label: "ledger_webhook_leases_taken_total", dimensions: dimensions, factory: factory)
    }
}
