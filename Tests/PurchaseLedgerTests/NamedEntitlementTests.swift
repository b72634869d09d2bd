import Foundation
import Synchronization
import Testing
@testable import PurchaseLedger
import PurchaseLedgerLocation
import LedgerTestSupport

/// Named entitlements: "does this customer have *pro*?" answered from the catalog's names, each
/// granted by any of its products, with the product, transaction, end and renewal that answer.
struct NamedEntitlementTests {
    static let catalog = try! Catalog(
        products: [
            .init(id: "pro.monthly", type: .autoRenewable, group: "pro"),
            .init(id: "pro.yearly", type: .autoRenewable, group: "pro"),
            .init(id: "pro.lifetime", type: .nonConsumable),
            .init(id: "coins", type: .consumable),
        ],
        entitlements: [.init(id: "pro", products: ["pro.monthly", "pro.yearly", "pro.lifetime"]), .init(id: "lifetime", products: ["pro.lifetime"])])

    static func day(_ days: Int) -> Timestamp { Timestamp(seconds: newYear.seconds + Int64(days) * 86_400) }

    static func report(_ id: String, _ transaction: String, _ product: String, from: Int, until: Int?, signed: Int, upgraded: Bool? = nil) -> Event {
        .storeTransaction(id: id, account: "u", signedAt: day(signed), StoreTransaction(
            transaction: transaction, originalTransaction: "o1", product: product, purchasedAt: day(from), expiresAt: until.map(day),
            upgraded: upgraded))
    }

