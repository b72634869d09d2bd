import Testing
@testable import PurchaseLedger

/// What the store reports and what a customer consents to has already happened: an append
/// dated more than a day past the clock is `invalidEvent`, on every backend; and a withdrawal of
/// consent recorded after a consent wins, whatever the dates a client's clock put on them.
struct ClockCheckTests {
    static func hours(_ count: Int64, from now: Timestamp = .now()) -> Timestamp {
        Timestamp(seconds: now.seconds + count * 3600, nanoseconds: now.nanoseconds)
    }

    /// A `storeTransaction` dated 9999-12-31 stayed in force forever: a genuine refund after
    /// it changed nothing.
    @Test(arguments: Backend.available)
    func storeEventsDatedPastTomorrowAreRefusedAndChangeNothing(on backend: Backend) async throws {
        try await withLedger(on: backend) { ledger, _ in
            var u1 = Script("u1")
            try await ledger.appendAll([u1.add("P1", ConsumptionFactsTests.hardWords), u1.purchased("P1", "3001"), u1.finish("P1")])
            let position = ledger.position
            let farFuture = Timestamp(seconds: 253_402_214_400)
            let fact = StoreTransaction(transaction: "3001", product: ConsumptionFactsTests.hardWords)
            var refunded = fact
            refunded.revokedAt = farFuture
            let refused: [Event] = [
                .storeTransaction(id: "s-9999", account: "u1", signedAt: farFuture, fact),
                .storeTransaction(id: "s-revoked-later", account: "u1", signedAt: .now(), refunded),
                .renewalInfo(id: "r-2", account: "u1", signedAt: Self.hours(25), RenewalInfo(originalTransaction: "3001")),
                .consumptionConsent(id: "c-2099", account: "u1", at: Timestamp(seconds: 4_070_908_800), consented: true),
            ]
            for event in refused {
                let outcome = try #require(try await ledger.append(contentsOf: [event]).first)
                guard case .failure(let error) = outcome else {
                    Issue.record("\(event.id) was not refused: \(outcome)")
                    continue
                }
                #expect(error.code == .invalidEvent)
                #expect(error.message.contains("more than a day past the clock"))
            }
            #expect(ledger.position == position)
            // Within a day of the clock (skew) goes in.
            let accepted = try await ledger.append(contentsOf: [.storeTransaction(id: "s-soon", account: "u1", signedAt: Self.hours(23), fact)])
            if case .success(.appended)? = accepted.first {} else { Issue.record("a report 23 hours ahead was refused: \(accepted)") }
        }
    }

    /// Consent `true` dated ahead of a withdrawal dated now kept consent in force: Apple was
    /// told the customer consented after they withdrew.
    @Test(arguments: Backend.available)
    func aWithdrawalRecordedLaterWinsWhateverTheDates(on backend: Backend) async throws {
        try await withLedger(on: backend) { ledger, _ in
            let now = Timestamp.now()
            try await ledger.appendAll([
                .consumptionConsent(id: "c-yes", account: "u1", at: Self.hours(20, from: now), consented: true),
                .consumptionConsent(id: "c-no", account: "u1", at: now, consented: false),
            ])
            #expect(try ledger.projection(of: "u1")?.consumptionConsent == false)
            // A consent dated before the latest consent event recorded does not undo it...
            try await ledger.appendAll([.consumptionConsent(id: "c-yes-again", account: "u1", at: Self.hours(19, from: now), consented: true)])
            #expect(try ledger.projection(of: "u1")?.consumptionConsent == false)
            // ...one dated after every one recorded does; a snapshot keeps the answer.
            try await ledger.appendAll([.consumptionConsent(id: "c-yes-later", account: "u1", at: Self.hours(21, from: now), consented: true)])
            #expect(try ledger.projection(of: "u1")?.consumptionConsent == true)
            _ = try await ledger.writeSnapshot()
            #expect(try ledger.currentState().projection(of: "u1")?.consumptionConsent == true)
        }
    }
}
