import Testing
@testable import PurchaseLedger
import LedgerTestSupport

/// The store's dates are valid time (docs/FORMAT.md, "Valid time", "Environments"): each case
/// of issue 25 on every backend, read through the live projections, through one account rebuilt
/// from its history, and through a full replay, which must agree.
struct ValidTimeTests {
    static let catalog = try! Catalog(products: [
        .init(id: "basic", type: .autoRenewable, group: "g"),
        .init(id: "pro", type: .autoRenewable, group: "g"),
        .init(id: "book", type: .nonConsumable),
        .init(id: "gems", type: .consumable, grants: ["gems": 10]),
    ])

    /// 2025-07-01 at `clock` ("10:12", "10:12:00.001"), UTC.
    static func at(_ clock: String) -> Timestamp {
        Timestamp(rfc3339: "2025-07-01T\(clock.count == 5 ? clock + ":00" : clock)Z")!
    }

    static func report(
        _ id: String, _ account: String, signed: String, _ transaction: String, original: String? = nil, product: String,
        purchased: String? = nil, expires: String? = nil, environment: StoreEnvironment? = nil, revoked: String? = nil,
        revocationType: StoreRevocationType? = nil, upgraded: Bool? = nil
    ) -> Event {
        .storeTransaction(id: id, account: account, signedAt: at(signed), StoreTransaction(
            transaction: transaction, originalTransaction: original, product: product, purchasedAt: purchased.map(at),
            expiresAt: expires.map(at), environment: environment, revokedAt: revoked.map(at), revocationType: revocationType,
            upgraded: upgraded))
    }

    /// The account's answer at `clock`, the same from the live projections, from its own
    /// history, and from a full replay.
    static func answer(
        _ ledger: Ledger, _ account: String, at clock: String, excluding excluded: Set<StoreEnvironment> = [],
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> AccountProjection {
        let time = at(clock)
        let live = try #require(try ledger.projectionAndPosition(of: account, asOf: time, excluding: excluded).projection,
                                sourceLocation: sourceLocation)
        let rebuilt = try ledger.projection(of: account, atPosition: ledger.position, asOf: time, excluding: excluded)
        let replayed = try ledger.state(at: ledger.position).projection(of: account, asOf: time, excluding: excluded)
        #expect(rebuilt == live, "rebuilt from the account's history", sourceLocation: sourceLocation)
        #expect(replayed == live, "from a replay", sourceLocation: sourceLocation)
        return live
    }

    static func status(_ projection: AccountProjection) -> [String] {
        projection.subscriptions.map { "\($0.transaction) \($0.status)" }
    }

    @Test(arguments: Backend.available)
    func aPurchaseCountsFromWhenItWasMadeOrElseSigned(on backend: Backend) async throws {
        try await withLedger(on: backend, catalog: Self.catalog) { ledger, _ in
            try await ledger.appendAll([
                Self.report("a1", "a", signed: "10:00", "A1", product: "basic", expires: "11:00"),
                Self.report("b1", "b", signed: "12:00", "B1", product: "book", purchased: "10:30"),
            ])
            // Without `purchasedAt`, from when Apple signed it.
            let before = try Self.answer(ledger, "a", at: "09:59:59.999")
            #expect(before.entitlements.isEmpty)
            #expect(before.subscriptions.isEmpty)
            #expect(before.storeTransactions.isEmpty)
            #expect(Self.status(try Self.answer(ledger, "a", at: "10:00")) == ["A1 active"])
            #expect(try Self.answer(ledger, "a", at: "10:00").entitlements == ["basic"])
            #expect(Self.status(try Self.answer(ledger, "a", at: "11:00")) == ["A1 expired"])
            // With it, from then: before Apple signed the report too.
            #expect(try Self.answer(ledger, "b", at: "10:29:59.999").entitlements.isEmpty)
            #expect(try Self.answer(ledger, "b", at: "10:30").entitlements == ["book"])
        }
    }

