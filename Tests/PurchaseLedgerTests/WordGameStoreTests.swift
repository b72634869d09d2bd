import Testing
@testable import PurchaseLedger
@testable import PurchaseLedgerLMDB
import PurchaseLedgerLocation
import LedgerTestSupport

/// The word game's store through the situations that lose apps money and trust: ten hints
/// (+10), a hundred hints (+100), hard words and iOS words (non-consumable).
struct WordGameStoreTests {
    static let tenHints = "com.example.tenhints"
    static let hundredHints = "com.example.hundredhints"
    static let hardWords = "com.example.hardwords"
    static let iosWords = "com.example.ioswords"

    @Test func buyingHintsAndWordPacks() async throws {
        try await withLedger { ledger, _ in
            var s = Script("ana")
            try await ledger.appendAll([
                s.add("p1", Self.tenHints), s.update("p1", .purchasing), s.purchased("p1", "1000001"), s.finish("p1"),
                s.add("p2", Self.hundredHints, quantity: 2), s.update("p2", .purchasing), s.purchased("p2", "1000002"), s.finish("p2"),
                s.add("p3", Self.hardWords), s.update("p3", .purchasing), s.purchased("p3", "1000003"), s.finish("p3"),
                s.consume("hints", 25),
            ])
            let owned = try #require(try ledger.projection(of: "ana"))
            #expect(owned.balances == ["hints": 10 + 2 * 100 - 25])
            #expect(owned.entitlements == [Self.hardWords])
            #expect(owned.unfinished.isEmpty)
            #expect(try ledger.projection(of: "ben") == nil)
        }
    }

