import AppStoreServerAPI
import Foundation
import HTTPTypes
import HummingbirdTesting
import PurchaseLedger
import PurchaseLedgerLMDB
@testable import PurchaseLedgerAppStore
@testable import PurchaseLedgerServer
import Testing
import LedgerTestSupport
import Logging
import Synchronization

/// The ledger checked against Apple's transaction history (the fake App Store, serving
/// transactions signed by the test chain): what differs is reported; with `apply` it is
/// appended, and a second run finds nothing.
struct ReconciliationTests {
    typealias Notifications = AppStoreNotificationTests
    static let account = Notifications.account

    @Test func aMissedRenewalAndARefundAreFoundAndMended() async throws {
        let signer = try TestAppStoreSigner()
        let store = FakeAppStore(pageSize: 1)
        try await Notifications.run(signer: signer) { harness, client in
            // The ledger heard of the first purchase only, and a device reported a transaction
            // Apple has never heard of under the same subscription.
            _ = try await Notifications.post(try Notifications.notification(
                "SUBSCRIBED", uuid: "s1", transaction: Notifications.transaction(), signer: signer), client)
            _ = try await client.post(events: [
                Lines.purchased("d1", Self.account, payment: "D1", transaction: "99999", product: "com.example.product", original: "12345"),
                Lines.added("d2", "player-2", payment: "P1", product: "com.example.coins"),
                Lines.purchased("d3", "player-2", payment: "P1", transaction: "777"),
            ])
            // Apple's history now: the first period refunded, and a renewal.
            store.setHistory([
                try signer.sign(Notifications.transaction(["signedDate": 1_698_149_100_000], revoked: true)),
                try signer.sign(Notifications.transaction([
                    "transactionId": "23457", "purchaseDate": 1_698_149_000_000, "expiresDate": 1_698_150_000_000,
                    "signedDate": 1_698_149_100_000,
                ])),
            ], of: "12345")
            try await store.run { base in
                let api = try await AppStoreServerAPIClient(
                    credentials: store.credentials, environment: .custom(baseURL: base), retry: AppStoreServerAPIClientTests.quickRetry)
                let reconciliation = Reconciliation(client: api, verifier: signer.verifier(), ledger: harness.ledger)

                let looked = try await reconciliation.run(apply: false)
                #expect(looked.failures.isEmpty)
                #expect(looked.originalTransactions == 2)
                #expect(Set(looked.differences.map { "\($0.kind.rawValue) \($0.transaction)" }) == [
                    "revocationDiffers 23456", "missingPurchase 23457", "unknownToApple 99999", "unknownToApple 777",
                ])
                #expect(looked.appended == 0)
                let position = harness.ledger.position

                let mended = try await reconciliation.run(apply: true)
                #expect(mended.differences.count == 4)
                #expect(mended.appended == 4)
                #expect(harness.ledger.position == position + 4)
                let projection = try await client.account(Self.account, asOf: "2023-10-24T12:20:00Z")
                #expect(projection["entitlements"] as? [String] == ["com.example.product"])
                let purchases = try #require(projection["storeTransactions"] as? [[String: Any]])
                #expect(purchases.map { $0["transaction"] as? String } == ["23456", "23457"])
                #expect(purchases.map { $0["revoked"] as? Bool } == [true, false])

                let again = try await reconciliation.run(apply: true)
                #expect(again.differences.map(\.kind) == [.unknownToApple, .unknownToApple])
                #expect(again.appended == 0)
                #expect(harness.ledger.position == position + 4)
                // Pages of one transaction each and the subscription's statuses, and the
                // consumable Apple does not know: four requests a run.
                #expect(api.requestCount == 12)
            }
        }
    }

    /// With Production and Sandbox, a chain is asked of its reports' environment only, and a
    /// chain only the device reported is asked of production first, then of the sandbox when
    /// production does not know it (as the receipt check did on status 21007).
    /// A subscription transferred to an account that holds none of its transactions in the
    /// index (its device restored the first account's transaction) is still reconciled, with
    /// that account: a renewal the ledger missed is recorded there, not in the account it left.
    @Test func aTransferredSubscriptionIsReconciledWithItsNewAccount() async throws {
        let signer = try TestAppStoreSigner()
        let store = FakeAppStore()
        let second = "0b3a9c1e-5f2d-4e8a-9c7b-1d2e3f4a5b6c"
        try await Notifications.run(signer: signer, restores: .transfer) { harness, client in
            let signed = try signer.sign(Notifications.transaction())
            #expect(try await SignedTransactionRouteTests.post(["signedTransaction": signed], client).status == .ok)
            #expect(try await SignedTransactionRouteTests.post(["signedTransaction": signed, "account": second], client).status == .ok)
            #expect(try harness.ledger.owner(ofTransaction: "23456", chain: "12345") == second)
            store.setHistory([
                signed,
                try signer.sign(Notifications.transaction([
                    "transactionId": "23457", "purchaseDate": 1_698_149_000_000, "expiresDate": 1_698_150_000_000,
                    "signedDate": 1_698_149_100_000,
                ])),
            ], of: "12345")
            try await store.run { base in
                let reconciliation = try await AppStoreFindingsTests.reconciliation(store, base, signer, harness.ledger)
                let mended = try await reconciliation.run(apply: true)
                #expect(mended.failures.isEmpty)
                #expect(mended.differences.map { "\($0.kind.rawValue) \($0.account) \($0.transaction)" } == ["missingPurchase \(second) 23457"])
                #expect(try harness.ledger.history(account: second).contains {
                    if case .storeTransaction(let fact) = $0.event.payload { fact.transaction == "23457" } else { false }
                })
                #expect(try harness.ledger.history(account: Self.account).allSatisfy {
                    if case .storeTransaction(let fact) = $0.event.payload { fact.transaction != "23457" } else { true }
                })
                #expect(try await reconciliation.run(apply: false).differences.isEmpty)
            }
        }
    }

    @Test func eachChainIsAskedOfItsOwnEnvironment() async throws {
        let signer = try TestAppStoreSigner()
        let production = FakeAppStore()
        let sandbox = FakeAppStore()
        try await Notifications.run(signer: signer) { harness, client in
            // App Review's subscription, in the sandbox; a coin pack only the device reported.
            _ = try await Notifications.post(try Notifications.notification(
                "SUBSCRIBED", uuid: "s1", transaction: Notifications.transaction(), signer: signer), client)
            _ = try await client.post(events: [
                Lines.added("d1", "player-2", payment: "P1", product: "com.example.coins"),
                Lines.purchased("d2", "player-2", payment: "P1", transaction: "777"),
            ])
            sandbox.setHistory([
                try signer.sign(Notifications.transaction()),
                try signer.sign(Notifications.transaction([
                    "transactionId": "23457", "purchaseDate": 1_698_149_000_000, "expiresDate": 1_698_150_000_000,
                    "signedDate": 1_698_149_100_000,
                ])),
            ], of: "12345")
            sandbox.setHistory([
                try signer.sign(Notifications.transaction([
                    "transactionId": "777", "originalTransactionId": "777", "productId": "com.example.coins",
                    "type": "Consumable", "expiresDate": NSNull(), "subscriptionGroupIdentifier": NSNull(),
                    "appAccountToken": NSNull(),
                ])),
            ], of: "777")
            try await production.run { productionBase in
                try await sandbox.run { sandboxBase in
                    let verifier = AppStoreSignedDataVerifier(
                        trustedRoots: [signer.root], bundleId: "com.example", appAppleId: 41234, environments: [.production, .sandbox])
                    let reconciliation = Reconciliation(sides: [
                        .init(environment: .production, client: try await AppStoreServerAPIClientTests.client(production, productionBase), verifier: verifier),
                        .init(environment: .sandbox, client: try await AppStoreServerAPIClientTests.client(sandbox, sandboxBase), verifier: verifier),
                    ], ledger: harness.ledger)
                    let report = try await reconciliation.run(apply: false)
                    #expect(report.failures.isEmpty)
                    #expect(report.originalTransactions == 2)
                    #expect(Set(report.differences.map { "\($0.kind.rawValue) \($0.transaction)" }) == [
                        "missingPurchase 23457", "missingReport 777",
                    ])
                    // Production was asked of the device's chain once, and of the sandbox's never.
                    #expect(production.requests == 1)
                    #expect(sandbox.requests >= 2)
                }
            }
        }
    }

    @Test func aHistoryThatDoesNotVerifyIsAFailureAndChangesNothing() async throws {
        let signer = try TestAppStoreSigner()
        let stranger = try TestAppStoreSigner()
        let store = FakeAppStore()
        try await Notifications.run(signer: signer) { harness, client in
            _ = try await Notifications.post(try Notifications.notification(
                "SUBSCRIBED", uuid: "s1", transaction: Notifications.transaction(), signer: signer), client)
            store.setHistory([try stranger.sign(Notifications.transaction(["transactionId": "23457"]))], of: "12345")
            try await store.run { base in
                let api = try await AppStoreServerAPIClient(credentials: store.credentials, environment: .custom(baseURL: base))
                let position = harness.ledger.position
                let report = try await Reconciliation(client: api, verifier: signer.verifier(), ledger: harness.ledger).run(apply: true)
                #expect(report.failures.map(\.originalTransaction) == ["12345"])
                #expect(report.differences.isEmpty)
                #expect(harness.ledger.position == position)
            }
        }
    }
}

