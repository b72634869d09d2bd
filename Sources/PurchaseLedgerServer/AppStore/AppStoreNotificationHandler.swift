import Foundation
import Logging
import PurchaseLedger

/// Takes an App Store Server Notification V2 from the request body to the ledger: verifies it,
/// maps it to events, appends them (or records it for audit), and says what it did.
public struct AppStoreNotificationHandler: Sendable {
    public let verifier: AppStoreSignedDataVerifier
    public let unattributed: UnattributedNotificationLog
    let ledger: Ledger

    public init(verifier: AppStoreSignedDataVerifier, unattributed: UnattributedNotificationLog, ledger: Ledger) {
        self.verifier = verifier
        self.unattributed = unattributed
        self.ledger = ledger
    }

    /// What handling one notification did, as the JSON answered to Apple.
    struct Handled: Sendable {
        var notification: AppStoreNotificationPayload
        var action: String
        var outcomes: [AppendResult]

        var json: String {
            var text = "{\"notificationUUID\": \(JSONString.quoted(notification.notificationUUID))"
            text += ", \"notificationType\": \(JSONString.quoted(notification.notificationType))"
            if let subtype = notification.subtype { text += ", \"subtype\": \(JSONString.quoted(subtype))" }
            text += ", \"action\": \(JSONString.quoted(action)), \"outcomes\": ["
            text += outcomes.enumerated().map { $0.element.reportLine($0.offset + 1) }.joined(separator: ", ")
            return text + "]}\n"
        }
    }

    /// Throws `AppStoreVerificationError` for a payload that does not verify (nothing is
    /// recorded), and storage errors (Apple retries: the event ids make the retry safe).
    func handle(signedPayload: String, logger: Logger) async throws -> Handled {
        let notification = try await verifier.verifyNotification(signedPayload)
        var transaction: AppStoreTransactionPayload?
        if let signed = notification.data?.signedTransactionInfo {
            transaction = try await verifier.verifyTransaction(signed)
        }
        var renewal: AppStoreRenewalPayload?
        if let signed = notification.data?.signedRenewalInfo {
            renewal = try await verifier.verifyRenewalInfo(signed)
        }
        var logger = logger
        logger[metadataKey: "notificationUUID"] = LogSafe.metadata(notification.notificationUUID)
        logger[metadataKey: "notificationType"] = LogSafe.metadata(notification.notificationType)

        let action = try AppStoreNotificationEvents.action(for: notification, transaction: transaction, renewal: renewal) {
            try ledger.account(holdingTransaction: $0)
        }
        switch action {
        case .record(let recording):
            var outcomes: [AppendResult] = []
            if let (purchase, finish) = recording.purchase {
                outcomes += try await ledger.append(contentsOf: [purchase])
                if case .success = outcomes[0] {
                    // Also on a duplicate: a retry after a crash between the two finishes the entry.
                    outcomes += try await ledger.append(contentsOf: [finish])
                }
            }
            outcomes += try await ledger.append(contentsOf: recording.reports)
            log(outcomes, logger: logger)
            // The store's reports are refused only when they break the format or name a product
            // the catalog lacks: Apple does not send them again, so they are kept for audit.
            let refused = outcomes.suffix(recording.reports.count).compactMap { outcome -> LedgerError? in
                if case .failure(let error) = outcome { error } else { nil }
            }
            if let first = refused.first {
                try unattributed.record(notification, transaction: transaction, reason: first.message, signedPayload: signedPayload)
                logger.warning("a store report the ledger refused recorded for audit", metadata: ["file": "\(unattributed.path)"])
            }
            return Handled(notification: notification, action: recording.summary, outcomes: outcomes)
        case .unattributed(let reason):
            try unattributed.record(notification, transaction: transaction, reason: reason, signedPayload: signedPayload)
            logger.warning("notification recorded without an account", metadata: ["reason": LogSafe.metadata(reason), "file": "\(unattributed.path)"])
            return Handled(notification: notification, action: "unattributed", outcomes: [])
        case .ignored(let reason):
            logger.info("notification acknowledged", metadata: ["reason": LogSafe.metadata(reason)])
            return Handled(notification: notification, action: "ignored", outcomes: [])
        }
    }

    private func log(_ outcomes: [AppendResult], logger: Logger) {
        for outcome in outcomes {
            switch outcome {
            case .success(let result):
                logger.info("notification applied", metadata: ["outcome": "\(result)"])
            case .failure(let error):
                // transactionAlreadyCredited: another account holds the transaction.
                logger.notice("notification not applied", metadata: ["error": LogSafe.metadata("\(error)")])
            }
        }
    }
}