    @Test(arguments: Backend.available)
    func aRefundTakesEffectAtItsRevocationDateAndAReversalAtNoInstant(on backend: Backend) async throws {
        try await withLedger(on: backend, catalog: Self.catalog) { ledger, _ in
            try await ledger.appendAll([
                Self.report("r1", "r", signed: "10:00", "R1", product: "book", purchased: "10:00"),
                Self.report("r2", "r", signed: "13:00", "R1", product: "book", purchased: "10:00", revoked: "12:00",
                            revocationType: .refundFull),
                Self.report("s1", "s", signed: "10:00", "S1", original: "S1", product: "basic", purchased: "10:00", expires: "14:00"),
                Self.report("s2", "s", signed: "13:00", "S1", original: "S1", product: "basic", purchased: "10:00", expires: "14:00",
                            revoked: "12:00", revocationType: .refundProrated),
            ])
            let owned = try Self.answer(ledger, "r", at: "11:59:59.999")
            #expect(owned.entitlements == ["book"])
            #expect(owned.storeTransactions.map(\.isRevoked) == [false])
            let refunded = try Self.answer(ledger, "r", at: "12:00")
            #expect(refunded.entitlements.isEmpty)
            #expect(refunded.storeTransactions.map(\.isRevoked) == [true])
            #expect(Self.status(try Self.answer(ledger, "s", at: "11:59:59.999")) == ["S1 active"])
            #expect(Self.status(try Self.answer(ledger, "s", at: "12:00")) == ["S1 revoked"])

            // Apple reverses the refund: its history then holds no refund at any instant.
            try await ledger.appendAll([
                Self.report("r3", "r", signed: "14:00", "R1", product: "book", purchased: "10:00"),
            ])
            for clock in ["10:00", "12:00", "13:30", "23:00"] {
                #expect(try Self.answer(ledger, "r", at: clock).entitlements == ["book"], "at \(clock)")
            }
        }
    }

