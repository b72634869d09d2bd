import Testing
@testable import PurchaseLedger

/// The facts a refund request is answered from: read at a log position, from the account's own
/// history, on every backend; and the consent in force, whatever order consents arrive in.
struct ConsumptionFactsTests {
    static let tenHints = "com.example.tenhints"
    static let hardWords = "com.example.hardwords"

    @Test(arguments: Backend.available)
    func factsAreReadAtThePositionAsked(on backend: Backend) async throws {
        try await withLedger(on: backend) { ledger, _ in
            var u1 = Script("u1")
            try await ledger.appendAll([
                u1.add("P1", Self.tenHints, quantity: 2), u1.purchased("P1", "1001"), u1.finish("P1"),
                .consumptionConsent(id: "consent-1", account: "u1", at: newYear, consented: true),
                u1.consume("hints", 5),
            ])
            let beforeSpending = ledger.position
            try await ledger.appendAll([u1.consume("hints", 10)])

            // 20 hints credited; 5 spent by the first position, 15 by the last.
            let early = try ledger.consumptionFacts(of: "u1", transaction: "1001", atPosition: beforeSpending)
            #expect(early == ConsumptionFacts(
                account: "u1", transaction: "1001", position: beforeSpending, consented: true, delivery: .delivered,
                productType: .consumable, consumedShare: 25_000))
            let now = try ledger.consumptionFacts(of: "u1", transaction: "1001", atPosition: ledger.position)
            #expect(now.consumedShare == 75_000)
            // Before the consent was recorded, there was none.
            #expect(try ledger.consumptionFacts(of: "u1", transaction: "1001", atPosition: 3).consented == nil)
            // Before the purchase, the ledger knew nothing of the transaction.
            #expect(try ledger.consumptionFacts(of: "u1", transaction: "1001", atPosition: 1).delivery == .notRecorded)
            #expect(throws: StorageError.self) { try ledger.consumptionFacts(of: "u1", transaction: "1001", atPosition: ledger.position + 1) }
            // The same read as a projection: the balance then.
            #expect(try ledger.projection(of: "u1", atPosition: beforeSpending)?.balances == ["hints": 15])
            #expect(try ledger.projection(of: "nobody", atPosition: ledger.position) == nil)
        }
    }

    @Test func deliveryFollowsTheEntryAndItsDownloads() async throws {
        try await withLedger { ledger, _ in
            var u1 = Script("u1")
            try await ledger.appendAll([
                // Finished: delivered.
                u1.add("P1", Self.hardWords), u1.purchased("P1", "2001"), u1.download("P1", "d1", .finished, progress: 1), u1.finish("P1"),
                // Purchased, never finished.
                u1.add("P2", Self.tenHints), u1.purchased("P2", "2002"),
                // A download that failed, then finished anyway by the app.
                u1.add("P3", Self.hardWords), u1.purchased("P3", "2003"), u1.download("P3", "d1", .failed), u1.finish("P3"),
                // Spent: every hint this purchase credited.
                u1.consume("hints", 10),
            ])
            let at = ledger.position
            func facts(_ transaction: String) throws -> ConsumptionFacts {
                try ledger.consumptionFacts(of: "u1", transaction: transaction, atPosition: at)
            }
            #expect(try facts("2001").delivery == .delivered)
            #expect(try facts("2001").consumedShare == nil)
            #expect(try facts("2002").delivery == .notFinished)
            #expect(try facts("2002").consumedShare == 100_000)
            #expect(try facts("2003").delivery == .downloadFailed)
            #expect(try facts("9999").delivery == .notRecorded)
            #expect(try facts("9999").productType == nil)
        }
    }

    /// Consents carry when the customer answered: the last answer holds, whatever order the
    /// events are appended in, and a snapshot keeps it.
    @Test func theLatestConsentHoldsWhateverTheOrderOfArrival() async throws {
        let yes = Event.consumptionConsent(id: "c-yes", account: "u1", at: Timestamp(seconds: newYear.seconds + 60), consented: true)
        let no = Event.consumptionConsent(id: "c-no", account: "u1", at: Timestamp(seconds: newYear.seconds + 120), consented: false)
        for order in [[yes, no], [no, yes]] {
            try await withLedger { ledger, _ in
                try await ledger.appendAll(order)
                #expect(try ledger.projection(of: "u1")?.consumptionConsent == false)
                #expect(try ledger.projection(of: "u1")?.json(position: 2).contains("\"consumptionConsent\": false") == true)
                _ = try await ledger.writeSnapshot()
                #expect(try ledger.currentState().projection(of: "u1")?.consumptionConsent == false)
            }
        }
    }

    @Test func theRefundRequestEventsRoundTrip() throws {
        let events: [Event] = [
            .consumptionConsent(id: "c1", account: "u1", at: newYear, consented: true),
            .consumptionRequest(id: "n1/consumption-request", account: "u1", signedAt: newYear, ConsumptionRequest(
                transaction: "1001", reason: "UNINTENDED_PURCHASE", environment: .sandbox)),
            .consumptionAnswer(id: "n1/consumption-request/answer", account: "u1", at: newYear, ConsumptionAnswer(
                request: "n1/consumption-request", transaction: "1001", outcome: .accepted, deliveryStatus: "DELIVERED",
                consumptionPercentage: 25_000, refundPreference: "DECLINE", sampleContentProvided: false, status: 202)),
        ]
        #expect(events.map(\.jsonLine) == [
            #"{"id":"c1","type":"consumptionConsent","account":"u1","at":"2026-01-01T00:00:00Z","consented":true}"#,
            #"{"id":"n1/consumption-request","type":"consumptionRequest","account":"u1","at":"2026-01-01T00:00:00Z","transaction":"1001","reason":"UNINTENDED_PURCHASE","environment":"Sandbox"}"#,
            #"{"id":"n1/consumption-request/answer","type":"consumptionAnswer","account":"u1","at":"2026-01-01T00:00:00Z","request":"n1/consumption-request","transaction":"1001","outcome":"accepted","deliveryStatus":"DELIVERED","consumptionPercentage":25000,"refundPreference":"DECLINE","sampleContentProvided":false,"status":202}"#,
        ])
        var handles = FirstMentionHandles()
        for event in events {
            #expect(try Event(jsonLine: event.jsonLine) == event)
            let record = handles.record(event, position: 7)
            #expect((try? handles.decode(record, position: 7)) == event)
        }
        // Checked like every event: a missing or out-of-range field is `invalidEvent`.
        for line in [
            #"{"id":"c1","type":"consumptionConsent","account":"u1","at":"2026-01-01T00:00:00Z"}"#,
            #"{"id":"c1","type":"consumptionConsent","account":"u1","at":"2026-01-01T00:00:00Z","consented":"yes"}"#,
            #"{"id":"a1","type":"consumptionAnswer","account":"u1","at":"2026-01-01T00:00:00Z","request":"r","transaction":"1","outcome":"maybe"}"#,
            #"{"id":"a1","type":"consumptionAnswer","account":"u1","at":"2026-01-01T00:00:00Z","request":"r","transaction":"1","outcome":"accepted","consumptionPercentage":100001}"#,
            #"{"id":"a1","type":"consumptionAnswer","account":"u1","at":"2026-01-01T00:00:00Z","request":"r","transaction":"1","outcome":"accepted","status":99}"#,
            #"{"id":"r1","type":"consumptionRequest","account":"u1","at":"2026-01-01T00:00:00Z","transaction":""}"#,
        ] {
            #expect(throws: LedgerError.self, "\(line)") { try Event(jsonLine: line) }
        }
    }
}
