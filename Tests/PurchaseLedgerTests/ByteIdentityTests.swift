import Testing
@testable import PurchaseLedger
import PurchaseLedgerPostgres
import PurchaseLedgerLocation

/// Ids, accounts and store transactions are opaque bytes: two strings that Swift considers
/// equal (canonically equivalent) but that differ in bytes are different ids, in memory as on
/// disk.
struct ByteIdentityTests {
    static let kelvin = "\u{212A}-42"       // KELVIN SIGN, canonically equivalent to "K"
    static let precomposed = "X\u{E9}"      // é
    static let decomposed = "Xe\u{301}"     // e + combining acute

    @Test func swiftConsidersThemEqual() {
        #expect("K-42" == Self.kelvin)
        #expect(Self.precomposed == Self.decomposed)
        #expect(UTF8Key("K-42") != UTF8Key(Self.kelvin))
        #expect(UTF8Key(Self.precomposed) != UTF8Key(Self.decomposed))
    }

    @Test(arguments: Backend.available)
    func accountsThatLookAlikeAreSeparate(on backend: Backend) async throws {
        try await withLedger(on: backend) { ledger, path in
            var k = Script("K-42")
            var kelvin = Script(Self.kelvin)
            try await ledger.appendAll([k.add("p1", "com.example.tenhints"), k.purchased("p1", "T1")])
            let results = try await ledger.append(contentsOf: [kelvin.consume("hints", 10), kelvin.revoke("T1")])
            #expect(results.map(\.summary) == ["rejected insufficientBalance", "rejected unknownTransaction"])
            try await ledger.appendAll([kelvin.add("p1", "com.example.hardwords"), kelvin.purchased("p1", "T2")])
            #expect(try ledger.balances(of: "K-42") == ["hints": 10])
            #expect(try ledger.entitlements(of: "K-42").isEmpty)
            #expect(try ledger.entitlements(of: Self.kelvin) == ["com.example.hardwords"])
            #expect((try ledger.currentState()).accountIDs.count == 2)
        }
    }

    @Test(arguments: Backend.available)
    func transactionsThatLookAlikeAreSeparate(on backend: Backend) async throws {
        try await withLedger(on: backend) { ledger, path in
            var w = Script("w")
            var z = Script("z")
            try await ledger.appendAll([
                w.add("p1", "com.example.tenhints"), w.purchased("p1", Self.precomposed),
                z.add("p1", "com.example.tenhints"), z.purchased("p1", Self.decomposed),
            ])
            // Not a redelivery: another transaction on a purchased entry.
            let again = try await ledger.append(contentsOf: [w.purchased("p1", Self.decomposed)])
            #expect(again[0].code == .illegalTransition)
            try await ledger.appendAll([z.revoke(Self.decomposed)])
            #expect(try ledger.balances(of: "w") == ["hints": 10])
            #expect(try ledger.balances(of: "z") == ["hints": 0])
            await ledger.close()
            let log = try LedgerLog.open(location: path)
            #expect(log.verify().isIntact)
            #expect(try log.state() == (try LedgerLog.stateByAppending(log)))
            log.close()
        }
    }

    /// Event ids too, within one batch (one write transaction) and across batches.
    @Test(arguments: Backend.available)
    func eventIDsThatLookAlikeAreSeparate(on backend: Backend) async throws {
        try await withLedger(on: backend) { ledger, _ in
            let at = Timestamp(seconds: 1_767_225_600)
            func added(_ id: String, _ payment: String) -> Event {
                .paymentAdded(id: id, account: "u1", at: at, payment: payment, product: "com.example.tenhints", quantity: nil)
            }
            let together = try await ledger.append(contentsOf: [added(Self.precomposed, "p1"), added(Self.decomposed, "p2")])
            #expect(together.map(\.summary) == ["appended 1", "appended 2"])
            let apart = try await ledger.append(contentsOf: [added("K-1", "p3")])
            let again = try await ledger.append(contentsOf: [added("\u{212A}-1", "p4"), added(Self.decomposed, "p5")])
            #expect(apart.map(\.summary) + again.map(\.summary) == ["appended 3", "appended 4", "duplicate 2"])
        }
    }

    @Test func catalogsRefuseNamesThatDifferOnlyInEncoding() {
        #expect(throws: CatalogError.self) {
            try Catalog(products: [.init(id: Self.precomposed, type: .consumable), .init(id: Self.decomposed, type: .consumable)])
        }
        #expect(throws: CatalogError.self) {
            try Catalog(json: Array(#"{"products": [{"id": "a", "type": "consumable", "grants": {"\u00e9": 1, "e\u0301": 2}}]}"#.utf8))
        }
        #expect(throws: CatalogError.self) {
            try Catalog(json: Array(#"{"products": [{"id": "a", "type": "consumable", "grants": {}}]}"#.utf8))
        }
    }

    @Test func productsMatchByBytes() throws {
        let catalog = try Catalog(products: [.init(id: "K-pack", type: .nonConsumable)])
        #expect(catalog["K-pack"] != nil)
        #expect(catalog["\u{212A}-pack"] == nil)
    }

    @Test func jsonKeysAreBytesToo() throws {
        // Two keys that differ only in encoding are two keys, not a duplicate.
        let event = try Event(jsonLine: #"{"id":"e1","type":"transactionFinished","account":"u1","at":"2026-01-01T00:00:00Z","payment":"p1","\u00e9":1,"e\u0301":2}"#)
        #expect(event.payment == "p1")
    }
}

extension LedgerLog {
    /// Replays the log through a fresh ledger's append path (for comparisons).
    static func stateByAppending(_ log: LedgerLog) throws -> LedgerState {
        var state = LedgerState()
        let catalog = try log.catalog()
        try log.forEachRecord { record in try state.apply(record.event, at: record.position, catalog: catalog) }
        return state
    }
}