    @Test func crashBeforeFinishThenRelaunchCreditsOnce() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/ledger"
            var s = Script("ana")
            let purchase = s.purchased("p1", "1000001")
            do {
                let ledger = try Ledger.open(at: path, catalog: wordGameCatalog, configuration: .testing)
                try await ledger.appendAll([s.add("p1", Self.tenHints), s.update("p1", .purchasing), purchase])
                // The app crashes here: the content was delivered to the ledger, the transaction never finished.
                await ledger.close()
            }
            let relaunched = try Ledger.open(at: path, configuration: .testing)
            #expect(try relaunched.balances(of: "ana") == ["hints": 10])
            #expect(try relaunched.unfinished(of: "ana").map(\.payment) == ["p1"])
            // At launch StoreKit redelivers the unfinished transaction, under a new callback id.
            let redelivered = try await relaunched.append(s.again(purchase))
            #expect(redelivered == .duplicate(of: 3))
            // A new session may even present it as a payment the app never added: the entry
            // takes the transaction without a second credit, and can be finished (1.1).
            let unknown = try await relaunched.append(s.purchased("p9", "1000001", product: Self.tenHints))
            #expect(unknown == .appended(position: 4))
            #expect(try relaunched.unfinished(of: "ana").map(\.payment) == ["p1", "p9"])
            try await relaunched.appendAll([s.finish("p1"), s.finish("p9")])
            #expect(try relaunched.balances(of: "ana") == ["hints": 10])
            #expect(try relaunched.unfinished(of: "ana").isEmpty)
            await relaunched.close()
        }
    }

    @Test func askToBuyApprovedLater() async throws {
        try await withLedger { ledger, _ in
            var child = Script("kid")
            try await ledger.appendAll([child.add("p1", Self.iosWords), child.update("p1", .purchasing), child.update("p1", .deferred)])
            // Deferred: not owned, not finishable, still unfinished (StoreKit will report again).
            #expect(try ledger.entitlements(of: "kid").isEmpty)
            #expect(try await ledger.append(contentsOf: [child.finish("p1")])[0].code == .notFinishable)
            #expect(try ledger.unfinished(of: "kid").map(\.state) == [.deferred])
            // A parent approves a day later.
            try await ledger.appendAll([child.purchased("p1", "2000001"), child.finish("p1")])
            #expect(try ledger.entitlements(of: "kid") == [Self.iosWords])
        }
    }

    @Test func askToBuyApprovedAfterRelaunchArrivesAsANewEntry() async throws {
        try await withLedger { ledger, _ in
            var child = Script("kid")
            try await ledger.appendAll([child.add("p1", Self.iosWords), child.update("p1", .deferred)])
            try await ledger.appendAll([child.purchased("approved-1", "2000001", product: Self.iosWords), child.finish("approved-1")])
            #expect(try ledger.entitlements(of: "kid") == [Self.iosWords])
            #expect(try ledger.unfinished(of: "kid").map(\.payment) == ["p1"])
        }
    }

    @Test func interruptedPurchaseFailsThenSucceedsOnANewEntry() async throws {
        try await withLedger { ledger, _ in
            var s = Script("ana")
            try await ledger.appendAll([
                s.add("p1", Self.hundredHints), s.update("p1", .purchasing),
                s.update("p1", .failed, error: "paymentCancelled"), s.finish("p1"),
            ])
            #expect(try ledger.balances(of: "ana").isEmpty)
            // After the user updates their payment details, StoreKit delivers the purchase.
            try await ledger.appendAll([s.purchased("p2", "3000001", product: Self.hundredHints), s.finish("p2")])
            #expect(try ledger.balances(of: "ana") == ["hints": 100])
            // The failed entry cannot be revived.
            #expect(try await ledger.append(contentsOf: [s.purchased("p1", "3000002")])[0].code == .entryFinished)
        }
    }

    @Test func restoreOnANewDevice() async throws {
        try await withLedger { ledger, _ in
            var phone = Script("ana")
            try await ledger.appendAll([
                phone.add("p1", Self.hardWords), phone.purchased("p1", "4000001"), phone.finish("p1"),
                phone.add("p2", Self.tenHints), phone.purchased("p2", "4000002"), phone.finish("p2"),
            ])
            var tablet = Script("ana")
            tablet.count = 100
            try await ledger.appendAll([
                tablet.update("r1", .restored, transaction: "4000101", original: "4000001", product: Self.hardWords),
                tablet.finish("r1"),
            ])
            // Consumables are never restored.
            let hints = try await ledger.append(contentsOf: [
                tablet.update("r2", .restored, transaction: "4000102", original: "4000002", product: Self.tenHints),
            ])
            #expect(hints[0].code == .notRestorable)
            #expect(try ledger.entitlements(of: "ana") == [Self.hardWords])
            #expect(try ledger.balances(of: "ana") == ["hints": 10])
        }
    }

    @Test func downloadsMustEndBeforeFinish() async throws {
        try await withLedger { ledger, _ in
            var s = Script("ana")
            try await ledger.appendAll([
                s.add("p1", Self.iosWords), s.purchased("p1", "5000001"),
                s.download("p1", "words", .waiting), s.download("p1", "words", .active, progress: 0.4, remaining: 12),
            ])
            #expect(try await ledger.append(contentsOf: [s.finish("p1")])[0].code == .downloadsPending)
            let unfinished = try ledger.unfinished(of: "ana")
            #expect(unfinished.first?.downloads == [DownloadStatus(id: "words", state: .active, progress: 0.4)])
            try await ledger.appendAll([s.download("p1", "words", .finished, progress: 1), s.finish("p1")])
            #expect(try ledger.unfinished(of: "ana").isEmpty)
            #expect(try ledger.entitlements(of: "ana") == [Self.iosWords])
        }
    }

    @Test func refundTakesBackHintsAndWordPacks() async throws {
        try await withLedger { ledger, _ in
            var s = Script("ana")
            try await ledger.appendAll([
                s.add("p1", Self.hundredHints), s.purchased("p1", "6000001"), s.finish("p1"),
                s.add("p2", Self.hardWords), s.purchased("p2", "6000002"), s.finish("p2"),
                s.consume("hints", 60),
            ])
            try await ledger.appendAll([s.revoke("6000001", reason: "refund"), s.revoke("6000002")])
            // 100 credited, 60 spent, 100 taken back: the balance goes negative, never clamped.
            #expect(try ledger.balances(of: "ana") == ["hints": -60])
            #expect(try ledger.entitlements(of: "ana").isEmpty)
            #expect(try await ledger.append(contentsOf: [s.consume("hints", 1)])[0].code == .insufficientBalance)
        }
    }

    @Test func subscriptionsExpireAndRenew() async throws {
        try await withLedger { ledger, _ in
            var s = Script("ana")
            let january = Timestamp(seconds: newYear.seconds + 31 * 86_400)
            let february = Timestamp(seconds: january.seconds + 28 * 86_400)
            try await ledger.appendAll([
                s.add("p1", "com.example.pro.month"), s.purchased("p1", "7000001", expires: january), s.finish("p1"),
            ])
            #expect(try ledger.entitlements(of: "ana", asOf: newYear) == ["com.example.pro.month"])
            #expect(try ledger.entitlements(of: "ana", asOf: january).isEmpty, "expiresAt must be after the as-of time")
            try await ledger.appendAll([
                s.purchased("renewal-1", "7000002", product: "com.example.pro.month", original: "7000001", expires: february),
            ])
            #expect(try ledger.entitlements(of: "ana", asOf: january) == ["com.example.pro.month"])
            // Revoking the original transaction ends every renewal of it.
            try await ledger.appendAll([s.revoke("7000001")])
            #expect(try ledger.entitlements(of: "ana", asOf: january).isEmpty)
        }
    }

    /// Spec 1.1: the App Store's notification recorded the purchase (and the server finished
    /// its entry) before the app reported it. The app's entry is appended without a second
    /// credit and can be finished; a refund debits the crediting entry once; a replay of the
    /// log, an account read back from a snapshot, and `verify` agree.
    @Test(arguments: Backend.available)
    func theStoreReportedThePurchaseBeforeTheDevice(on backend: Backend) async throws {
        var configuration = Ledger.Configuration.testing
        configuration.snapshotInterval = 3
        configuration.cachedAccounts = 0
        try await withLedger(on: backend, configuration: configuration) { ledger, location in
            var s = Script("ana")
            var other = Script("ben")
            try await ledger.appendAll([
                s.purchased("appstore-1000001", "1000001", product: Self.hundredHints), s.finish("appstore-1000001"),
                s.add("p1", Self.hundredHints), s.update("p1", .purchasing),
            ])
            let devicePurchase = s.purchased("p1", "1000001")
            #expect(try await ledger.append(devicePurchase) == .appended(position: 5))
            #expect(try ledger.balances(of: "ana") == ["hints": 100])
            #expect(try ledger.unfinished(of: "ana").map(\.payment) == ["p1"])
            #expect(try await ledger.append(s.again(devicePurchase)) == .duplicate(of: 5))
            // Another account still never takes it.
            let stolen = try await ledger.append(contentsOf: [other.purchased("p1", "1000001", product: Self.hundredHints)])
            #expect(stolen[0].code == .transactionAlreadyCredited)
            try await ledger.appendAll([s.finish("p1"), s.consume("hints", 30)])
            #expect(try ledger.unfinished(of: "ana").isEmpty)
            try await ledger.appendAll([s.revoke("1000001", reason: "refund")])
            // 100 credited once, 30 spent, 100 taken back once.
            #expect(try ledger.balances(of: "ana") == ["hints": -30])

            let appended = try ledger.currentState()
            await ledger.close()
            var replaying = Ledger.Configuration.testing
            replaying.useSnapshots = false
            replaying.readOnly = true
            let replayed = try Ledger.open(location: location, configuration: replaying)
            #expect(try replayed.currentState() == appended)
            await replayed.close()
            var fromSnapshot = Ledger.Configuration.testing
            fromSnapshot.readOnly = true
            fromSnapshot.cachedAccounts = 0
            let reopened = try Ledger.open(location: location, configuration: fromSnapshot)
            #expect(try reopened.balances(of: "ana") == ["hints": -30])
            await reopened.close()
            let log = try LedgerLog.open(location: location)
            #expect(log.verify().isIntact)
            log.close()
        }
    }

    @Test func aRefundSeenBeforeItsPurchaseStillCounts() async throws {
        // Revocations are ledger-wide facts about a store transaction: a consumable purchased
        // under an already revoked transaction id nets to nothing.
        try await withLedger { ledger, _ in
            var s = Script("ana")
            try await ledger.appendAll([
                s.add("p1", "com.example.pro.month"), s.purchased("p1", "8000002", original: "8000001"), s.revoke("8000001"),
                s.purchased("p2", "8000001", product: Self.tenHints),
            ])
            #expect(try ledger.balances(of: "ana") == ["hints": 0])
        }
    }
}
