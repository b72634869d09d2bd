import Foundation
import Logging
import PurchaseLedger

/// Takes a StoreKit 2 transaction the app sends (`Transaction.jwsRepresentation`) to the
/// ledger: verifies it exactly like a notification's `signedTransactionInfo`, then records it
/// as a purchase notification would be (the purchase, its finish, and Apple's report), so that
/// the device's report and Apple's notification of the same transaction meet on one entry,
/// `appstore:<transactionId>`, and whichever comes second is a duplicate.
public struct SignedTransactionHandler: Sendable {
    public let verifier: AppStoreSignedDataVerifier
    let ledger: Ledger
    /// What a transaction whose purchase another account owns does.
    public let restores: RestorePolicy

    public init(verifier: AppStoreSignedDataVerifier, ledger: Ledger, restores: RestorePolicy = .keep) {
        self.verifier = verifier
        self.ledger = ledger
        self.restores = restores
    }

    /// What recording one transaction did, as the JSON answered to the app.
    package struct Handled: Sendable {
        package var account: String
        package var transaction: String
        package var outcomes: [AppendResult]

        package var json: String {
            "{\"account\": \(JSONString.quoted(account)), \"transaction\": \(JSONString.quoted(transaction)), "
                + "\"outcomes\": \(AppendResult.reportArray(outcomes))}\n"
        }
    }

    package enum Refusal: Error, Equatable {
        /// Neither an `account` nor an `appAccountToken` says whose it is.
        case noAccount
        /// The `account` given is not the one Apple signed as `appAccountToken` (or the one a
        /// transfer moved its purchase to). The refusal names neither: no answer names another
        /// account.
        case notTheTokensAccount
        /// The verified transaction has no `transactionId`.
        case noTransactionID
        /// The verified transaction has no `signedDate`: a report dated by this server's clock
        /// could undo a later one of Apple's (a refund, say).
        case noSignedDate
    }

    /// Throws `AppStoreVerificationError` for a transaction that does not verify, `Refusal`
    /// when it names no account or transaction, and storage errors; nothing is recorded then.
    ///
    /// The event ids come from Apple's transaction id (`storekit:<id>`), and the report's from
    /// its signing time too, so the app sending the same transaction again appends nothing.
    /// A transaction another account holds is refused `transactionAlreadyCredited` (store
    /// transaction ids are global), never answered as that account's duplicate; unless the
    /// policy is `transfer` or `share` and it is a subscription or a non-consumable (what
    /// StoreKit restores): then the purchase's chain moves to this account, or is shared with
    /// it, in the same append as its purchase.
    package func handle(signedTransaction: String, account given: String?) async throws -> Handled {
        let transaction = try await verifier.verifyTransaction(signedTransaction)
        guard let transactionId = transaction.transactionId else { throw Refusal.noTransactionID }
        let chain = transaction.originalTransactionId ?? transactionId
        // Apple's token names the account that bought it; transfers may have moved it since.
        let token = try transaction.appAccountToken.flatMap(AppStoreRecorder.account(fromToken:))
            .map { try ledger.account(owningChain: chain, namedBy: $0) }
        guard let account = given ?? token else { throw Refusal.noAccount }
        let owner = try ledger.owner(ofTransaction: transactionId, chain: chain) ?? token
        // An account the chain came to (moved or shared) records its transactions under ids of
        // that arrival: the account that bought it used the plain ones.
        let heldSince = try ledger.arrival(ofChain: chain, in: account)
        var arrival = heldSince.map(AppStoreRecorder.Arrival.held)
        if let owner, owner != account, transaction.isRestorable {
            switch restores {
            case .keep: arrival = nil
            case .transfer: arrival = .transfer(from: owner, at: .now())
            case .share:
                if !(try ledger.account(account, sharesChain: chain, from: owner)) { arrival = .share(from: owner, at: .now()) }
            }
        }
        // Apple bound the purchase to its token: another account may not take it, but by the policy.
        if let token, let given, given != token, arrival == nil { throw Refusal.notTheTokensAccount }
        guard let recording = AppStoreRecorder.deviceTransaction(
            transaction, signed: signedTransaction, account: account, arrival: arrival)
        else {
            throw Refusal.noSignedDate
        }
        let alreadyCredited = { () throws -> Handled? in
            guard arrival == nil, let holder = try ledger.owner(ofTransaction: transactionId, chain: chain), holder != account,
                  !(try ledger.account(account, sharesChain: chain, from: holder))
            else { return nil }
            let held = chain == transactionId ? "transaction \(transactionId)" : "the purchase of transaction \(transactionId) (original transaction \(chain))"
            let refusal = LedgerError(.transactionAlreadyCredited, "\(held) is held by another account")
            return Handled(account: account, transaction: transactionId, outcomes: [.failure(refusal)])
        }
        if let refused = try alreadyCredited() { return refused }
        let outcomes = try await AppStoreRecorder(ledger: ledger).record(recording)
        // Another account's request for the same transaction may have come first meanwhile:
        // its purchase event has this one's id, which is then another fact's.
        if case .failure? = outcomes.dropFirst(recording.transfer.count).first, let refused = try alreadyCredited() {
            return refused
        }
        return Handled(account: account, transaction: transactionId, outcomes: outcomes)
    }
}