extension ReconciliationTests {
    /// `ledger reconcile` as a cron job runs it: the built binary against the fake App Store,
    /// its exit status and JSON lines, then `--apply`, then a run that finds nothing; in both of
    /// Apple's environments. What it appended carries Apple's signed data, which `verify` proves.
    @Test(arguments: ["Sandbox", "Production"])
    func theCommandReportsMendsAndThenAgrees(environment: String) async throws {
        let signer = try TestAppStoreSigner()
        let store = FakeAppStore()
        try await withTemporaryDirectory { directory in
            let path = directory + "/ledger"
            let ledger = try Ledger.open(at: path, catalog: serverTestCatalog)
            _ = try await ledger.append(contentsOf: [.transactionUpdated(
                id: "d1", account: Self.account, at: Timestamp(seconds: 1_698_148_900), TransactionUpdated(
                    payment: "D1", state: .purchased, transaction: "23456", originalTransaction: "12345",
                    expiresAt: Timestamp(seconds: 1_698_149_000), product: "com.example.product"))])
            await ledger.close()
            store.setHistory([
                try signer.sign(Notifications.transaction(["environment": environment])),
                try signer.sign(Notifications.transaction([
                    "transactionId": "23457", "purchaseDate": 1_698_149_000_000, "expiresDate": 1_698_150_000_000,
                    "environment": environment,
                ])),
            ], of: "12345")
            let app = environment == "Production" ? ["--app-apple-id", "41234"] : []
            try Data(store.credentials.privateKeyPEM.utf8).write(to: URL(fileURLWithPath: directory + "/key.p8"))
            try Data(base64Encoded: try TestAppStoreSigner.der(signer.root))?.write(to: URL(fileURLWithPath: directory + "/root.der"))
            try await store.run { base in
                let arguments = [
                    "reconcile", "--key-file", directory + "/key.p8", "--key-id", FakeAppStore.keyID, "--issuer-id", FakeAppStore.issuerID,
                    "--bundle-id", FakeAppStore.bundleID, "--environment", environment, "--root", directory + "/root.der",
                    "--api-base", base, "--json",
                ] + app
                let looked = try await Self.ledgerTool(arguments + [path])
                #expect(looked.status == 1, "\(looked.output)\(looked.error)")
                let lines = looked.output.split(separator: "\n")
                #expect(lines.count == 3)
                #expect(lines[0].contains(#""kind": "missingReport""#) && lines[0].contains(#""transaction": "23456""#))
                #expect(lines[1].contains(#""kind": "missingPurchase""#) && lines[1].contains(#""transaction": "23457""#))
                #expect(lines[2] == #"{"summary": {"originalTransactions": 1, "differences": 2, "failures": 0, "appended": 0, "requests": 2}}"#)

                let mended = try await Self.ledgerTool(arguments + ["--apply", path])
                #expect(mended.status == 1)
                #expect(mended.output.contains(#""appended": 4"#))
                let agreed = try await Self.ledgerTool(arguments + ["--apply", path])
                #expect(agreed.status == 0, "\(agreed.output)")
                #expect(agreed.output.contains(#""differences": 0"#) && agreed.output.contains(#""appended": 0"#))
                let proofs = try await Self.ledgerTool(["verify", "--json", "--root", directory + "/root.der", "--bundle-id", FakeAppStore.bundleID] + app + [path])
                #expect(proofs.status == 0, "\(proofs.output)\(proofs.error)")
                #expect(proofs.output.contains(#""proven": 2, "unproven": 0, "disproven": []"#), "\(proofs.output)")

                let usage = try await Self.ledgerTool(["reconcile", "--key-file", directory + "/key.p8", "--key-id", "K", "--issuer-id", "I", "--bundle-id", "B", path])
                #expect(usage.status == 64)
                #expect(usage.error.contains("--root"))
            }
        }
    }

