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
        for (environment, apple) in [(StoreEnvironment.production, AppStoreEnvironment.production), (.sandbox, .sandbox)] {
            verifiers[environment] = AppStoreSignedDataVerifier(
                trustedRoots: trustedRoots, bundleId: bundleId, appAppleId: appAppleId, environment: apple)
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
        if let original = fact.originalTransaction, payload.originalTransactionId != original {
            return "the proof's original transaction is \(payload.originalTransactionId ?? "none")"
        }
        if payload.productId != fact.product { return "the proof is of product \(payload.productId ?? "none")" }
        return Self.timeDisagreement(payload.signedDate, signedAt)
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
        return Self.timeDisagreement(payload.signedDate, signedAt)
    }

    /// The event's `at` is Apple's `signedDate` (events written when Apple gave none are
    /// dated by the notification, and their proof has none).
    private static func timeDisagreement(_ signedDate: Double?, _ at: Timestamp) -> String? {
        guard let signedDate else { return nil }
        let time = AppStoreNotificationEvents.timestamp(signedDate)
        return time == at ? nil : "the proof was signed at \(time), the event says \(at)"
    }
}