    @Test func theCatalogNamesThemAndOnlyLetsThemGrow() throws {
        let json = #"{"products": [{"id": "m", "type": "autoRenewable"}, {"id": "l", "type": "nonConsumable"}, {"id": "c", "type": "consumable"}], "entitlements": [{"id": "pro", "products": ["m", "l"]}]}"#
        let catalog = try Catalog(json: Array(json.utf8))
        #expect(catalog.entitlements == [.init(id: "pro", products: ["m", "l"])])
        #expect(try Catalog(json: Array(catalog.json.utf8)) == catalog)
        for (entitlements, message) in [
            (#"[{"id": "pro", "products": ["x"]}]"#, "not a product"),
            (#"[{"id": "pro", "products": ["c"]}]"#, "consumable"),
            (#"[{"id": "pro", "products": ["m", "m"]}]"#, "twice"),
            (#"[{"id": "pro", "products": []}]"#, "1 to 100"),
            (#"[{"id": "pro", "products": ["m"]}, {"id": "pro", "products": ["l"]}]"#, "listed twice"),
            (#"{"id": "pro"}"#, "must be an array"),
        ] {
            let bad = #"{"products": [{"id": "m", "type": "autoRenewable"}, {"id": "l", "type": "nonConsumable"}, {"id": "c", "type": "consumable"}], "entitlements": "# + entitlements + "}"
            #expect { try Catalog(json: Array(bad.utf8)) } throws: { "\($0)".contains(message) }
        }
        // An entitlement may gain products; dropping one (or the entitlement) would change past answers.
        let grown = try Catalog(products: catalog.products, entitlements: [.init(id: "pro", products: ["m", "l"]), .init(id: "new", products: ["l"])])
        try catalog.checkSuccessor(grown)
        let shrunk = try Catalog(products: catalog.products, entitlements: [.init(id: "pro", products: ["m"])])
        #expect { try catalog.checkSuccessor(shrunk) } throws: { ($0 as? CatalogError)?.code == .conflict }
    }

    /// Xcode's `.storekit` has no place for them: `NAME.entitlements.json` beside it names them.
    @Test func aStoreKitConfigurationTakesThemFromASideFile() async throws {
        try await withTemporaryDirectory { directory in
            let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures/UnitTestsConfiguration.storekit")
            let path = directory + "/Products.storekit"
            try FileManager.default.copyItem(atPath: source.path, toPath: path)
            #expect(try Catalog(contentsOfFile: path).entitlements.isEmpty)
            try Data(#"{"entitlements": [{"id": "premium", "products": ["com.revenuecat.annual_39.99.2_week_intro", "lifetime"]}]}"#.utf8)
                .write(to: URL(fileURLWithPath: directory + "/Products.entitlements.json"))
            let catalog = try Catalog(contentsOfFile: path)
            #expect(catalog.entitlements == [.init(id: "premium", products: ["com.revenuecat.annual_39.99.2_week_intro", "lifetime"])])
            try Data(#"{"entitlements": [{"id": "premium", "products": ["com.revenuecat.consumable"]}]}"#.utf8)
                .write(to: URL(fileURLWithPath: directory + "/Products.entitlements.json"))
            #expect { try Catalog(contentsOfFile: path) } throws: { "\($0)".contains("Products.entitlements.json") }
        }
    }

    @Test(arguments: Backend.available)
    func eachIsAnsweredByTheProductThatLastsLongest(on backend: Backend) async throws {
        try await withLedger(on: backend, catalog: Self.catalog) { ledger, _ in
            let monthly = [
                Self.report("m1", "t1", "pro.monthly", from: 0, until: 30, signed: 0),
                .renewalInfo(id: "r1", account: "u", signedAt: Self.day(0), RenewalInfo(originalTransaction: "o1", product: "pro.monthly", willRenew: true)),
            ]
            for outcome in try await ledger.append(contentsOf: monthly) {
                guard case .success(.appended) = outcome else { throw TestFailure("not appended: \(outcome)") }
            }
            let pro = try #require(try ledger.projection(of: "u", asOf: Self.day(1))?.namedEntitlements)
            #expect(pro == [
                NamedEntitlementStatus(name: "pro", product: "pro.monthly", transaction: "t1", expiresAt: Self.day(30), status: .active, willRenew: true),
                NamedEntitlementStatus(name: "lifetime"),
            ])
            let beforeUpgrade = try #require(try ledger.projection(of: "u", asOf: Self.day(11)))

            // An upgrade inside the entitlement: yearly from day 10, monthly upgraded away.
            _ = try await ledger.append(contentsOf: [
                Self.report("y1", "t2", "pro.yearly", from: 10, until: 375, signed: 10),
                Self.report("m2", "t1", "pro.monthly", from: 0, until: 30, signed: 10, upgraded: true),
            ])
            let afterUpgrade = try #require(try ledger.projection(of: "u", asOf: Self.day(11)))
            #expect(afterUpgrade.namedEntitlements.first == NamedEntitlementStatus(
                name: "pro", product: "pro.yearly", transaction: "t2", expiresAt: Self.day(375), status: .active, willRenew: true))
            #expect(ChangeDifference.between(beforeUpgrade, afterUpgrade, cause: .event(id: "m2", type: .storeTransaction)).contains(
                .namedEntitlement(name: "pro", from: "pro.monthly", to: "pro.yearly")))
            let lapsed = try #require(try ledger.projection(of: "u", asOf: Self.day(400)))
            #expect(lapsed.namedEntitlements.map(\.isActive) == [false, false])

            // A lifetime purchase on the device: it never ends, so it answers for "pro" too.
            var script = Script("u")
            script.clock = Self.day(20)
            _ = try await ledger.append(contentsOf: [script.add("L", "pro.lifetime"), script.purchased("L", "L1")])
            let lifetime = try #require(try ledger.projection(of: "u", asOf: Self.day(400)))
            #expect(lifetime.namedEntitlements == [
                NamedEntitlementStatus(name: "pro", product: "pro.lifetime", transaction: "L1"),
                NamedEntitlementStatus(name: "lifetime", product: "pro.lifetime", transaction: "L1"),
            ])
            #expect(try ledger.projection(of: "u", asOf: Self.day(11))?.namedEntitlements.first?.product == "pro.lifetime")
            #expect(ChangeDifference.between(lapsed, lifetime, cause: .event(id: "u-2", type: .transactionUpdated)).filter {
                if case .namedEntitlement = $0 { true } else { false }
            } == [.namedEntitlement(name: "pro", from: nil, to: "pro.lifetime"), .namedEntitlement(name: "lifetime", from: nil, to: "pro.lifetime")])