    static func ledgerTool(_ arguments: [String]) async throws -> (status: Int32, output: String, error: String) {
        let run = try await awaitCommand(builtExecutable("ledger"), arguments)
        return (run.status, run.text, run.error)
    }
}

extension ReconciliationTests {
    /// One notification of a generated history: its type, Apple's transaction as signed then,
    /// and whether it may be lost (every chain's first purchase arrives, else the ledger would
    /// not know the chain to ask Apple about).
    struct Sent {
        var type: String
        var transaction: [String: Any]
        var mayBeLost: Bool
    }

    /// Subscriptions (renewals, refunds, reversed refunds, an extension) and consumables (some
    /// refunded) of three accounts, in Apple's signing order, and Apple's current view of every
    /// transaction by original transaction.
    static func history(random: inout SeededGenerator) throws -> (sent: [Sent], apple: [String: [[String: Any]]]) {
        let start = 1_698_148_800_000.0
        let period = 100_000.0
        var sent: [Sent] = []
        var current: [String: [String: Any]] = [:]
        var chains: [String: [String]] = [:]
        func send(_ type: String, _ transaction: [String: Any], mayBeLost: Bool) {
            sent.append(Sent(type: type, transaction: transaction, mayBeLost: mayBeLost))
            let id = transaction["transactionId"] as? String ?? ""
            if let known = current[id], (known["signedDate"] as? Double ?? 0) > (transaction["signedDate"] as? Double ?? 0) { return }
            if current[id] == nil { chains[transaction["originalTransactionId"] as? String ?? id, default: []].append(id) }
            current[id] = transaction
        }
        for account in 1...3 {
            let token = "00000000-0000-4000-8000-00000000000\(account)"
            let original = "\(account)000"
            let periods = Int.random(in: 1...4, using: &random)
            for index in 0..<periods {
                let bought = start + Double(index) * period
                let base = try Notifications.transaction([
                    "transactionId": "\(account)00\(index)", "originalTransactionId": original, "appAccountToken": token,
                    "purchaseDate": bought, "expiresDate": bought + period, "signedDate": bought,
                ])
                send(index == 0 ? "SUBSCRIBED" : "DID_RENEW", base, mayBeLost: index > 0)
                if Int.random(in: 0..<3, using: &random) == 0 {
                    send("REFUND", base.merging(["signedDate": bought + 10_000, "revocationDate": bought + 10_000, "revocationReason": 0]) { $1 }, mayBeLost: true)
                    if Bool.random(using: &random) {
                        send("REFUND_REVERSED", base.merging(["signedDate": bought + 20_000]) { $1 }, mayBeLost: true)
                    }
                }
                if index == periods - 1, Bool.random(using: &random) {
                    send("RENEWAL_EXTENDED", base.merging(["signedDate": bought + 30_000, "expiresDate": bought + 5 * period]) { $1 }, mayBeLost: true)
                }
            }
            for index in 0..<Int.random(in: 1...2, using: &random) {
                let id = "\(account)90\(index)"
                let bought = start + Double(index) * 7_000
                let coins = try Notifications.transaction([
                    "transactionId": id, "originalTransactionId": id, "productId": "com.example.coins", "type": "Consumable",
                    "expiresDate": NSNull(), "subscriptionGroupIdentifier": NSNull(), "appAccountToken": token,
                    "purchaseDate": bought, "signedDate": bought,
                ])
                send("ONE_TIME_CHARGE", coins, mayBeLost: false)
                if Bool.random(using: &random) {
                    send("REFUND", coins.merging(["signedDate": bought + 10_000, "revocationDate": bought + 10_000]) { $1 }, mayBeLost: true)
                }
            }
        }
        sent.sort { ($0.transaction["signedDate"] as? Double ?? 0) < ($1.transaction["signedDate"] as? Double ?? 0) }
        let apple = chains.mapValues { ids in ids.compactMap { current[$0] } }
        return (sent, apple)
    }

