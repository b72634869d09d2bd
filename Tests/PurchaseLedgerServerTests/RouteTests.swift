import Foundation
import HTTPTypes
import HummingbirdTesting
import LedgerTestSupport
import PurchaseLedger
@testable import PurchaseLedgerAppStore
@testable import PurchaseLedgerServer
import Testing

/// The routes in process: what each answers, in the shapes the README documents.
struct RouteTests {
    @Test func healthIsAnonymousAndReportsThePosition() async throws {
        try await ServerHarness.run { harness, client in
            _ = try await client.post(events: [Lines.added("e1", "ana", payment: "A1", product: "com.example.tenhints")])
            let answer = try await client.send(.get, "/v1/health")
            #expect(answer.status == .ok)
            #expect(try answer.object["status"] as? String == "ok")
            #expect(try answer.object["position"] as? Int == 1)
        }
    }

    @Test func oneEventAnArrayAndJSONLinesAnswerOneOutcomePerEvent() async throws {
        try await ServerHarness.run { harness, client in
            let one = try await client.send(.post, "/v1/events", key: TestKeys.writer,
                                            body: Lines.added("e1", "ana", payment: "A1", product: "com.example.tenhints"))
            #expect(one.status == .ok)
            #expect(try one.array.count == 1)
            #expect(try one.array[0]["outcome"] as? String == "appended")
            #expect(try one.array[0]["position"] as? Int == 1)

            let array = "[" + [
                Lines.purchased("e2", "ana", payment: "A1", transaction: "t1"),
                Lines.added("e1", "ana", payment: "A1", product: "com.example.tenhints"),
                Lines.finished("e3", "ana", payment: "A9"),
            ].joined(separator: ",") + "]"
            let outcomes = try await client.send(.post, "/v1/events", key: TestKeys.writer, body: array).array
            #expect(outcomes.map { $0["line"] as? Int } == [1, 2, 3])
            #expect(outcomes.map { $0["outcome"] as? String } == ["appended", "duplicate", "rejected"])
            #expect(outcomes[1]["position"] as? Int == 1)
            #expect(outcomes[2]["error"] as? String == "unknownPayment")

            let lines = try await client.post(events: [
                Lines.consumed("e4", "ana", item: "hints", amount: 3),
                "not json",
                Lines.finished("e5", "ana", payment: "A1"),
            ])
            #expect(lines.map { $0["outcome"] as? String } == ["appended", "rejected", "appended"])
            #expect(lines[1]["error"] as? String == "invalidEvent")
            #expect(lines[2]["position"] as? Int == 4)
            #expect(harness.ledger.position == 4)

            let account = try await client.account("ana")
            #expect(account["position"] as? Int == 4)
            #expect(account["balances"] as? [String: Int] == ["hints": 7])
            #expect((account["unfinished"] as? [Any])?.isEmpty == true)
        }
    }

