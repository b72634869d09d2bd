import AppStoreServerAPI
import Foundation
import LedgerTestSupport
import PurchaseLedger
import PurchaseLedgerLMDB
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `ledger reconcile`, the built binary, against a fake App Store that misbehaves: every run
/// ends in exit 2 with the failure named, within its deadline, and nothing is appended.
@Suite(.serialized)
struct ReconcileAgainstHostileAppStoreTests {
    typealias Notifications = AppStoreNotificationTests

    static let misbehaviours: [(String, FakeAppStore.Misbehaviour?)] = [
        ("revisions going round in circles", .alternatingRevisions),
        ("garbage", .garbage),
        ("a 20 MiB body", .hugeBody(bytes: 20 << 20)),
        ("a body trickled a byte every 100 ms", .slowBody(interval: .milliseconds(100))),
        ("another app's transactions", nil),
    ]

    @Test func everyMisbehaviourEndsInExitTwoWithinItsDeadline() async throws {
        let signer = try TestAppStoreSigner()
        try await withTemporaryDirectory { directory in
            let path = directory + "/ledger"
            let ledger = try Ledger.open(at: path, catalog: serverTestCatalog)
            _ = try await ledger.append(contentsOf: [.transactionUpdated(
                id: "d1", account: Notifications.account, at: Timestamp(seconds: 1_698_148_900), TransactionUpdated(
                    payment: "D1", state: .purchased, transaction: "23456", originalTransaction: "12345",
                    expiresAt: Timestamp(seconds: 1_698_149_000), product: "com.example.product"))])
            await ledger.close()
            for (name, misbehaviour) in Self.misbehaviours {
                let store = FakeAppStore()
                store.setHistory([try signer.sign(Notifications.transaction(misbehaviour == nil ? ["bundleId": "com.other"] : [:]))], of: "12345")
                store.misbehave(misbehaviour)
                try Data(store.credentials.privateKeyPEM.utf8).write(to: URL(fileURLWithPath: directory + "/key.p8"))
                try Data(base64Encoded: try TestAppStoreSigner.der(signer.root))?.write(to: URL(fileURLWithPath: directory + "/root.der"))
                try await store.run { base in
                    let started = ContinuousClock.now
                    let run = try await ReconciliationTests.ledgerTool([
                        "reconcile", "--key-file", directory + "/key.p8", "--key-id", FakeAppStore.keyID, "--issuer-id", FakeAppStore.issuerID,
                        "--bundle-id", FakeAppStore.bundleID, "--environment", "Sandbox", "--root", directory + "/root.der",
                        "--api-base", base, "--timeout", "2", "--apply", "--json", path,
                    ])
                    let elapsed = ContinuousClock.now - started
                    #expect(run.status == 2, "\(name): \(run.output) \(run.error)")
                    #expect(run.output.contains(#""kind": "failure""#), "\(name): \(run.output)")
                    // Five attempts of at most two seconds each, and the waits between them; with
                    // room for a machine whose two cores the rest of the suite loads.
                    #expect(elapsed < .seconds(75), "\(name): \(elapsed)")
                    var usage = rusage()
                    getrusage(RUSAGE_CHILDREN.rawValue, &usage)
                    print("reconcile against \(name): exit \(run.status) in \(elapsed), children's peak RSS so far \(usage.ru_maxrss / 1024) MB")
                }
            }
            let after = try LedgerLog.open(at: path)
            #expect(try after.lastPosition() == 1)
            after.close()
        }
    }
}