    /// What an account owns at a few times, as the server answers: all but `unfinished` (the
    /// store's entries are finished either way) and `position`.
    static func owned(_ client: any TestClientProtocol, _ accounts: [String]) async throws -> String {
        var text = ""
        for account in accounts {
            for time in ["2023-10-24T12:01:00Z", "2023-10-24T12:05:00Z", "2023-10-24T12:12:00Z", "2023-10-24T13:00:00Z"] {
                var projection = try await client.account(account, asOf: time)
                projection["position"] = nil
                projection["unfinished"] = nil
                text += String(decoding: try JSONSerialization.data(withJSONObject: projection, options: [.sortedKeys]), as: UTF8.self) + "\n"
            }
        }
        return text
    }

    /// Lost notifications, mended by reconciliation: a ledger that heard only some of a
    /// generated history, reconciled with `apply` against Apple's full history, owns what the
    /// ledger that heard everything owns; a second run finds nothing and appends nothing; and
    /// the ledger that heard everything agrees with Apple from the start.
    @Test(arguments: 1...4)
    func reconcilingWhatWasLostOwnsWhatHearingEverythingOwns(seed: UInt64) async throws {
        var random = SeededGenerator(seed: seed)
        let (sent, apple) = try Self.history(random: &random)
        let lost = sent.map { $0.mayBeLost && Int.random(in: 0..<5, using: &random) < 2 }
        let accounts = (1...3).map { "00000000-0000-4000-8000-00000000000\($0)" }
        let signer = try TestAppStoreSigner()
        let store = FakeAppStore(pageSize: 3)
        for (original, transactions) in apple {
            store.setHistory(try transactions.map { try signer.sign($0) }, of: original)
        }
        let bodies = try sent.enumerated().map { index, notification in
            try Notifications.notification(notification.type, uuid: "n\(index)", transaction: notification.transaction, signer: signer)
        }
        try await Notifications.run(signer: signer) { everything, heardAll in
            try await Notifications.run(signer: signer) { partial, heardSome in
                for (index, body) in bodies.enumerated() {
                    _ = try await Notifications.post(body, heardAll)
                    if !lost[index] { _ = try await Notifications.post(body, heardSome) }
                }
                try await store.run { base in
                    let api = try await AppStoreServerAPIClient(
                        credentials: store.credentials, environment: .custom(baseURL: base), retry: AppStoreServerAPIClientTests.quickRetry)
                    let complete = try await Reconciliation(client: api, verifier: signer.verifier(), ledger: everything.ledger).run(apply: false)
                    #expect(complete.differences.isEmpty, "\(complete.differences.map(\.json))")
                    let reconciliation = Reconciliation(client: api, verifier: signer.verifier(), ledger: partial.ledger)
                    let mended = try await reconciliation.run(apply: true)
                    #expect(mended.failures.isEmpty)
                    #expect(mended.differences.isEmpty == !lost.contains(true))
                    #expect(try await Self.owned(heardSome, accounts) == Self.owned(heardAll, accounts))
                    let position = partial.ledger.position
                    let again = try await reconciliation.run(apply: true)
                    #expect(again.differences.isEmpty)
                    #expect(partial.ledger.position == position)
                }
            }
        }
    }
}

