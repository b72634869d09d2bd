import PurchaseLedger
import X509

/// Checks the proofs the store's events carry (`signed`: the JWS Apple signed, kept by the
/// server and by reconciliation): each verifies against the trusted roots, as of when Apple
/// signed it, for this app, and says what the event says (its transaction, original transaction,
/// product and signing time). An event whose proof fails was not written from Apple's data.
public struct StoreProofs: Sendable {
    /// What the check found.
    public struct Report: Sendable {
        /// Store events whose proof verified and agrees.
        public var proven = 0
        /// Store events without a proof (written by hand, by a back office, or before proofs were
        /// kept), or from Xcode and LocalTesting, which Apple does not sign.
        public var unproven = 0
        /// Store events whose proof does not verify or contradicts the event, by position.
        public var disproven: [(position: UInt64, eventID: String, reason: String)] = []

        public init() {}
    }

    let verifiers: [StoreEnvironment: AppStoreSignedDataVerifier]

    public init(trustedRoots: [Certificate], bundleId: String, appAppleId: Int64?) {
        var verifiers: [StoreEnvironment: AppStoreSignedDataVerifier] = [:]
        for environment in [StoreEnvironment.production, .sandbox] {
            verifiers[environment] = AppStoreSignedDataVerifier(
                trustedRoots: trustedRoots, bundleId: bundleId, appAppleId: appAppleId, environment: environment)
        }
        self.verifiers = verifiers
    }

    /// Checks one record; other events are not counted.
    public func check(_ record: LogRecord, into report: inout Report) async {
        let event = record.event
        let reason: String?
        switch event.payload {
        case .storeTransaction(let fact):
            guard let signed = fact.signed, let verifier = verifiers[fact.environment ?? .production] else {
                report.unproven += 1
                return
            }
            reason = await disagreement(of: fact, at: event.at, with: signed, verifier: verifier)
        case .renewalInfo(let info):
            guard let signed = info.signed, let verifier = verifiers[info.environment ?? .production] else {
                report.unproven += 1
                return
            }
            reason = await disagreement(of: info, at: event.at, with: signed, verifier: verifier)
        default:
            return
        }
        if let reason {
            report.disproven.append((record.position, event.id, reason))
        } else {
            report.proven += 1
        }
    }

    private func disagreement(of fact: StoreTransaction, at signedAt: Timestamp, with signed: String, verifier: AppStoreSignedDataVerifier) async -> String? {
        let payload: AppStoreTransactionPayload
        do {
            payload = try await verifier.verifyTransaction(signed)
        } catch {
            return "the proof does not verify: \(error)"
        }
        if payload.transactionId != fact.transaction { return "the proof is of transaction \(payload.transactionId ?? "none")" }
        if let reason = Self.timeDisagreement(payload.signedDate, signedAt) { return reason }
        // Every field the event carries is what Apple signed: the event as the recorder would
        // write it from the proof, but for what the ledger adds (where it came from, the proof).
        var proven = AppStoreRecorder.storeTransaction(payload, id: fact.transaction, source: "", signed: fact.signed)
        proven.source = fact.source
        if Self.revocationIsTheNotifications(fact) {
            // REFUND, REVOKE and REFUND_REVERSED say refunded or not by their type: the
            // transaction they carry is Apple's, its revocation the notification's.
            (proven.revokedAt, proven.revocationReason, proven.revocationType, proven.revocationPercentage) =
                (fact.revokedAt, fact.revocationReason, fact.revocationType, fact.revocationPercentage)
        }
        if fact == fact.withoutSaleDetails {
            // Written before the ledger kept Apple's fields of API 1.15–1.21: it carries none.
            proven = proven.withoutSaleDetails
        }
        guard proven != fact else { return nil }
        let differing = Self.differingFields(fact, proven)
        return "the proof says otherwise of \(differing.joined(separator: ", "))"
    }

    /// Whether the event's revocation comes from a notification's type rather than from the
    /// transaction it carries.
    private static func revocationIsTheNotifications(_ fact: StoreTransaction) -> Bool {
        guard let source = fact.source, source.hasPrefix("notification ") else { return false }
        let type = source.dropFirst("notification ".count).prefix { $0 != " " }
        return AppStoreRecorder.revocationTypes.contains(String(type)) || AppStoreRecorder.reversalTypes.contains(String(type))
    }

    /// The names of the fields in which two reports differ, as the format spells them.
    private static func differingFields(_ fact: StoreTransaction, _ proven: StoreTransaction) -> [String] {
        var names: [String] = []
        func check<Value: Equatable>(_ name: String, _ path: KeyPath<StoreTransaction, Value>) {
            if fact[keyPath: path] != proven[keyPath: path] { names.append(name) }
        }
        check("originalTransaction", \.originalTransaction)
        check("product", \.product)
        check("quantity", \.quantity)
        check("purchasedAt", \.purchasedAt)
        check("expiresAt", \.expiresAt)
        check("subscriptionGroup", \.subscriptionGroup)
        check("ownership", \.ownership)
        check("environment", \.environment)
        check("price", \.price)
        check("currency", \.currency)
        check("storefront", \.storefront)
        check("revokedAt", \.revokedAt)
        check("revocationReason", \.revocationReason)
        check("revocationType", \.revocationType)
        check("revocationPercentage", \.revocationPercentage)
        check("upgraded", \.upgraded)
        check("originalPurchasedAt", \.originalPurchasedAt)
        check("webOrderLineItem", \.webOrderLineItem)
        check("storefrontId", \.storefrontId)
        check("transactionReason", \.transactionReason)
        check("offerType", \.offerType)
        check("offerIdentifier", \.offerIdentifier)
        check("offerDiscountType", \.offerDiscountType)
        check("offerPeriod", \.offerPeriod)
        check("appTransaction", \.appTransaction)
        check("appAccountToken", \.appAccountToken)
        check("billingPlanType", \.billingPlanType)
        check("commitmentBillingPeriod", \.commitmentBillingPeriod)
        check("commitmentBillingPeriods", \.commitmentBillingPeriods)
        check("commitmentExpiresAt", \.commitmentExpiresAt)
        check("commitmentPrice", \.commitmentPrice)
        return names.isEmpty ? ["a field"] : names
    }

    private func disagreement(of info: RenewalInfo, at signedAt: Timestamp, with signed: String, verifier: AppStoreSignedDataVerifier) async -> String? {
        let payload: AppStoreRenewalPayload
        do {
            payload = try await verifier.verifyRenewalInfo(signed)
        } catch {
            return "the proof does not verify: \(error)"
        }
        if payload.originalTransactionId != info.originalTransaction {
            return "the proof is of original transaction \(payload.originalTransactionId ?? "none")"
        }
        if let reason = Self.timeDisagreement(payload.signedDate, signedAt) { return reason }
        var proven = AppStoreRecorder.renewalInfo(payload, original: info.originalTransaction, source: "")
        (proven.source, proven.signed) = (info.source, info.signed)
        if info == info.withoutRenewalDetails {
            proven = proven.withoutRenewalDetails
        }
        return proven == info ? nil : "the proof says otherwise of the renewal info's fields"
    }

    /// The event's `at` is Apple's `signedDate`, to the nanosecond. A proof without one proves
    /// no time: such an event was dated by the server's clock, which the recorder no longer does.
    private static func timeDisagreement(_ signedDate: Double?, _ at: Timestamp) -> String? {
        guard let signedDate else { return "the proof has no signedDate" }
        let time = AppStoreRecorder.timestamp(signedDate)
        return time == at ? nil : "the proof was signed at \(time), the event says \(at)"
    }
}
