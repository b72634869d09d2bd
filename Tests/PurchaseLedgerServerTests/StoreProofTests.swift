import Foundation
import HTTPTypes
import HummingbirdTesting
import LedgerTestSupport
import PurchaseLedger
import SwiftASN1
@testable import PurchaseLedgerAppStore
@testable import PurchaseLedgerServer
import Testing
import X509

/// The store's events keep Apple's signed data as proof, and `ledger verify --root` checks it:
/// what a notification wrote is proven, a report posted without one is unproven, and a report
/// whose proof names another transaction is disproven (exit 1).
struct StoreProofTests {
    typealias Notifications = AppStoreNotificationTests

    @Test func verifyChecksTheProofsTheStoresEventsCarry() async throws {
        let signer = try TestAppStoreSigner()
        try await Notifications.run(signer: signer) { harness, client in
            let transaction = try Notifications.transaction()
            _ = try await Notifications.post(try Notifications.notification(
                "SUBSCRIBED", subtype: "INITIAL_BUY", uuid: "s1", transaction: transaction, renewal: Notifications.renewal(), signer: signer), client)
            let recorded = try harness.ledger.history(account: Notifications.account).map(\.event)
            let proof = try #require(recorded.lazy.compactMap { event -> String? in
                if case .storeTransaction(let fact) = event.payload { fact.signed } else { nil }
            }.first)
            #expect(recorded.contains { if case .renewalInfo(let info) = $0.payload { info.signed != nil } else { false } })

            // A back office's report, without proof; and one that borrows another transaction's.
            let unproven = #"{"id":"bo-1","type":"storeTransaction","account":"player-2","at":"2023-10-24T12:01:40Z","transaction":"777","product":"com.example.coins"}"#
            let forged = #"{"id":"bo-2","type":"storeTransaction","account":"player-3","at":"2023-10-24T12:01:40Z","transaction":"888","product":"com.example.product","environment":"Sandbox","signed":\#(JSONString.quoted(proof))}"#
            let outcomes = try await client.post(events: [unproven, forged], key: TestKeys.backOffice)
            #expect(outcomes.map { $0["outcome"] as? String } == ["appended", "appended"])
            let forgedPosition = harness.ledger.position

            let root = harness.directory + "/root.pem"
            try signer.root.serializeAsPEM().pemString.write(toFile: root, atomically: true, encoding: .utf8)
            let path = harness.directory + "/ledger"
            let plain = try await ReconciliationTests.ledgerTool(["verify", path])
            #expect(plain.status == 0, "\(plain.output)\(plain.error)")

            let checked = try await ReconciliationTests.ledgerTool(["verify", "--json", "--root", root, "--bundle-id", "com.example", path])
            #expect(checked.status == 1, "\(checked.output)\(checked.error)")
            let report = try #require(try JSONSerialization.jsonObject(with: Data(checked.output.utf8)) as? [String: Any])
            #expect(report["intact"] as? Bool == true)
            #expect(report["proven"] as? Int == 2)
            #expect(report["unproven"] as? Int == 1)
            let disproven = try #require(report["disproven"] as? [[String: Any]])
            #expect(disproven.map { $0["id"] as? String } == ["bo-2"])
            #expect(disproven.first?["position"] as? Int == Int(forgedPosition))
            #expect((disproven.first?["reason"] as? String)?.contains("transaction 23456") == true)

            // Another app's roots: nothing Apple signed verifies.
            let stranger = try TestAppStoreSigner()
            try stranger.root.serializeAsPEM().pemString.write(toFile: root, atomically: true, encoding: .utf8)
            let foreign = try await ReconciliationTests.ledgerTool(["verify", "--root", root, "--bundle-id", "com.example", path])
            #expect(foreign.status == 1)
            #expect(foreign.output.contains("0 store events proven"), "\(foreign.output)")

            let usage = try await ReconciliationTests.ledgerTool(["verify", "--root", root, path])
            #expect(usage.status == 64, "\(usage.error)")
        }
    }
}