extension ReconciliationTests {
    /// With `since`, the notifications Apple sent that the ledger never received are found in
    /// Apple's notification history and appended with their own ids; one without an account
    /// is reported and left.
    @Test func missedNotificationsAreFoundInApplesHistory() async throws {
        let signer = try TestAppStoreSigner()
        let store = FakeAppStore(pageSize: 2)
        try await Notifications.run(signer: signer) { harness, client in
            let first = try Notifications.transaction()
            let renewal = try Notifications.transaction([
                "transactionId": "23457", "purchaseDate": 1_698_149_000_000, "expiresDate": 1_698_150_000_000, "signedDate": 1_698_149_000_000,
            ])
            let refund = renewal.merging(["signedDate": 1_698_149_500_000, "revocationDate": 1_698_149_500_000, "revocationReason": 1]) { $1 }
            let stranger = try Notifications.transaction([
                "transactionId": "555", "originalTransactionId": "555", "appAccountToken": NSNull(), "appTransactionId": "another-customer",
            ])
            let notifications = try [
                ("SUBSCRIBED", "s1", first), ("DID_RENEW", "s2", renewal), ("REFUND", "s3", refund), ("ONE_TIME_CHARGE", "x1", stranger),
            ].map { type, uuid, transaction in
                try Notifications.notification(type, uuid: uuid, transaction: transaction, signer: signer)
            }
            // The ledger heard only the first.
            _ = try await Notifications.post(notifications[0], client)
            for (index, body) in notifications.enumerated() {
                let payload = try #require(try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: String])["signedPayload"]
                store.sent(try #require(payload), at: 1_698_148_900_000 + Int64(index) * 1000)
            }
            store.setHistory([try signer.sign(first), try signer.sign(refund)], of: "12345")
            try await store.run { base in
                let api = try await AppStoreServerAPIClient(
                    credentials: store.credentials, environment: .custom(baseURL: base), retry: AppStoreServerAPIClientTests.quickRetry)
                let reconciliation = Reconciliation(client: api, verifier: signer.verifier(), ledger: harness.ledger)
                let since: Int64 = 1_698_148_000_000
                let mended = try await reconciliation.run(apply: true, since: since)
                #expect(mended.failures.isEmpty, "\(mended.failures)")
                #expect(mended.differences.map { "\($0.kind.rawValue) \($0.transaction)" } == [
                    "missedNotification 23457", "missedNotification 23457", "missedNotification 555",
                ])
                #expect(mended.appended == 4)
                let ids = try harness.ledger.history(account: Self.account).map(\.event.id)
                #expect(ids.suffix(4) == ["s2", "s2/finish", "s2/transaction", "s3/transaction"])
                // The refund takes effect at its revocation date (12:11:40), before the renewal's expiry.
                let beforeRefund = try await client.account(Self.account, asOf: "2023-10-24T12:10:00Z")
                #expect(beforeRefund["entitlements"] as? [String] == ["com.example.product"])
                let projection = try await client.account(Self.account, asOf: "2023-10-24T12:12:00Z")
                #expect(projection["entitlements"] as? [String] == [])

                let again = try await reconciliation.run(apply: true, since: since)
                #expect(again.differences.map(\.kind) == [.missedNotification])
                #expect(again.appended == 0)
            }
        }
    }
}

