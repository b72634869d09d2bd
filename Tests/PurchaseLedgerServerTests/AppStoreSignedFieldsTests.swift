import Foundation
import HTTPTypes
import PurchaseLedger
@testable import PurchaseLedgerAppStore
import Testing
import LedgerTestSupport

/// Every field Apple signs that a business needs (API 1.15–1.21) is kept in the store's events,
/// read back from the log, shown in the account's answer, and proven by `StoreProofs`; values
/// Apple adds later are kept as given, and a value of the wrong type is left out, not a reason
/// to refuse the report. Built from Apple's own `signedTransaction.json` and
/// `signedRenewalInfo.json`.
struct AppStoreSignedFieldsTests {
    typealias Notifications = AppStoreNotificationTests

    @Test func everyFieldOfApplesModelsIsKeptAndShown() async throws {
        let signer = try TestAppStoreSigner()
        try await Notifications.run(signer: signer) { harness, client in
            let body = try Notifications.notification(
                "SUBSCRIBED", uuid: "u1", transaction: Notifications.transaction(), renewal: Notifications.renewal(), signer: signer)
            let answer = try await Notifications.post(body, client)
            #expect(answer.status == .ok)

            // Read back from storage: the binary records carry every field.
            let records = try harness.ledger.history(account: Notifications.account)
            let fact = try #require(records.lazy.compactMap { record -> StoreTransaction? in
                if case .storeTransaction(let fact) = record.event.payload { fact } else { nil }
            }.first)
            #expect(fact.originalPurchasedAt == Timestamp(seconds: 1_698_148_800))
            #expect(fact.webOrderLineItem == "34343")
            #expect(fact.storefrontId == "143441")
            #expect(fact.transactionReason == "PURCHASE")
            #expect(fact.offerType == 1)
            #expect(fact.offerIdentifier == "abc.123")
            #expect(fact.offerDiscountType == "PAY_AS_YOU_GO")
            #expect(fact.offerPeriod == "P1Y")
            #expect(fact.appTransaction == "71134")
            #expect(fact.appAccountToken == "7e3fb20b-4cdb-47cc-936d-99d65f608138")
            #expect(fact.billingPlanType == "MONTHLY")
            #expect(fact.commitmentBillingPeriod == 3)
            #expect(fact.commitmentBillingPeriods == 12)
            #expect(fact.commitmentExpiresAt == Timestamp(seconds: 1_698_150_000))
            #expect(fact.commitmentPrice == 119_880)