    @Test(arguments: Backend.available)
    func anUpgradeTakesEffectWhenTheTransactionReplacingItWasPurchased(on backend: Backend) async throws {
        try await withLedger(on: backend, catalog: Self.catalog) { ledger, _ in
            try await ledger.appendAll([
                Self.report("u1", "u", signed: "10:05", "T1", original: "T1", product: "basic", purchased: "10:05", expires: "10:10"),
                Self.report("u3", "u", signed: "10:15", "T3", original: "T1", product: "pro", purchased: "10:15", expires: "11:15"),
                Self.report("u2", "u", signed: "10:16", "T2", original: "T1", product: "basic", purchased: "10:10", expires: "11:10",
                            upgraded: true),
            ])
            let renewed = try Self.answer(ledger, "u", at: "10:12")
            #expect(Self.status(renewed) == ["T2 active"])
            #expect(renewed.entitlements == ["basic"])
            #expect(try Self.answer(ledger, "u", at: "10:14:59.999").entitlements == ["basic"])
            let upgraded = try Self.answer(ledger, "u", at: "10:15")
            #expect(Self.status(upgraded) == ["T3 active"])
            #expect(upgraded.entitlements == ["pro"])

            let timeline = try #require(try ledger.projectionAndPosition(of: "u", asOf: Self.at("12:00"), timeline: true).projection?.timeline)
            try #require(timeline.map(\.product) == ["basic", "pro"])
            let basic = timeline[0].intervals.map { "\($0.from.map { "\($0)" } ?? "-") \($0.fromCause) \($0.until.map { "\($0)" } ?? "-") \($0.untilCause.map { "\($0)" } ?? "-") \($0.transaction ?? "-")" }
            #expect(basic == [
                "2025-07-01T10:05:00Z purchase 2025-07-01T10:10:00Z renewal T1",
                "2025-07-01T10:10:00Z renewal 2025-07-01T10:15:00Z upgrade T2",
            ])
            let pro = timeline[1].intervals
            #expect(pro.count == 1)
            #expect(pro.first?.from == Self.at("10:15"))
            #expect(pro.first?.fromCause == .upgrade)
            #expect(pro.first?.until == Self.at("11:15"))
            #expect(pro.first?.untilCause == .expiry)
        }
    }

    @Test(arguments: Backend.available)
    func billingRetryAndGraceApplyToAnUpgradedTransactionInForce(on backend: Backend) async throws {
        try await withLedger(on: backend, catalog: Self.catalog) { ledger, _ in
            try await ledger.appendAll([
                // Upgraded, but the transaction that replaced it is not known yet.
                Self.report("g1", "g", signed: "10:25", "G1", original: "G1", product: "basic", purchased: "09:00", expires: "10:00",
                            upgraded: true),
                .renewalInfo(id: "g2", account: "g", signedAt: Self.at("10:01"), RenewalInfo(
                    originalTransaction: "G1", willRenew: true, billingRetry: true, gracePeriodEndsAt: Self.at("10:30"))),
            ])
            #expect(Self.status(try Self.answer(ledger, "g", at: "09:30")) == ["G1 active"])
            let grace = try Self.answer(ledger, "g", at: "10:20")
            #expect(Self.status(grace) == ["G1 gracePeriod"])
            #expect(grace.entitlements == ["basic"])
            let retry = try Self.answer(ledger, "g", at: "10:30")
            #expect(Self.status(retry) == ["G1 billingRetry"])
            #expect(retry.entitlements.isEmpty)
        }
    }

    @Test(arguments: Backend.available)
    func aSandboxReportNeverChangesAProductionAnswer(on backend: Backend) async throws {
        try await withLedger(on: backend, catalog: Self.catalog) { ledger, _ in
            let production = try StoreEnvironment.excluded(keeping: ["Production"])
            let sandbox = try StoreEnvironment.excluded(keeping: ["Sandbox"])
            try await ledger.appendAll([
                .transactionUpdated(id: "e0", account: "e", at: Self.at("10:00"), TransactionUpdated(
                    payment: "p1", state: .purchased, transaction: "E1", product: "book")),
                Self.report("e1", "e", signed: "10:00", "E1", product: "book", purchased: "10:00", environment: .production),
                // The same transaction id, reported later from the sandbox, refunded there.
                Self.report("e2", "e", signed: "11:00", "E1", product: "book", purchased: "11:00", environment: .sandbox,
                            revoked: "11:30"),
                // No environment: Production.
                Self.report("n1", "n", signed: "10:00", "N1", product: "book", purchased: "10:00"),
                // A device entry whose transaction only the sandbox reported.
                .transactionUpdated(id: "d0", account: "d", at: Self.at("10:00"), TransactionUpdated(
                    payment: "p1", state: .purchased, transaction: "D1", product: "book")),
                Self.report("d1", "d", signed: "10:00", "D1", product: "book", purchased: "10:00", environment: .sandbox),
            ])
            let inProduction = try Self.answer(ledger, "e", at: "12:00", excluding: production)
            #expect(inProduction.entitlements == ["book"])
            #expect(inProduction.storeTransactions.map(\.report.environment) == [.production])
            #expect(inProduction.unfinished.map(\.environment) == [.production])
            let inSandbox = try Self.answer(ledger, "e", at: "12:00", excluding: sandbox)
            #expect(inSandbox.entitlements.isEmpty)
            #expect(inSandbox.storeTransactions.map(\.report.environment) == [.sandbox])
            #expect(inSandbox.unfinished.map(\.environment) == [.sandbox])
            // Every environment: the report Apple signed last.
            #expect(try Self.answer(ledger, "e", at: "12:00").storeTransactions.map(\.report.environment) == [.sandbox])

            #expect(try Self.answer(ledger, "n", at: "12:00", excluding: production).entitlements == ["book"])
            #expect(try Self.answer(ledger, "n", at: "12:00", excluding: sandbox).entitlements.isEmpty)

            let sandboxOnly = try Self.answer(ledger, "d", at: "12:00", excluding: production)
            #expect(sandboxOnly.entitlements.isEmpty)
            #expect(sandboxOnly.storeTransactions.isEmpty)
            #expect(sandboxOnly.unfinished.map(\.environment) == [.sandbox])
            #expect(try Self.answer(ledger, "d", at: "12:00", excluding: sandbox).entitlements == ["book"])
        }
    }

    /// Issue 41, point 8: App Review's sandbox coins are not the production balance. A view of
    /// some environments leaves out the credit of each consumable the store reported only in
    /// others; `consumed` names no environment and counts in every view; the unscoped balance
    /// (what the app delivers from) stays the account's.
    @Test(arguments: Backend.available)
    func aSandboxConsumableNeverCreditsAProductionBalance(on backend: Backend) async throws {
        try await withLedger(on: backend, catalog: Self.catalog) { ledger, _ in
            let production = try StoreEnvironment.excluded(keeping: ["Production"])
            let sandbox = try StoreEnvironment.excluded(keeping: ["Sandbox"])
            func bought(_ id: String, _ payment: String, _ transaction: String, quantity: Int = 1) -> Event {
                .transactionUpdated(id: id, account: "c", at: Self.at("10:00"), TransactionUpdated(
                    payment: payment, state: .purchased, transaction: transaction, product: "gems", quantity: quantity))
            }
            try await ledger.appendAll([
                // 20 gems bought in the sandbox, 5 of them spent.
                bought("c1", "p1", "C1", quantity: 2),
                Self.report("c2", "c", signed: "10:00", "C1", product: "gems", purchased: "10:00", environment: .sandbox),
                .consumed(id: "c3", account: "c", at: Self.at("10:05"), item: "gems", amount: 5),
                // 10 in production.
                bought("c4", "p2", "C2"),
                Self.report("c5", "c", signed: "10:10", "C2", product: "gems", purchased: "10:10", environment: .production),
                // 10 the store never reported: in every view.
                bought("c6", "p3", "C3"),
                // 10 in the sandbox, refunded there: taken back already, not twice.
                bought("c7", "p4", "C4"),
                Self.report("c8", "c", signed: "10:20", "C4", product: "gems", purchased: "10:15", environment: .sandbox,
                            revoked: "10:20", revocationType: .refundFull),
                // A second entry holding the sandbox transaction credited nothing: nothing more to leave out.
                bought("c9", "p5", "C1", quantity: 2),
            ])
            #expect(try Self.answer(ledger, "c", at: "12:00").balances == ["gems": 35])
            #expect(try Self.answer(ledger, "c", at: "12:00", excluding: production).balances == ["gems": 15])
            #expect(try Self.answer(ledger, "c", at: "12:00", excluding: sandbox).balances == ["gems": 25])
            let json = try #require(try ledger.projectionAndPosition(of: "c", asOf: Self.at("12:00"), excluding: production).projection?.json)
            #expect(json.contains(#""gems": 15"#))

            // A scoped feed's balance deltas are the scoped view's: they add up to its balance.
            for (excluded, balance) in [(production, Int64(15)), (sandbox, 25), ([], 35)] as [(Set<StoreEnvironment>, Int64)] {
                let changes = try await ChangeFeedTests.collect(ledger.changes(follow: false, excluding: excluded)) { _ in false }
                let deltas = changes.flatMap(\.differences).reduce(Int64(0)) { sum, difference in
                    if case .balance(item: "gems", delta: let delta) = difference { sum + delta } else { sum }
                }
                #expect(deltas == balance, "excluding \(excluded)")
                #expect(changes.last?.projection.balances == ["gems": balance])
            }
        }
    }

    @Test(arguments: Backend.available)
    func twoTransactionsOfAGroupPurchasedAtOneInstantTheLaterExpiryIsInForce(on backend: Backend) async throws {
        try await withLedger(on: backend, catalog: Self.catalog) { ledger, _ in
            try await ledger.appendAll([
                Self.report("t2", "t", signed: "10:00", "B2", original: "B2", product: "pro", purchased: "10:00", expires: "10:30"),
                Self.report("t1", "t", signed: "10:00", "A2", original: "A2", product: "basic", purchased: "10:00", expires: "11:00"),
            ])
            #expect(Self.status(try Self.answer(ledger, "t", at: "10:10")) == ["A2 active"])
            #expect(try Self.answer(ledger, "t", at: "10:10").entitlements == ["basic"])
        }
    }

    @Test(arguments: Backend.available)
    func anAccountWhoseOnlyEventsAreRefundRequestsIsListed(on backend: Backend) async throws {
        try await withLedger(on: backend, catalog: Self.catalog) { ledger, _ in
            try await ledger.appendAll([
                .consumptionRequest(id: "q1", account: "q", signedAt: Self.at("10:00"), ConsumptionRequest(transaction: "X1")),
            ])
            let answer = try Self.answer(ledger, "q", at: "12:00")
            #expect(answer.entitlements.isEmpty && answer.balances.isEmpty && answer.unfinished.isEmpty)
            #expect(try ledger.state(at: ledger.position).accountIDs == ["q"])
            _ = try await ledger.writeSnapshot()
            #expect(try ledger.state(at: ledger.position).accountIDs == ["q"], "from the snapshot")
        }
    }

    @Test(arguments: Backend.available)
    func anEmptyProductNameIsAnUnknownProductOnEveryType(on backend: Backend) async throws {
        try await withLedger(on: backend, catalog: Self.catalog) { ledger, _ in
            let results = try await ledger.append(contentsOf: [
                Self.report("x1", "x", signed: "10:00", "X1", product: ""),
                .paymentAdded(id: "x2", account: "x", at: Self.at("10:00"), payment: "p1", product: ""),
            ])
            #expect(results.map(\.code) == [.unknownProduct, .unknownProduct])
            #expect(ledger.position == 0)
        }
    }
}