extension ReconciliationTests {
    /// A lost DID_FAIL_TO_RENEW (GRACE_PERIOD): Apple's renewal info, read from the
    /// subscription's statuses, puts the subscriber in the grace period the ledger missed.
    @Test func aMissedGracePeriodIsFoundInTheSubscriptionsStatus() async throws {
        let signer = try TestAppStoreSigner()
        let store = FakeAppStore()
        try await Notifications.run(signer: signer) { harness, client in
            let first = try Notifications.transaction()
            _ = try await Notifications.post(try Notifications.notification(
                "SUBSCRIBED", uuid: "s1", transaction: first,
                renewal: Notifications.renewal(["isInBillingRetryPeriod": false, "gracePeriodExpiresDate": NSNull()]), signer: signer), client)
            let graceEnd = 1_698_149_000_000.0 + 3_600_000
            store.setHistory([try signer.sign(first)], of: "12345")
            store.setRenewal(try signer.sign(Notifications.renewal([
                "isInBillingRetryPeriod": true, "gracePeriodExpiresDate": graceEnd, "signedDate": 1_698_149_000_000,
            ])), of: "12345")
            let inGrace = "2023-10-24T12:30:00Z"
            #expect(try await client.account(Self.account, asOf: inGrace)["entitlements"] as? [String] == [])
            try await store.run { base in
                let api = try await AppStoreServerAPIClient(credentials: store.credentials, environment: .custom(baseURL: base))
                let reconciliation = Reconciliation(client: api, verifier: signer.verifier(), ledger: harness.ledger)
                let mended = try await reconciliation.run(apply: true)
                #expect(mended.differences.map(\.kind) == [.renewalDiffers])
                #expect(mended.appended == 1)
                let projection = try await client.account(Self.account, asOf: inGrace)
                #expect(projection["entitlements"] as? [String] == ["com.example.product"])
                #expect((projection["subscriptions"] as? [[String: Any]])?.first?["status"] as? Int == 4)
                let again = try await reconciliation.run(apply: true)
                #expect(again.differences.isEmpty)
                #expect(again.appended == 0)
            }
        }
    }
}

