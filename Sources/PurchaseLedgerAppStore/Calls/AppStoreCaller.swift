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
        settings: AppStoreCallSettings, clients: [(environment: StoreEnvironment, client: AppStoreServerAPIClient)], ledger: Ledger,
        logger: Logger = Logger(label: "AppStoreCaller")
    ) {
        self.settings = settings
        self.clients = clients
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
            let due = try DueAppStoreCall.due(after: record, settings: settings) {
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
            }
        } catch {
            guard error.isFinalRefusal else {
                logger.notice("the App Store could not answer a call; it is tried again", metadata: [
                    "call": "\(due.call.rawValue)", "transaction": LogSafe.metadata(due.transaction), "error": "\(error)",
                ])
                return false
            }
            call.outcome = .refused
            call.status = error.status
            call.error = String(error.description.prefix(1024))
        }
        let outcome = try await ledger.append(contentsOf: [.appStoreCall(account: due.account, at: .now(), call)])
        logger.info("called the App Store", metadata: [
            "call": "\(due.call.rawValue)", "transaction": LogSafe.metadata(due.transaction), "outcome": "\(call.outcome.rawValue)",
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