    /// `DELETE /v1/accounts/{account}` forgets the customer: only with `accounts:forget`, once,
    /// and the books stay under the pseudonym it answers.
    @Test func deletingAnAccountForgetsItAndKeepsTheBooks() async throws {
        try await ServerHarness.run { harness, client in
            _ = try await client.post(events: [
                Lines.added("e1", "user/42", payment: "B1", product: "com.example.hardwords"),
                Lines.purchased("e2", "user/42", payment: "B1", transaction: "t1"),
            ])
            let refused = try await client.send(.delete, "/v1/accounts/user%2F42", key: TestKeys.writer)
            #expect(refused.status == .forbidden)
            // A forgotten event posted needs the scope too.
            let posted = try await client.send(.post, "/v1/events", key: TestKeys.writer, body:
                #"{"id": "f1", "type": "forgotten", "account": "user/42", "at": "2026-03-14T08:00:00Z", "requestedBy": "x"}"#)
            #expect(posted.status == .forbidden)
            let tooLong = try await client.send(
                .delete, "/v1/accounts/user%2F42?requestedBy=" + String(repeating: "x", count: 120), key: TestKeys.forgetter)
            #expect(tooLong.status == .badRequest)
            #expect(harness.ledger.position == 2)

            let forgotten = try await client.send(.delete, "/v1/accounts/user%2F42?requestedBy=ticket-9", key: TestKeys.forgetter)
            #expect(forgotten.status == .ok)
            #expect(try forgotten.object["position"] as? Int == 3)
            #expect(try forgotten.object["pseudonym"] as? String == "forgotten/1")
            let gone = try await client.account("user/42")
            #expect(gone["entitlements"] as? [String] == [])
            #expect((gone["unfinished"] as? [Any])?.isEmpty == true)
            let books = try await client.send(.get, "/v1/accounts/forgotten%2F1", key: TestKeys.reader)
            #expect(try books.object["entitlements"] as? [String] == ["com.example.hardwords"])
            let history = try harness.ledger.history(account: "forgotten/1")
            guard case .forgotten(let event)? = history.last?.event.payload else { throw TestFailure("no forgotten event last") }
            #expect(event.requestedBy == "api-key:support ticket-9")

            let again = try await client.send(.delete, "/v1/accounts/user%2F42", key: TestKeys.forgetter)
            #expect(again.status == .notFound)
            #expect(try again.object["error"] as? String == "notFound")
            #expect(harness.ledger.position == 3)
        }
    }

    @Test func accountAnswersWhatTheLedgerProjects() async throws {
        try await ServerHarness.run { harness, client in
            _ = try await client.post(events: [
                Lines.added("e1", "ben", payment: "B1", product: "com.example.pro.month"),
                Lines.purchased("e2", "ben", payment: "B1", transaction: "t1", expiresAt: "2026-04-14T08:00:00Z"),
                Lines.added("e3", "ben", payment: "B2", product: "com.example.hardwords"),
            ])
            let before = try await client.account("ben", asOf: "2026-04-01T00:00:00Z")
            let after = try await client.account("ben", asOf: "2026-05-01T00:00:00Z")
            #expect(before["entitlements"] as? [String] == ["com.example.pro.month"])
            #expect(after["entitlements"] as? [String] == [])
            let unfinished = try #require(before["unfinished"] as? [[String: Any]])
            #expect(unfinished.map { $0["payment"] as? String } == ["B1", "B2"])
            #expect(unfinished.map { $0["state"] as? String } == ["purchased", "added"])

            // The same bytes as the library's own rendering.
            let direct = try #require(try harness.ledger.projection(of: "ben", asOf: Timestamp(rfc3339: "2026-04-01T00:00:00Z")!))
            let answer = try await client.send(.get, "/v1/accounts/ben?asOf=2026-04-01T00:00:00Z", key: TestKeys.reader)
            #expect(answer.body == direct.json(position: 3) + "\n")
        }
    }

    /// `?timeline=true` adds the account's timeline, the library's own; anything but true or
    /// false is a bad request.
    @Test func anAccountAnswersItsTimelineWhenAsked() async throws {
        try await ServerHarness.run { harness, client in
            _ = try await client.post(events: [
                Lines.added("e1", "ben", payment: "B1", product: "com.example.pro.month"),
                Lines.purchased("e2", "ben", payment: "B1", transaction: "t1", expiresAt: "2026-04-14T08:00:00Z"),
            ])
            let plain = try await client.account("ben")
            #expect(plain["timeline"] == nil)
            let answer = try await client.send(.get, "/v1/accounts/ben?timeline=true&asOf=2026-04-01T00:00:00Z", key: TestKeys.reader)
            let direct = try #require(try harness.ledger.projectionAndPosition(
                of: "ben", asOf: Timestamp(rfc3339: "2026-04-01T00:00:00Z")!, timeline: true).projection)
            #expect(answer.body == direct.json(position: 2) + "\n")
            let timeline = try #require(try answer.object["timeline"] as? [[String: Any]])
            let intervals = try #require(timeline.first?["intervals"] as? [[String: Any]])
            #expect(timeline.map { $0["product"] as? String } == ["com.example.pro.month"])
            #expect(intervals.map { $0["fromCause"] as? String } == ["device"])
            #expect(intervals.map { $0["until"] as? String } == ["2026-04-14T08:00:00Z"])
            #expect(intervals.map { $0["untilCause"] as? String } == ["expiry"])

            let nobody = try await client.send(.get, "/v1/accounts/nobody?timeline=true", key: TestKeys.reader)
            #expect(try nobody.object["timeline"] as? [Any] != nil)
            let bad = try await client.send(.get, "/v1/accounts/ben?timeline=yes", key: TestKeys.reader)
            #expect(bad.status == .badRequest)
        }
    }

    @Test func anAccountWithoutEventsOwnsNothing() async throws {
        try await ServerHarness.run { _, client in
            let account = try await client.account("nobody")
            #expect(account["account"] as? String == "nobody")
            #expect(account["entitlements"] as? [String] == [])
            #expect(account["balances"] as? [String: Int] == [:])
        }
    }

    @Test func accountIdsArePercentDecodedFromThePath() async throws {
        try await ServerHarness.run { _, client in
            let account = "user/42 é?#"
            let json = Lines.added("e1", "ACCOUNT", payment: "A1", product: "com.example.tenhints")
                .replacingOccurrences(of: "ACCOUNT", with: "user/42 \\u00e9?#")
            _ = try await client.post(events: [json])
            let answer = try await client.account(account)
            #expect(answer["account"] as? String == account)
            #expect((answer["unfinished"] as? [Any])?.count == 1)
        }
    }

    @Test func historyIsPagedByPosition() async throws {
        try await ServerHarness.run { _, client in
            var lines: [String] = []
            for index in 1...7 {
                lines.append(Lines.added("a\(index)", "ana", payment: "A\(index)", product: "com.example.tenhints"))
                lines.append(Lines.added("b\(index)", "ben", payment: "B\(index)", product: "com.example.tenhints"))
            }
            _ = try await client.post(events: lines)
            var positions: [Int] = []
            var ids: [String] = []
            var from = 1
            var pages = 0
            while true {
                let page = try await client.send(.get, "/v1/accounts/ben/history?from=\(from)&limit=3", key: TestKeys.reader).object
                pages += 1
                let events = try #require(page["events"] as? [[String: Any]])
                positions += events.compactMap { $0["position"] as? Int }
                ids += events.compactMap { ($0["event"] as? [String: Any])?["id"] as? String }
                guard let next = page["next"] as? Int else { break }
                from = next
            }
            #expect(positions == [2, 4, 6, 8, 10, 12, 14])
            #expect(ids == (1...7).map { "b\($0)" })
            #expect(pages == 3)
            // A last page that is exactly full says so.
            let full = try await client.send(.get, "/v1/accounts/ben/history?from=8&limit=4", key: TestKeys.reader).object
            #expect((full["events"] as? [Any])?.count == 4)
            #expect(full["next"] is NSNull)
        }
    }

    @Test(arguments: [
        "/v1/accounts/ana?asOf=yesterday",
        "/v1/accounts/ana/history?from=0",
        "/v1/accounts/ana/history?limit=1001",
        "/v1/accounts/ana/history?limit=-1",
        "/v1/accounts/\(String(repeating: "x", count: 129))",
    ])
    func badQueriesAreAnswered400(_ uri: String) async throws {
        try await ServerHarness.run { _, client in
            let answer = try await client.send(.get, uri, key: TestKeys.reader)
            #expect(answer.status == .badRequest)
            #expect(answer.errorCode == "badRequest")
        }
    }

    @Test func metricsCountAppendsRejectionsAndCommits() async throws {
        try await ServerHarness.run { _, client in
            _ = try await client.post(events: [
                Lines.added("e1", "ana", payment: "A1", product: "com.example.tenhints"),
                Lines.added("e1", "ana", payment: "A1", product: "com.example.tenhints"),
                Lines.finished("e2", "ana", payment: "A1"),
                "{}",
            ])
            let answer = try await client.send(.get, "/metrics", key: TestKeys.metrics)
            #expect(answer.status == .ok)
            #expect(answer.headers[.contentType]?.hasPrefix("text/plain") == true)
            let samples = Dictionary(
                answer.body.split(separator: "\n").filter { !$0.hasPrefix("#") }.compactMap { line -> (String, Double)? in
                    let parts = line.split(separator: " ")
                    return parts.count == 2 ? (String(parts[0]), Double(parts[1]) ?? .nan) : nil
                }, uniquingKeysWith: { $1 })
            #expect(samples["purchaseledger_events_total{outcome=\"appended\"}"] == 1)
            #expect(samples["purchaseledger_events_total{outcome=\"duplicate\"}"] == 1)
            #expect(samples["purchaseledger_events_total{outcome=\"rejected\"}"] == 2)
            #expect(samples["purchaseledger_rejections_total{code=\"notFinishable\"}"] == 1)
            #expect(samples["purchaseledger_rejections_total{code=\"invalidEvent\"}"] == 1)
            #expect(samples["purchaseledger_commit_events_count"] == 1)
            #expect(samples["purchaseledger_commit_events_sum"] == 3)
            #expect(samples["purchaseledger_commit_duration_seconds_count"] == 1)
        }
    }
}
