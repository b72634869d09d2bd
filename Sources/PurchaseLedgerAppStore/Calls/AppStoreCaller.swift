import AppStoreServerAPI
import Foundation
import Logging
import PurchaseLedger

/// Makes the calls the log owes Apple (`DueAppStoreCall`), each once, and records Apple's
/// answer as an `appStoreCall` event.
///
/// A follower of the log with a checkpoint stored with the data (the feed state): it reads the
/// records after the checkpoint in order, makes the calls each one makes due that no event
/// records yet, and moves the checkpoint past a record once its calls are answered. A call
/// Apple cannot answer now (unreachable, busy, the key refused) holds the checkpoint where it is
/// and is tried again after a pause, doubling up to `longestPause`; a restart resumes from the
/// checkpoint, and the event ids keep a call made before a crash from being recorded twice.
public struct AppStoreCaller: Sendable {
    public let settings: AppStoreCallSettings
    /// Apple's API in each environment; a call of an environment without a client is skipped.
    public let clients: [(environment: StoreEnvironment, client: AppStoreServerAPIClient)]
    /// Verifies the app transactions Apple answers with; without one, none is read.
    public let verifier: AppStoreSignedDataVerifier?
    let ledger: Ledger
    let logger: Logger
    /// How long to wait after a call Apple could not answer, at first and at most.
    public var firstPause: Duration = .seconds(1)
    public var longestPause: Duration = .seconds(300)
    /// How often to look for new records when caught up.
    public var pollInterval: Duration = .seconds(1)

    /// Where the checkpoint is kept (`Ledger.feedState`).
    public static let checkpointKey = "appstore-calls/checkpoint"

    public init(
        settings: AppStoreCallSettings, clients: [(environment: StoreEnvironment, client: AppStoreServerAPIClient)],
        verifier: AppStoreSignedDataVerifier? = nil, ledger: Ledger, logger: Logger = Logger(label: "AppStoreCaller")
    ) {
        self.settings = settings
        self.clients = clients
        self.verifier = verifier
        self.ledger = ledger
        self.logger = logger
    }

    /// What a pass did.
    public enum Pass: Sendable, Equatable {
        /// Every record committed was read and its calls answered.
        case caughtUp(position: UInt64)
        /// A call could not be answered now: the checkpoint stays at the record that owes it.
        case interrupted(position: UInt64)
    }

    /// Runs until cancelled.
    public func run() async {
        var pause = firstPause
        while !Task.isCancelled {
            do {
                switch try await runOnce() {
                case .caughtUp:
                    pause = firstPause
                    try? await Task.sleep(for: pollInterval)
                case .interrupted:
                    try? await Task.sleep(for: pause)
                    pause = min(pause * 2, longestPause)
                }
            } catch {
                logger.error("calls to the App Store stopped; trying again", metadata: ["error": "\(error)"])
                try? await Task.sleep(for: pause)
                pause = min(pause * 2, longestPause)
            }
        }
    }

    /// One pass over the records committed after the checkpoint.
    public func runOnce() async throws -> Pass {
        var checkpoint = try Self.checkpoint(in: ledger)
        let end = ledger.position
        guard checkpoint < end else { return .caughtUp(position: checkpoint) }
        for try await record in ledger.records(from: checkpoint + 1) {
            let due = try DueAppStoreCall.due(after: record, settings: settings, handle: ledger.accountHandle(of:)) {
                try ledger.heldTransactions(of: record.event.account).held
            }
            for call in due where try ledger.position(ofEventID: call.eventID) == nil {
                guard try await make(call) else {
                    try await save(checkpoint)
                    return .interrupted(position: checkpoint)
                }
            }
            checkpoint = record.position
            if record.position >= end { break }
        }
        try await save(checkpoint)
        return .caughtUp(position: checkpoint)
    }

    /// Makes one call and records Apple's answer; false when Apple could not answer now.
    func make(_ due: DueAppStoreCall) async throws -> Bool {
        guard let client = clients.first(where: { $0.environment == due.environment })?.client else { return true }
        if due.call == .getAppTransactionInfo {
            return try await readAppTransaction(due, client: client)
        }
        var call = AppStoreCall(
            call: due.call, transaction: due.transaction, outcome: .accepted,
            appAccountToken: due.token?.uuidString.lowercased(), environment: due.environment)
        do {
            switch due.call {
            case .setAppAccountToken:
                guard let token = due.token else { return true }
                call.status = try await client.setAppAccountToken(token, originalTransactionID: due.transaction)
            case .finishTransaction:
                call.status = try await client.finishTransaction(due.transaction)
            case .getAppTransactionInfo:
                return true
            }
        } catch {
            guard error.isFinalRefusal else { return willRetry(due, after: error) }
            call.outcome = .refused
            call.status = error.status
            call.error = String(error.description.prefix(1024))
        }
        return try await record(.appStoreCall(account: due.account, at: .now(), call, personalHandle: due.personalHandle), of: due, outcome: call.outcome)
    }