            // The answers' JSON names them; a catalog without names keeps the shape it had.
            let json = try #require(try JSONSerialization.jsonObject(with: Data(lifetime.json.utf8)) as? [String: Any])
            let named = try #require(json["namedEntitlements"] as? [String: [String: Any]])
            #expect(named["pro"]?["active"] as? Bool == true)
            #expect(named["pro"]?["product"] as? String == "pro.lifetime")
            #expect(named["pro"]?["expiresAt"] == nil)
            let state = try ledger.state(at: ledger.position)
            #expect(state.projection(of: "u", asOf: Self.day(400), entitlements: Self.catalog.entitlements)?.namedEntitlements == lifetime.namedEntitlements)
            #expect(!state.replayJSON(asOf: Self.day(400)).contains("namedEntitlements"))
        }
    }

    /// Issue 41, point 11: the answer weighs every grant of every product, not one per product
    /// picked by kind: a product granted twice answers with the grant that ends last.
    @Test(arguments: Backend.available)
    func everyGrantOfEveryProductIsWeighed(on backend: Backend) async throws {
        let catalog = try Catalog(
            products: [.init(id: "monthly", type: .autoRenewable, group: "g"), .init(id: "pass", type: .nonRenewing)],
            entitlements: [.init(id: "access", products: ["monthly", "pass"])])
        let at = ValidTimeTests.at
        func report(_ id: String, _ account: String, _ transaction: String, _ product: String, from: String, until: String) -> Event {
            .storeTransaction(id: id, account: account, signedAt: at(from), StoreTransaction(
                transaction: transaction, originalTransaction: transaction, product: product, purchasedAt: at(from), expiresAt: at(until)))
        }
        try await withLedger(on: backend, catalog: catalog) { ledger, _ in
            try await ledger.appendAll([
                // `pass` on the device, never ending, and reported by the store until 11:00; `monthly` until 12:00.
                .transactionUpdated(id: "a1", account: "a", at: at("09:00"), TransactionUpdated(
                    payment: "p1", state: .purchased, transaction: "PE", product: "pass")),
                report("a2", "a", "PR", "pass", from: "09:00", until: "11:00"),
                report("a3", "a", "M1", "monthly", from: "09:00", until: "12:00"),
                // `pass` bought twice: until 20:00, then again, later, until 12:00.
                report("b1", "b", "P1", "pass", from: "09:00", until: "20:00"),
                report("b2", "b", "P2", "pass", from: "10:00", until: "12:00"),
            ])
            func access(_ account: String, at clock: String) throws -> NamedEntitlementStatus? {
                let live = try ledger.projection(of: account, asOf: at(clock))
                let rebuilt = try ledger.projection(of: account, atPosition: ledger.position, asOf: at(clock))
                #expect(rebuilt == live, "rebuilt from the account's history")
                return live?.namedEntitlements.first
            }
            // The device's grant never ends: it answers, at 10:30 as at 11:30.
            for clock in ["10:30", "11:30"] {
                #expect(try access("a", at: clock) == NamedEntitlementStatus(name: "access", product: "pass", transaction: "PE"), "at \(clock)")
            }
            // The purchase that ends last answers, not the one that started last.
            #expect(try access("b", at: "10:30") == NamedEntitlementStatus(
                name: "access", product: "pass", transaction: "P1", expiresAt: at("20:00")))
            #expect(try access("b", at: "12:30")?.transaction == "P1")

            // The product-level answers stay as they were: the timeline keeps one grant per
            // product, the report before the entry, the one started last.
            let timeline = try #require(try ledger.projectionAndPosition(of: "b", asOf: at("21:00"), timeline: true).projection?.timeline)
            #expect(timeline.first?.intervals.map { "\($0.transaction ?? "-") \($0.until.map { "\($0)" } ?? "-")" } == [
                "P1 2025-07-01T10:00:00Z", "P2 2025-07-01T12:00:00Z", "P1 2025-07-01T20:00:00Z",
            ])
            let device = try #require(try ledger.projectionAndPosition(of: "a", asOf: at("10:30"), timeline: true).projection?.timeline)
            #expect(device.first { $0.product == "pass" }?.intervals.map { $0.transaction ?? "-" } == ["PE", "PR", "PE"])
        }
    }

    /// The feed reports each named entitlement in every change's projection, and its end when
    /// time alone ends it, the same on every derivation.
    @Test(arguments: Backend.available)
    func theFeedSaysWhenTimeEndsOne(on backend: Backend) async throws {
        try await withLedger(on: backend, catalog: Self.catalog) { ledger, _ in
            let now = Timestamp.now()
            let ends = Timestamp(seconds: now.seconds + 2, nanoseconds: now.nanoseconds)
            _ = try await ledger.append(contentsOf: [
                .storeTransaction(id: "m1", account: "u", signedAt: now, StoreTransaction(
                    transaction: "t1", originalTransaction: "o1", product: "pro.monthly",
                    purchasedAt: Timestamp(seconds: now.seconds - 86_400), expiresAt: ends)),
            ])
            try await Task.sleep(for: .milliseconds(2500))
            _ = try await ledger.recordClock()
            let changes = try await ChangeFeedTests.collect(ledger.changes(follow: false)) { _ in false }
            #expect(changes.count == 2)
            #expect(changes.first?.differences.contains(.namedEntitlement(name: "pro", from: nil, to: "pro.monthly")) == true)
            #expect(changes.first?.projection.namedEntitlements.first?.product == "pro.monthly")
            let ended = try #require(changes.last)
            guard case .time = ended.cause else { throw TestFailure("not a time change: \(ended.cause)") }
            #expect(ended.differences.contains(.namedEntitlement(name: "pro", from: "pro.monthly", to: nil)))
            #expect(ended.projection.namedEntitlements.map(\.name) == ["pro", "lifetime"])
            #expect(ended.projection.namedEntitlements.allSatisfy { !$0.isActive })
            let again = try await ChangeFeedTests.collect(ledger.changes(follow: false)) { _ in false }
            #expect(again.map(\.json) == changes.map(\.json))
        }
    }

    /// A follower of the feed (the server's hub) derives what a derivation started later
    /// derives when, while it follows, another process on the shared storage records a catalog
    /// that names one entitlement more: the changes after it are judged with it (the follower
    /// read the catalogs again only when an event named a product it lacked).
    @Test(.enabled(if: Backend.postgresURL != nil, "shared storage: PostgreSQL (tools/test starts a cluster)"))
    func aFollowerJudgesWithTheCatalogAnotherProcessRecorded() async throws {
        try await withLedger(on: .postgres, catalog: Self.catalog) { first, location in
            _ = try await first.append(contentsOf: [Self.report("r1", "t1", "pro.lifetime", from: 1, until: nil, signed: 1)])
            let followed = Mutex<[LedgerChange]>([])
            let follower = Task {
                for try await change in first.changes(follow: true) {
                    if followed.withLock({ $0.append(change); return $0.count }) == 2 { return }
                }
            }
            defer { follower.cancel() }
            try await withTimeout(.seconds(60)) { while followed.withLock({ $0.count }) < 1 { try await Task.sleep(for: .milliseconds(10)) } }
            let grown = try Catalog(
                products: Self.catalog.products, entitlements: Self.catalog.entitlements + [.init(id: "forever", products: ["pro.lifetime"])])
            let second = try Ledger.open(location: location, catalog: grown, configuration: .testing)
            _ = try await second.append(contentsOf: [Self.report("r2", "t2", "pro.monthly", from: 2, until: 400, signed: 2)])
            try await withTimeout(.seconds(60)) { while followed.withLock({ $0.count }) < 2 { try await Task.sleep(for: .milliseconds(10)) } }
            let (before, after) = followed.withLock { ($0.first, $0.last) }
            let derived = try await ChangeFeedTests.collect(second.changes(follow: false)) { _ in false }
            await second.close()
            #expect(derived.count == 2)
            #expect([before?.json, after?.json] == derived.map(\.json))
            #expect(after?.projection.namedEntitlements.map(\.name) == ["pro", "lifetime", "forever"])
        }
    }
}
