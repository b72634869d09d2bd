import Foundation
import Logging
import PurchaseLedger

/// Takes an App Store Server Notification V2 from the request body to the ledger: verifies it,
/// maps it to events, appends them (or records it for audit), and says what it did.
public struct AppStoreNotificationHandler: Sendable {
    public let verifier: AppStoreSignedDataVerifier
    public let unattributed: UnattributedNotificationLog
    /// Answers refund requests; without one they are recorded, not answered.
    public var consumption: ConsumptionResponder?
    let ledger: Ledger

    public init(
        verifier: AppStoreSignedDataVerifier, unattributed: UnattributedNotificationLog, ledger: Ledger,
        consumption: ConsumptionResponder? = nil
    ) {
        self.verifier = verifier
        self.unattributed = unattributed
        self.ledger = ledger
        self.consumption = consumption
    }

    /// The handler `settings` describe: roots read from their files (throws
    /// `AppStoreConfigurationError` when one cannot be), the audit file where the settings say
    /// or beside a ledger in `ledgerDirectory`.
    public static func configured(
        by settings: AppStoreVerificationSettings, ledgerDirectory: String?, ledger: Ledger
    ) throws -> AppStoreNotificationHandler {
        let roots = try AppStoreSignedDataVerifier.loadCertificates(paths: settings.trustedRoots)
        let verifier = AppStoreSignedDataVerifier(
            trustedRoots: roots, bundleId: settings.bundleId, appAppleId: settings.appAppleId, environments: settings.acceptedEnvironments)
        guard let path = settings.unattributedNotifications ?? ledgerDirectory.map({ $0 + "/unattributed-notifications.jsonl" }) else {
            throw AppStoreConfigurationError("\"appStore.unattributedNotifications\" must name a file when the ledger is not a directory")
        }
        return AppStoreNotificationHandler(verifier: verifier, unattributed: UnattributedNotificationLog(path: path), ledger: ledger)
    }

    /// What handling one notification did, as the JSON answered to Apple.
    package struct Handled: Sendable {
        package var notification: AppStoreNotificationPayload
        package var action: AppStoreRecordingAction
        package var outcomes: [AppendResult]

        package var json: String {
            var text = "{\"notificationUUID\": \(JSONString.quoted(notification.notificationUUID))"
            text += ", \"notificationType\": \(JSONString.quoted(notification.notificationType))"
            if let subtype = notification.subtype { text += ", \"subtype\": \(JSONString.quoted(subtype))" }
            text += ", \"action\": \(JSONString.quoted(action.rawValue)), \"outcomes\": "
            return text + AppendResult.reportArray(outcomes) + "}\n"
        }
    }