            let info = try #require(records.lazy.compactMap { record -> RenewalInfo? in
                if case .renewalInfo(let info) = record.event.payload { info } else { nil }
            }.first)
            #expect(info.renewalPrice == 9990)
            #expect(info.currency == "USD")
            #expect(info.renewsAt == Timestamp(seconds: 1_698_148_850))
            #expect(info.recentSubscriptionStartedAt == Timestamp(seconds: 1_698_148_800))
            #expect(info.priceIncreaseStatus == 0)
            #expect(info.offerType == 2)
            #expect(info.offerIdentifier == "abc.123")
            #expect(info.offerDiscountType == "PAY_AS_YOU_GO")
            #expect(info.offerPeriod == "P1Y")
            #expect(info.eligibleWinBackOffers == ["eligible1", "eligible2"])
            #expect(info.appTransaction == "71134")
            #expect(info.appAccountToken == "7e3fb20b-4cdb-47cc-936d-99d65f608138")
            #expect(info.billingPlanType == "MONTHLY")
            #expect(info.commitmentRenewsTo == "com.example.product.commitment")
            #expect(info.commitmentWillRenew == true)
            #expect(info.commitmentBillingPlanType == "MONTHLY")
            #expect(info.commitmentRenewsAt == Timestamp(seconds: 1_698_149_500))
            #expect(info.commitmentRenewalPrice == 9990)

            // The account's answer: the store view carries the fields, the status knows the plan.
            let account = try await client.account(Notifications.account, asOf: Notifications.duringSubscription)
            let shown = try #require((account["storeTransactions"] as? [[String: Any]])?.first)
            #expect(shown["appTransaction"] as? String == "71134")
            #expect(shown["offerDiscountType"] as? String == "PAY_AS_YOU_GO")
            #expect(shown["commitmentBillingPeriods"] as? Int == 12)
            #expect(shown["originalPurchasedAt"] as? String == "2023-10-24T12:00:00Z")
            let subscription = try #require((account["subscriptions"] as? [[String: Any]])?.first)
            #expect(subscription["billingPlanType"] as? String == "MONTHLY")
            let commitment = try #require(subscription["commitment"] as? [String: Any])
            #expect(commitment["period"] as? Int == 3)
            #expect(commitment["periods"] as? Int == 12)
            #expect(commitment["expiresAt"] as? String == "2023-10-24T12:20:00Z")
            #expect(commitment["price"] as? Int == 119_880)
            #expect(commitment["renewsTo"] as? String == "com.example.product.commitment")
            #expect(commitment["willRenew"] as? Bool == true)
            // The renewal info in force, whole (issue 41, point 9), but what identifies the
            // customer and the proof.
            let renewal = try #require(subscription["renewal"] as? [String: Any])
            #expect(renewal["originalTransaction"] as? String == "12345")
            #expect(renewal["expirationIntent"] as? Int == 1)
            #expect(renewal["renewalPrice"] as? Int == 9990)
            #expect(renewal["currency"] as? String == "USD")
            #expect(renewal["renewsAt"] as? String == "2023-10-24T12:00:50Z")
            #expect(renewal["recentSubscriptionStartedAt"] as? String == "2023-10-24T12:00:00Z")
            #expect(renewal["priceIncreaseStatus"] as? Int == 0)
            #expect(renewal["offerType"] as? Int == 2)
            #expect(renewal["offerIdentifier"] as? String == "abc.123")
            #expect(renewal["offerDiscountType"] as? String == "PAY_AS_YOU_GO")
            #expect(renewal["offerPeriod"] as? String == "P1Y")
            #expect(renewal["eligibleWinBackOffers"] as? [String] == ["eligible1", "eligible2"])
            #expect(renewal["billingPlanType"] as? String == "MONTHLY")
            #expect(renewal["commitmentRenewsTo"] as? String == "com.example.product.commitment")
            #expect(renewal["commitmentWillRenew"] as? Bool == true)
            #expect(renewal["commitmentBillingPlanType"] as? String == "MONTHLY")
            #expect(renewal["commitmentRenewsAt"] as? String == "2023-10-24T12:11:40Z")
            #expect(renewal["commitmentRenewalPrice"] as? Int == 9990)
            for hidden in ["appTransaction", "appAccountToken", "source", "signed"] {
                #expect(renewal[hidden] == nil, "\(hidden) is not shown")
            }

            // The event's JSON names them as docs/FORMAT.md does, and reads back the same.
            for record in records {
                #expect(try Event(jsonLine: record.event.jsonLine) == record.event)
            }
        }
    }

    /// An enumeration value Apple adds later is kept as given; a value of another type than
    /// Apple documents, or out of the format's range, is left out; the report still counts.
    @Test func newValuesAreKeptAndMistypedOnesLeftOut() async throws {
        let signer = try TestAppStoreSigner()
        try await Notifications.run(signer: signer) { harness, client in
            let transaction = try Notifications.transaction([
                "offerDiscountType": "A_DISCOUNT_APPLE_ADDS_IN_2027", "offerType": 500, "billingPlanType": 7,
                "commitmentInfo": ["billingPeriodNumber": "three", "totalBillingPeriods": 12],
                "originalPurchaseDate": 1e18,
            ])
            let renewal = try Notifications.renewal(["eligibleWinBackOfferIds": "not an array", "priceIncreaseStatus": 2])
            let body = try Notifications.notification("DID_RENEW", uuid: "u2", transaction: transaction, renewal: renewal, signer: signer)
            let answer = try await Notifications.post(body, client).object
            #expect((answer["outcomes"] as? [[String: Any]])?.map { $0["outcome"] as? String } == ["appended", "appended", "appended", "appended"])
            let records = try harness.ledger.history(account: Notifications.account)
            guard case .storeTransaction(let fact) = records[2].event.payload, case .renewalInfo(let info) = records[3].event.payload else {
                throw TestFailure("not the reports: \(records)")
            }
            #expect(fact.offerDiscountType == "A_DISCOUNT_APPLE_ADDS_IN_2027")
            #expect(fact.offerType == nil)
            #expect(fact.billingPlanType == nil)
            #expect(fact.commitmentBillingPeriod == nil)
            #expect(fact.commitmentBillingPeriods == 12)
            #expect(fact.originalPurchasedAt == nil)
            #expect(fact.appTransaction == "71134")
            #expect(info.eligibleWinBackOffers == nil)
            #expect(info.priceIncreaseStatus == 2)
            let account = try await client.account(Notifications.account, asOf: Notifications.duringSubscription)
            #expect(account["entitlements"] as? [String] == ["com.example.product"])
        }
    }

    /// A proof is checked on every field the event carries, the new ones too; an event written
    /// before the ledger kept them (it carries none) is still proven by the same proof.
    @Test func proofsCoverTheNewFieldsAndOldEventsStayProven() async throws {
        let signer = try TestAppStoreSigner()
        let transaction = try Notifications.transaction()
        let signed = try signer.sign(transaction)
        let payload = try JSONDecoder().decode(AppStoreTransactionPayload.self, from: JSONSerialization.data(withJSONObject: transaction))
        let fact = AppStoreRecorder.storeTransaction(payload, id: "23456", source: "reconcile", signed: signed)
        #expect(fact.appTransaction == "71134")
        let at = AppStoreRecorder.timestamp(try #require(payload.signedDate))
        var forged = fact
        forged.offerIdentifier = "a.better.offer"
        var partial = fact
        partial.commitmentPrice = nil

        let renewal = try Notifications.renewal()
        let signedRenewal = try signer.sign(renewal)
        let renewalPayload = try JSONDecoder().decode(AppStoreRenewalPayload.self, from: JSONSerialization.data(withJSONObject: renewal))
        var info = AppStoreRecorder.renewalInfo(renewalPayload, original: "12345", source: "reconcile")
        info.signed = signedRenewal
        let renewalAt = AppStoreRecorder.timestamp(try #require(renewalPayload.signedDate))
        var forgedInfo = info
        forgedInfo.renewalPrice = 1

        let proofs = StoreProofs(trustedRoots: [signer.root], bundleId: FakeAppStore.bundleID, appAppleId: 41234)
        var report = StoreProofs.Report()
        let events: [Event] = [
            .storeTransaction(id: "whole", account: "a", signedAt: at, fact),
            .storeTransaction(id: "written-before", account: "a", signedAt: at, fact.withoutSaleDetails),
            .storeTransaction(id: "forged", account: "a", signedAt: at, forged),
            .storeTransaction(id: "partial", account: "a", signedAt: at, partial),
            .renewalInfo(id: "renewal", account: "a", signedAt: renewalAt, info),
            .renewalInfo(id: "renewal-written-before", account: "a", signedAt: renewalAt, info.withoutRenewalDetails),
            .renewalInfo(id: "renewal-forged", account: "a", signedAt: renewalAt, forgedInfo),
        ]
        for (offset, event) in events.enumerated() {
            await proofs.check(LogRecord(position: UInt64(offset + 1), event: event), into: &report)
        }
        #expect(report.proven == 4)
        #expect(report.disproven.map(\.eventID) == ["forged", "partial", "renewal-forged"])
        #expect(report.disproven.first?.reason.contains("offerIdentifier") == true)
        #expect(report.disproven.dropFirst().first?.reason.contains("commitmentPrice") == true)
    }
}