/// `SubscriptionGroup.Ordered` (the books' index) finds the transaction in force by a binary
/// search over the group's order; it must pick what the projections' pass over the group picks
/// (`inForce(at:)`: the latest started, one upgraded away from by then only when every started
/// one is), on random groups with ties, missing expiries and upgrades.
struct TransactionInForceTests {
    @Test func theBinarySearchPicksWhatTheRuleSays() {
        var random = SeededGenerator(seed: 44)
        for round in 0..<300 {
            let count = Int.random(in: 1...12, using: &random)
            let records = (0..<count).map { index -> StoreTransactionRecord in
                let start = Int64.random(in: 0...8, using: &random) * 60
                let expires: Timestamp? = Bool.random(using: &random) ? nil : Timestamp(seconds: start + Int64.random(in: 0...3, using: &random) * 60)
                let fact = StoreTransaction(
                    transaction: "T\(Int.random(in: 0...20, using: &random))-\(index)", originalTransaction: "T0", product: "basic",
                    purchasedAt: Bool.random(using: &random) ? Timestamp(seconds: start) : nil, expiresAt: expires,
                    upgraded: Int.random(in: 0...3, using: &random) == 0 ? true : nil)
                return StoreTransactionRecord(
                    fact: fact, signedAt: Timestamp(seconds: start + Int64.random(in: 0...2, using: &random) * 30), eventID: "e\(index)",
                    productType: .autoRenewable, group: "g")
            }
            let group = SubscriptionGroup(name: "g", records: records)
            let ordered = SubscriptionGroup.Ordered(group)
            for second in stride(from: -30, through: 700, by: 15) {
                let time = Timestamp(seconds: Int64(second))
                #expect(ordered.inForce(at: time) == group.inForce(at: time), "round \(round) at \(second) s")
            }
        }
    }
}