    /// Throws `AppStoreVerificationError` for a payload that does not verify (nothing is
    /// recorded), and storage errors (Apple retries: the event ids make the retry safe).
    /// `auditing` false (attribution) writes nothing to the audit file: the caller keeps the line.
    package func handle(signedPayload: String, logger: Logger, auditing: Bool = true) async throws -> Handled {
        // The forgets from now on: a line for the audit file that names a customer forgotten
        // while this notification was handled is not written (the forget may have cleared the file).
        let forgets = ledger.forgetMailbox()
        let notification = try await verifier.verifyNotification(signedPayload)
        // What a notification carries is of its environment: never a sandbox transaction in a
        // production notification.
        let carried = verifier.only(verifier.rules(for: notification.identity.environment))
        var transaction: AppStoreTransactionPayload?
        if let signed = notification.data?.signedTransactionInfo {
            transaction = try await carried.verifyTransaction(signed)
        }
        var renewal: AppStoreRenewalPayload?
        if let signed = notification.data?.signedRenewalInfo {
            renewal = try await carried.verifyRenewalInfo(signed)
        }
        var logger = logger
        logger[metadataKey: "notificationUUID"] = LogSafe.metadata(notification.notificationUUID)
        logger[metadataKey: "notificationType"] = LogSafe.metadata(notification.notificationType)

        let action = try AppStoreRecorder.action(
            for: notification, transaction: transaction, renewal: renewal,
            accountHolding: { try ledger.account(holdingTransaction: $0) }, customerAccount: { try ledger.account(ofAppTransaction: $0) },
            chainOwner: { try ledger.account(owningChain: $1, namedBy: $0) })
        switch action {
        case .record(let recording):
            var outcomes = try await AppStoreRecorder(ledger: ledger).record(recording)
            log(outcomes, logger: logger)
            // The store's reports are refused only when they break the format or name a product
            // the catalog lacks: Apple does not send them again, so they are kept for audit.
            let reportCount = recording.reports.count + (recording.consumptionRequest == nil ? 0 : 1)
            let refused = outcomes.suffix(reportCount).compactMap { outcome -> LedgerError? in
                if case .failure(let error) = outcome { error } else { nil }
            }
            if let request = recording.consumptionRequest, case .success? = outcomes.last {
                if let consumption {
                    // A failure to reach Apple throws: the notification is answered with an
                    // error and Apple's redelivery answers again (the request is in the log).
                    if let answered = try await consumption.answer(request, logger: logger) { outcomes.append(answered) }
                } else {
                    logger.notice("refund request recorded, not answered: appStore.consumption is not configured")
                }
            }
            if let first = refused.first, auditing {
                try unattributed.record(notification, transaction: transaction, reason: first.message, signedPayload: signedPayload, forgetsSince: forgets)
                logger.warning("a store report the ledger refused recorded for audit", metadata: ["file": "\(unattributed.path)"])
            }
            return Handled(notification: notification, action: recording.action, outcomes: outcomes)
        case .unattributed(let reason):
            guard auditing else { return Handled(notification: notification, action: .unattributed, outcomes: []) }
            try unattributed.record(notification, transaction: transaction, reason: reason, signedPayload: signedPayload, forgetsSince: forgets)
            logger.warning("notification recorded without an account", metadata: ["reason": LogSafe.metadata(reason), "file": "\(unattributed.path)"])
            return Handled(notification: notification, action: .unattributed, outcomes: [])
        case .ignored(let reason):
            logger.info("notification acknowledged", metadata: ["reason": LogSafe.metadata(reason)])
            return Handled(notification: notification, action: .ignored, outcomes: [])
        case .refused(let reason):
            // Verified, yet undatable: kept for audit like a report the ledger refused.
            if auditing {
                try unattributed.record(notification, transaction: transaction, reason: reason, signedPayload: signedPayload, forgetsSince: forgets)
            }
            logger.warning("notification refused", metadata: ["reason": LogSafe.metadata(reason)])
            return Handled(notification: notification, action: .refused, outcomes: [])
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

    /// What `attributeUnattributed` did.
    public struct Attribution: Sendable, Equatable {
        /// Notifications now recorded under an account.
        public var attributed = 0
        /// Lines kept in the audit file: still without an account, refused again, or unreadable.
        public var kept = 0
    }

    /// Runs the audit file's notifications through the handler again, once apps have sent the
    /// purchases that tell whose they are: those that now have an account are appended (their
    /// event ids come from the notification, so a line handled twice appends nothing twice),
    /// the others stay in the file. Nothing leaves the file before its events are durable.
    public func attributeUnattributed(logger: Logger) async throws -> Attribution {
        var result = Attribution()
        guard let lines = try unattributed.takeForAttribution() else { return result }
        var kept: [String] = []
        for line in lines {
            guard let payload = try? JSONDecoder().decode(AuditLine.self, from: Data(line.utf8)).signedPayload else {
                kept.append(line)
                continue
            }
            let handled: Handled
            do {
                handled = try await handle(signedPayload: payload, logger: logger, auditing: false)
            } catch is AppStoreVerificationError {
                kept.append(line)
                continue
            }
            // A storage failure above stops the run: the moved-aside file stays, for the next.
            let refused = handled.outcomes.contains { outcome in
                if case .failure = outcome { true } else { false }
            }
            if handled.action == .unattributed || handled.action == .refused || refused {
                kept.append(line)
            } else {
                result.attributed += 1
            }
        }
        try unattributed.finishAttribution(keeping: kept)
        result.kept = kept.count
        return result
    }

    private struct AuditLine: Decodable {
        var signedPayload: String
    }
}
