import Testing
@testable import PurchaseLedger
@testable import PurchaseLedgerLMDB
import LedgerTestSupport

struct CatalogTests {
    static let fixtures = String(#filePath.dropLast("CatalogTests.swift".count)) + "Fixtures/"

    @Test func readsTheSpecJSON() throws {
        let catalog = try Catalog(json: Array("""
            {"products": [
              {"id": "com.example.tenhints",  "type": "consumable",    "grants": {"hints": 10}},
              {"id": "com.example.gem",       "type": "consumable",    "price": 0.99},
              {"id": "com.example.hardwords", "type": "nonConsumable"},
              {"id": "com.example.pro.month", "type": "autoRenewable", "group": "pro"},
              {"id": "com.example.season",    "type": "nonRenewing"}
            ]}
            """.utf8))
        #expect(catalog.products.map(\.id) == [
            "com.example.tenhints", "com.example.gem", "com.example.hardwords", "com.example.pro.month", "com.example.season",
        ])
        #expect(catalog["com.example.tenhints"]?.grants == ["hints": 10])
        #expect(catalog["com.example.gem"]?.grants == ["com.example.gem": 1], "a consumable without grants grants one of itself")
        #expect(catalog["com.example.pro.month"]?.type == .autoRenewable)
        #expect(catalog["com.example.pro.month"]?.group == "pro")
        #expect(catalog["com.example.nothing"] == nil)
        // The canonical JSON reads back to the same catalog.
        #expect(try Catalog(json: Array(catalog.json.utf8)) == catalog)
    }

    @Test func readsAnXcodeStoreKitConfiguration() throws {
        let catalog = try Catalog(contentsOfFile: Self.fixtures + "UnitTestsConfiguration.storekit")
        let types = Dictionary(uniqueKeysWithValues: catalog.products.map { ($0.id, $0.type) })
        #expect(types == [
            "lifetime": .nonConsumable,
            "com.revenuecat.consumable": .consumable,
            "com.revenuecat.non_renewable": .nonRenewing,
            "com.revenuecat.monthly_4.99.1_week_intro": .autoRenewable,
            "com.revenuecat.annual_39.99.2_week_intro": .autoRenewable,
            "com.revenuecat.annual_with_commitment": .autoRenewable,
            "com.revenuecat.annual_39.99_no_trial": .autoRenewable,
        ])
        #expect(catalog["com.revenuecat.annual_39.99_no_trial"]?.group == "subscription_group_2")
        #expect(catalog["com.revenuecat.consumable"]?.grants == ["com.revenuecat.consumable": 1])
    }

    @Test func aStoreKitCatalogRunsALedger() async throws {
        let catalog = try Catalog(contentsOfFile: Self.fixtures + "UnitTestsConfiguration.storekit")
        try await withLedger(catalog: catalog) { ledger, _ in
            var s = Script("rc")
            try await ledger.appendAll([
                s.add("p1", "lifetime"), s.purchased("p1", "1"),
                s.add("p2", "com.revenuecat.consumable", quantity: 3), s.purchased("p2", "2"),
            ])
            #expect(try ledger.entitlements(of: "rc") == ["lifetime"])
            #expect(try ledger.balances(of: "rc") == ["com.revenuecat.consumable": 3])
        }
    }

    @Test(arguments: [
        "[]",
        #"{"items": []}"#,
        #"{"products": [{"type": "consumable"}]}"#,
        #"{"products": [{"id": "a", "type": "subscription"}]}"#,
        #"{"products": [{"id": "a", "type": "consumable"}, {"id": "a", "type": "consumable"}]}"#,
        #"{"products": [{"id": "a", "type": "nonConsumable", "grants": {"x": 1}}]}"#,
        #"{"products": [{"id": "a", "type": "consumable", "grants": {"x": 0}}]}"#,
        #"{"products": [{"id": "a", "type": "consumable", "grants": {"x": 1.5}}]}"#,
        #"{"products": [{"id": "", "type": "consumable"}]}"#,
    ])
    func rejectsBadCatalogs(_ json: String) {
        #expect(throws: CatalogError.self) { try Catalog(json: Array(json.utf8)) }
    }

    @Test func aLedgerRecordsItsCatalogAndMayOnlyGrowIt() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/ledger"
            #expect(throws: CatalogError.self) { try Ledger.open(at: path, configuration: .testing) }
            let first = try Catalog(products: [.init(id: "a", type: .consumable)])
            try await Ledger.open(at: path, catalog: first, configuration: .testing).close()

            // Reopened without a catalog: the recorded one is in force.
            let reopened = try Ledger.open(at: path, configuration: .testing)
            #expect(reopened.catalog == first)
            var s = Script()
            try await reopened.appendAll([s.add("p1", "a")])
            #expect(try await reopened.append(contentsOf: [s.add("p2", "b")])[0].code == .unknownProduct)
            await reopened.close()

            // Changing a product is refused; adding one is recorded from the next position.
            let changed = try Catalog(products: [.init(id: "a", type: .consumable, grants: ["x": 5])])
            #expect(throws: CatalogError.self) { try Ledger.open(at: path, catalog: changed, configuration: .testing) }
            let dropped = try Catalog(products: [.init(id: "b", type: .consumable)])
            #expect(throws: CatalogError.self) { try Ledger.open(at: path, catalog: dropped, configuration: .testing) }
            let grown = try Catalog(products: [.init(id: "a", type: .consumable), .init(id: "b", type: .nonConsumable)])
            let withB = try Ledger.open(at: path, catalog: grown, configuration: .testing)
            try await withB.appendAll([s.add("p2", "b")])
            await withB.close()
            let again = try Ledger.open(at: path, configuration: .testing)
            #expect(again.catalog == grown)
            await again.close()
            let log = try LedgerLog.open(at: path)
            #expect(log.verify().isIntact)
            #expect(try log.catalog() == grown)
            log.close()
        }
    }
}
