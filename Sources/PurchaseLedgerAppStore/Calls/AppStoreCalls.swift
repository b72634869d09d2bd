import Foundation
import PurchaseLedger

/// The calls to the App Store Server API the ledger owes Apple, read from the log: closing the
/// loop, so that Apple's later notifications name the account and Apple knows what was
/// delivered.
public struct AppStoreCallSettings: Sendable, Hashable {
    /// Set App Account Token on a subscription or purchase the ledger gave an account that
    /// Apple's token does not name (attributed late: by `ledger attribute`, by a held
    /// transaction or customer, or by the device naming it).
    public var setAppAccountTokens: Bool
    /// Finish Transaction for a StoreKit 2 transaction whose entry the ledger shows finished.
    public var finishTransactions: Bool
    /// Get App Transaction Info for a customer (`appTransactionId`) the account has no app
    /// transaction of, kept as an `appTransaction` event.
    public var readAppTransactions: Bool

    public init(setAppAccountTokens: Bool = true, finishTransactions: Bool = false, readAppTransactions: Bool = true) {
        self.setAppAccountTokens = setAppAccountTokens
        self.finishTransactions = finishTransactions
        self.readAppTransactions = readAppTransactions
    }
}

/// One call owed: what to ask, of which environment's App Store, for which account.
public struct DueAppStoreCall: Sendable, Hashable {
    public var account: String
    public var call: AppStoreCallKind
    /// The transaction the call names (the original transaction for a token).
    public var transaction: String
    public var environment: StoreEnvironment
    /// For `setAppAccountToken`: the account as Apple's token.
    public var token: UUID?
    /// The account table's handle of what names the customer: the token (the account), or the
    /// customer's `appTransactionId` for Get App Transaction Info (`AppStoreCall.eventID`).
    public var personalHandle: UInt64?

    /// The id of the event that records it.
    public var eventID: String { AppStoreCall.eventID(call, transaction: transaction, personalHandle: personalHandle) }
}

extension DueAppStoreCall {
    /// The calls `record` makes due, given the account's held transactions then: none for
    /// events that say nothing Apple needs to hear. Whether each was made already is the
    /// caller's to check (by its event id).
    /// `handle` gives a name's handle in the account table (`DueAppStoreCall.personalHandle`).
    static func due(
        after record: LogRecord, settings: AppStoreCallSettings, handle: (String) throws -> UInt64?, held: () throws -> [HeldTransaction]
    ) throws -> [DueAppStoreCall] {
        let event = record.event
        var due: [DueAppStoreCall] = []
        switch event.payload {
        case .storeTransaction(let fact):
            if settings.readAppTransactions, let call = try appTransactionCall(for: fact, in: event.account, handle: handle) { due.append(call) }
            if settings.setAppAccountTokens, let call = try tokenCall(for: fact, in: event.account, handle: handle) { due.append(call) }
            if settings.finishTransactions {
                due += try finishes(in: event.account, held: held())
            }
        case .transactionFinished:
            if settings.finishTransactions {
                due += try finishes(in: event.account, held: held())
            }
        default:
            break
        }
        return due
    }

    /// Every call an account's transactions owe Apple now (what reconciliation checks), one per
    /// call and transaction.
    static func owed(
        by account: String, held: [HeldTransaction], settings: AppStoreCallSettings, handle: (String) throws -> UInt64?
    ) throws -> [DueAppStoreCall] {
        var owed: [DueAppStoreCall] = []
        if settings.setAppAccountTokens {
            for call in try held.compactMap({ try $0.report.flatMap { try tokenCall(for: $0, in: account, handle: handle) } })
            where !owed.contains(where: { $0.eventID == call.eventID }) {
                owed.append(call)
            }
        }
        if settings.finishTransactions { owed += finishes(in: account, held: held) }
        if settings.readAppTransactions {
            for call in try held.compactMap({ try $0.report.flatMap { try appTransactionCall(for: $0, in: account, handle: handle) } })
            where !owed.contains(where: { $0.eventID == call.eventID }) {
                owed.append(call)
            }
        }
        return owed
    }

    /// Get App Transaction Info for the customer a report names (once per customer: the call's
    /// event id is the `appTransactionId`'s handle). None for a customer the account table
    /// does not name (a report written before app transaction ids were kept apart: `ledger
    /// copy` gives them handles).
    private static func appTransactionCall(
        for fact: StoreTransaction, in account: String, handle: (String) throws -> UInt64?
    ) throws -> DueAppStoreCall? {
        let environment = fact.environment ?? .production
        guard environment.isSigned, let customer = fact.appTransaction, !customer.isEmpty,
              let customerHandle = try handle(customer) else { return nil }
        return DueAppStoreCall(
            account: account, call: .getAppTransactionInfo, transaction: customer, environment: environment, token: nil,
            personalHandle: customerHandle)
    }

    /// Set App Account Token for a report in `account` whose token Apple signed is not the
    /// account's, when the account can be a token (Apple takes only a UUID, in the lowercase
    /// form an account from a token has) and Apple takes one for it (not Family Sharing's).
    private static func tokenCall(
        for fact: StoreTransaction, in account: String, handle: (String) throws -> UInt64?
    ) throws -> DueAppStoreCall? {
        let environment = fact.environment ?? .production
        guard environment.isSigned, fact.ownership != .familyShared,
              let token = UUID(uuidString: account), token.uuidString.lowercased() == account,
              fact.appAccountToken.flatMap(AppStoreRecorder.account(fromToken:)) != account,
              let accountHandle = try handle(account)
        else { return nil }
        return DueAppStoreCall(
            account: account, call: .setAppAccountToken, transaction: fact.originalTransaction ?? fact.transaction,
            environment: environment, token: token, personalHandle: accountHandle)
    }

    /// Finish Transaction for each StoreKit 2 transaction an entry holds, finished.
    private static func finishes(in account: String, held: [HeldTransaction]) -> [DueAppStoreCall] {
        held.compactMap { transaction in
            guard transaction.heldByEntry, transaction.unfinishedPayment == nil, let report = transaction.report,
                  report.source == AppStoreRecorder.storeKit2Source, (report.environment ?? .production).isSigned
            else { return nil }
            return DueAppStoreCall(
                account: account, call: .finishTransaction, transaction: transaction.transaction,
                environment: report.environment ?? .production, token: nil)
        }
    }
}