    /// Get App Transaction Info: Apple's signed answer, verified, kept as an `appTransaction`
    /// event (under the call's id); a refusal for good, or an answer that does not verify, as a
    /// refused `appStoreCall`.
    private func readAppTransaction(_ due: DueAppStoreCall, client: AppStoreServerAPIClient) async throws -> Bool {
        guard let verifier else { return true }
        var refusal = AppStoreCall(call: due.call, transaction: due.transaction, outcome: .refused, environment: due.environment)
        do {
            let answer = try await client.appTransactionInfo(of: due.transaction)
            guard let signed = answer.signedAppTransactionInfo else {
                refusal.error = "Apple's answer carries no signedAppTransactionInfo"
                return try await record(.appStoreCall(account: due.account, at: .now(), refusal, personalHandle: due.personalHandle), of: due, outcome: .refused)
            }
            let payload = try await verifier.only(due.environment).verifyAppTransaction(signed)
            guard let signedAt = payload.receiptCreationDate.flatMap(AppStoreRecorder.representableTimestamp) else {
                refusal.error = "the app transaction has no receiptCreationDate"
                return try await record(.appStoreCall(account: due.account, at: .now(), refusal, personalHandle: due.personalHandle), of: due, outcome: .refused)
            }
            let info = AppTransactionInfo(
                appTransaction: due.transaction,
                originalPurchasedAt: payload.originalPurchaseDate.flatMap(AppStoreRecorder.representableTimestamp),
                originalApplicationVersion: payload.originalApplicationVersion.flatMap { $0.utf8.count <= 256 ? $0 : nil },
                applicationVersion: payload.applicationVersion.flatMap { $0.utf8.count <= 256 ? $0 : nil },
                originalPlatform: payload.originalPlatform.flatMap { $0.utf8.count <= 256 ? $0 : nil },
                preorderedAt: payload.preorderDate.flatMap(AppStoreRecorder.representableTimestamp),
                environment: due.environment, signed: signed)
            guard let customerHandle = due.personalHandle else { return true }
            return try await record(
                .appTransaction(account: due.account, signedAt: signedAt, info, customerHandle: customerHandle), of: due, outcome: .accepted)
        } catch let error as AppStoreServerAPIError {
            guard error.isFinalRefusal else { return willRetry(due, after: error) }
            (refusal.status, refusal.error) = (error.status, String(error.description.prefix(1024)))
        } catch let error as AppStoreVerificationError {
            refusal.error = String("the app transaction does not verify: \(error)".prefix(1024))
        }
        return try await record(.appStoreCall(account: due.account, at: .now(), refusal, personalHandle: due.personalHandle), of: due, outcome: .refused)
    }

    /// Logs a call Apple could not answer now; false (it is made again later).
    private func willRetry(_ due: DueAppStoreCall, after error: AppStoreServerAPIError) -> Bool {
        logger.notice("the App Store could not answer a call; it is tried again", metadata: [
            "call": "\(due.call.rawValue)", "transaction": LogSafe.metadata(due.transaction), "error": "\(error)",
        ])
        return false
    }

    /// Appends what a call came to; true (the call is answered).
    private func record(_ event: Event, of due: DueAppStoreCall, outcome callOutcome: AppStoreCallOutcome) async throws -> Bool {
        let outcome = try await ledger.append(contentsOf: [event], duplicates: .sameFact)
        logger.info("called the App Store", metadata: [
            "call": "\(due.call.rawValue)", "transaction": LogSafe.metadata(due.transaction), "outcome": "\(callOutcome.rawValue)",
            "recorded": "\(outcome.first.map { "\($0)" } ?? "-")",
        ])
        return true
    }

    static func checkpoint(in ledger: Ledger) throws -> UInt64 {
        guard let bytes = try ledger.feedState(checkpointKey), bytes.count == 8 else { return 0 }
        return bytes.reduce(0) { $0 << 8 | UInt64($1) }
    }

    private func save(_ checkpoint: UInt64) async throws {
        let bytes = (0..<8).map { UInt8(truncatingIfNeeded: checkpoint >> (56 - 8 * UInt64($0))) }
        try await ledger.updateFeedState { try $0.set(Self.checkpointKey, bytes) }
    }
}