extension ReconciliationTests {
    /// `appStore.reconcile`: the server reconciles on a schedule; what a run appended is not
    /// appended again by the next.
    @Test func theServerReconcilesOnASchedule() async throws {
        let signer = try TestAppStoreSigner()
        let store = FakeAppStore()
        try await Notifications.run(signer: signer) { harness, client in
            _ = try await Notifications.post(try Notifications.notification(
                "SUBSCRIBED", uuid: "s1", transaction: Notifications.transaction(), signer: signer), client)
            store.setHistory([
                try signer.sign(Notifications.transaction()),
                try signer.sign(Notifications.transaction(["transactionId": "23457", "purchaseDate": 1_698_149_000_000, "expiresDate": 1_698_150_000_000])),
            ], of: "12345")
            try await store.run { base in
                let api = try await AppStoreServerAPIClient(credentials: store.credentials, environment: .custom(baseURL: base))
                let service = ReconciliationService(
                    reconciliation: Reconciliation(client: api, verifier: signer.verifier(), ledger: harness.ledger),
                    interval: .milliseconds(50), lookBack: .seconds(3600), logger: Logger(label: "test"))
                let start = harness.ledger.position
                let running = Task { try await service.run() }
                // A bound for a stalled schedule, not a speed: a loaded CI machine took over 20 s.
                let deadline = ContinuousClock.now + .seconds(90)
                while api.requestCount < 9, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
                running.cancel()
                _ = try? await running.value
                // Three runs or more (three requests each); the missed renewal appended once.
                #expect(api.requestCount >= 9)
                #expect(harness.ledger.position == start + 3)
            }
        }
    }

    @Test func aScheduleOutOfRangeIsRefused() throws {
        var configuration = ServerConfiguration(ledger: "/tmp/x", keys: [])
        configuration.appStore = .init(
            bundleId: "com.example", appAppleId: nil, environments: [.sandbox], trustedRoots: ["root.der"],
            api: .init(keyFile: "k.p8", keyId: "K", issuerId: "I"), reconcile: .init(everySeconds: 5))
        #expect(throws: ServerConfigurationError.self) { try configuration.check() }
        configuration.appStore?.reconcile?.everySeconds = 600
        try configuration.check()
        // The schedule and the refund answers call Apple: not without a key.
        configuration.appStore?.api = nil
        #expect(throws: ServerConfigurationError.self) { try configuration.check() }
        configuration.appStore?.api = .init(keyFile: "k.p8", keyId: "K", issuerId: "I")
        configuration.appStore?.consumption = .init(refundPreference: "MAYBE")
        #expect(throws: ServerConfigurationError.self) { try configuration.check() }
        configuration.appStore?.consumption = .init(refundPreference: "GRANT_PRORATED")
        try configuration.check()
    }
}
