import Foundation
import Synchronization
import HTTPTypes
import HummingbirdTesting
import NIOCore
import PurchaseLedger
@testable import PurchaseLedgerServer
import LedgerTestSupport
import Testing

/// The built `ledger-server`, delivering webhooks to a receiver that verifies each with
/// Python's `standardwebhooks`, killed with SIGKILL at random moments while clients append:
/// every change of the feed (derived afterwards from the log by `ledger changes`) is delivered
/// at least once, each account's first deliveries come in order, a change sent twice is the
/// same bytes, and the last projection each account received is the feed's last for it.
/// `tools/test` kills it 3 times; `tools/torture` 30 (`PURCHASE_LEDGER_WEBHOOK_KILLS`).
@Suite(.serialized)
struct WebhookKillTests {
    static var kills: Int {
        ProcessInfo.processInfo.environment["PURCHASE_LEDGER_WEBHOOK_KILLS"].flatMap { Int($0) } ?? 3
    }

    @Test func killedAtRandomWhileDeliveringItLosesNoChange() async throws {
        guard let python = await WebhookTests.python() else {
            try #require(!AppleVerifier.isRequired, "standardwebhooks is not installed (tools/test installs it)")
            return
        }
        try await withTemporaryDirectory { directory in
            let receiver = try await WebhookReceiver.start(python: python, rules: "{}", in: directory)
            defer { receiver.stop() }
            let record = receiver.record
            var configuration = try LedgerServerTests.configuration(in: directory, port: try LedgerServerTests.freePort())
            configuration.deliverWebhooks(toPort: receiver.port, maxAttempts: 1000)
            // A killed server's lease lapses in three seconds: the next one takes over soon.
            configuration.webhookLeaseSeconds = 3

            var random = SeededGenerator(seed: 26)
            var batch = 0
            var acknowledgedAppends = 0
            for _ in 0..<Self.kills {
                let server = try await BuiltServer.start(configuration, in: directory)
                // Appends keep coming while the server is killed at a random moment.
                let killAfter = Int.random(in: 20...400, using: &random)
                let (round, port) = (batch, configuration.bind.port)
                let acknowledgedSoFar = SharedCount()
                let appends = Task {
                    var sent = 0
                    var acknowledged = 0
                    while !Task.isCancelled {
                        sent += 1
                        if await BuiltServer.post([
                            Lines.added("k\(round)-\(sent)", "acct-\(sent % 7)", payment: "P\(round)-\(sent)", product: "com.example.tenhints"),
                            Lines.purchased("k\(round)-\(sent)-p", "acct-\(sent % 7)", payment: "P\(round)-\(sent)", transaction: "t\(round)-\(sent)"),
                        ], port: port) == .ok {
                            acknowledged += 1
                            acknowledgedSoFar.increment()
                        }
                    }
                    return acknowledged
                }
                // The kill comes at a random moment once appends flow (a loaded machine may
                // take a while to answer the first).
                for _ in 0..<1500 where acknowledgedSoFar.value == 0 {
                    try await Task.sleep(for: .milliseconds(20))
                }
                try await Task.sleep(for: .milliseconds(killAfter))
                server.kill()
                appends.cancel()
                acknowledgedAppends += await appends.value
                batch += 1
            }
            // Once more, to the end: until the receiver has every change of the feed.
            let server = try await BuiltServer.start(configuration, in: directory)
            // Killed also when an expectation below throws: an orphan would keep serving.
            defer { server.kill() }
            // The whole feed, derived from the log by `ledger changes` (a reader beside the
            // server): the server's own feed hub may not have derived all of it yet.
            let whole = try await awaitCommand(builtExecutable("ledger"), ["changes", "-j", directory + "/ledger"])
            #expect(whole.status == 0, "\(whole.error)")
            let feedIDs = whole.text.split(separator: "\n").compactMap {
                (try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])?["id"] as? String
            }
            try #require(!feedIDs.isEmpty, "no change in the feed; \(acknowledgedAppends) appends were acknowledged")
            // Until every change is acknowledged: accounts do not wait for each other, so the
            // feed's last change may come before an earlier one of another account.
            for _ in 0..<3000 {
                let acknowledged = Set(WebhookTests.deliveries(record).filter { $0.status == 204 }.compactMap(\.id))
                if acknowledged.isSuperset(of: feedIDs) { break }
                try await Task.sleep(for: .milliseconds(20))
            }
            server.kill()

            // Nothing is appended after that read: it is the whole feed.
            let feed = whole.text.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            let delivered = WebhookTests.deliveries(record)
            // A killed holder may leave a request cut off mid-body (recorded as cut); every whole one
            // verifies.
            #expect(delivered.allSatisfy { $0.invalid == nil }, "not verified: \(delivered.compactMap(\.invalid))")
            let ids = Set(delivered.compactMap(\.id))
            let lost = feed.compactMap { $0["id"] as? String }.filter { !ids.contains($0) }
            #expect(lost.isEmpty, "lost: \(lost.prefix(10))")
            // Each account's first deliveries in the feed's order.
            let order = Dictionary(uniqueKeysWithValues: feed.enumerated().compactMap { index, change in (change["id"] as? String).map { ($0, index) } })
            var firstSeen: [String: [Int]] = [:]
            var seen: Set<String> = []
            for delivery in delivered {
                guard let id = delivery.id, let account = delivery.account, seen.insert(id).inserted else { continue }
                firstSeen[account, default: []].append(order[id] ?? -1)
            }
            for (account, indices) in firstSeen {
                #expect(indices == indices.sorted(), "\(account) first received out of order")
            }
            // Repeats are the same bytes; the last projection each account got is the feed's last.
            for (id, attempts) in Dictionary(grouping: delivered.filter { $0.id != nil }, by: { $0.id! }) {
                #expect(Set(attempts.compactMap(\.body)).count == 1, "\(id)")
            }
            var lastByAccount: [String: String] = [:]
            for change in feed {
                if let account = change["account"] as? String, let id = change["id"] as? String { lastByAccount[account] = id }
            }
            for (account, id) in lastByAccount {
                let received = delivered.filter { $0.account == account }.compactMap(\.id).max { (order[$0] ?? -1) < (order[$1] ?? -1) }
                #expect(received == id, "\(account)")
            }
            let duplicates = delivered.count - ids.count
            print("webhook kills: \(Self.kills) kills, \(feed.count) changes, \(delivered.count) deliveries, \(duplicates) repeated, \(lost.count) lost")
        }
    }
}

/// A count shared between a task that appends and the test that kills the server.
final class SharedCount: Sendable {
    private let count = Atomic<Int>(0)

    func increment() { count.add(1, ordering: .relaxed) }

    var value: Int { count.load(ordering: .relaxed) }
}
