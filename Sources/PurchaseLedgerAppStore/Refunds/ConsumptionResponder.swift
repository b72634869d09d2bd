import AppStoreServerAPI
import Logging
import PurchaseLedger

/// Answers Apple's refund requests (`CONSUMPTION_REQUEST`) from the ledger: how the purchase
/// was used, as the log stood just before the request was recorded, sent with Send Consumption
/// Information only when the account's consent was in force then and still is when it is sent,
/// and the answer recorded as a `consumptionAnswer`.
///
/// The answer is a function of the request's log position (and the configured policy), so a
/// request answered again after a crash, or delivered again by Apple, sends the same body; and
/// a request already answered in the log is not answered twice.
public struct ConsumptionResponder: Sendable {
    /// What the configuration says of every answer.
    public struct Policy: Sendable, Hashable {
        /// Whether a free sample, trial or description of the content was provided before purchase.
        public var sampleContentProvided: Bool
        /// The refund the developer prefers, if any.
        public var refundPreference: ConsumptionInformation.RefundPreference?

        public init(sampleContentProvided: Bool = false, refundPreference: ConsumptionInformation.RefundPreference? = nil) {
            self.sampleContentProvided = sampleContentProvided
            self.refundPreference = refundPreference
        }
    }

    /// Apple's API in each environment: a request is answered in the environment it came from
    /// (a request that names none is Production's).
    public let clients: [(environment: StoreEnvironment, client: AppStoreServerAPIClient)]
    public let policy: Policy
    let ledger: Ledger

    public init(clients: [(environment: StoreEnvironment, client: AppStoreServerAPIClient)], policy: Policy, ledger: Ledger) {
        self.clients = clients
        self.policy = policy
        self.ledger = ledger
    }

    /// Answers with `client` whatever the request's environment.
    public init(client: AppStoreServerAPIClient, policy: Policy, ledger: Ledger) {
        self.init(clients: StoreEnvironment.allCases.map { ($0, client) }, policy: policy, ledger: ledger)
    }

    /// The answer event's id for a request's: one answer per request.
    static func answerID(forRequest id: String) -> String {
        id + "/answer"
    }

    /// Answers the `consumptionRequest` `request` (in the log already) unless the log holds its
    /// answer; returns the answer's append outcome, nil when it was answered before. Throws when
    /// Apple could not be reached or asked to come back later (the notification is then answered
    /// with an error, and Apple's redelivery tries again), and on storage errors.
    func answer(_ request: Event, logger: Logger) async throws -> AppendResult? {
        guard case .consumptionRequest(let asked) = request.payload else { return nil }
        // Only a server that takes the request's environment verified it; Xcode's has no API.
        guard let client = clients.first(where: { $0.environment == asked.environment ?? .production })?.client else { return nil }
        let answerID = Self.answerID(forRequest: request.id)
        guard try ledger.position(ofEventID: answerID) == nil, let position = try ledger.position(ofEventID: request.id) else {
            return nil
        }
        let facts = try ledger.consumptionFacts(of: request.account, transaction: asked.transaction, atPosition: position - 1)
        // Consent must also be in force now, when the data leaves: a customer who withdrew it
        // after the request (before an answer that failed, or a redelivery) shares nothing.
        let consentedNow = try ledger.projection(of: request.account)?.consumptionConsent
        var answer = ConsumptionAnswer(request: request.id, transaction: asked.transaction, outcome: .noConsent)
        if consentedNow == true, let information = Self.information(from: facts, policy: policy) {
            answer.deliveryStatus = information.deliveryStatus.rawValue
            answer.consumptionPercentage = information.consumptionPercentage
            answer.refundPreference = information.refundPreference?.rawValue
            answer.sampleContentProvided = information.sampleContentProvided
            let sent: Result<Int, AppStoreServerAPIError>
            do {
                sent = .success(try await client.sendConsumptionInformation(information, transactionID: asked.transaction))
            } catch {
                sent = .failure(error)
            }
            switch sent {
            case .success(let status):
                answer.status = status
                answer.outcome = .accepted
            case .failure(let error):
                // Apple refused what it was sent (too late, an unknown transaction…): a second
                // try would be refused alike, so the refusal is the answer. Anything else
                // (unreachable, busy, our key refused) is tried again on Apple's redelivery.
                guard error.isFinalRefusal else { throw error }
                answer.outcome = .refused
                answer.status = error.status
                answer.error = String(error.description.prefix(1024))
            }
        }
        let outcome = try await ledger.append(contentsOf: [
            .consumptionAnswer(id: answerID, account: request.account, at: .now(), answer),
        ], duplicates: .sameFact)
        logger.info("refund request answered", metadata: [
            "transaction": LogSafe.metadata(asked.transaction), "outcome": "\(answer.outcome.rawValue)",
            "deliveryStatus": "\(answer.deliveryStatus ?? "-")", "position": "\(position)",
        ])
        return outcome.first
    }

    /// What Apple is told, from the ledger's facts; nil without the customer's consent (Apple
    /// refuses an answer without it, and sharing it would break the customer's choice).
    ///
    /// - delivery: `DELIVERED` when the app finished the purchase and its downloads;
    ///   otherwise `UNDELIVERED_OTHER` (the ledger knows it was not delivered, not why);
    /// - consumables: the share of the credit spent, as `consumptionPercentage`;
    /// - `sampleContentProvided` and `refundPreference` from the configuration.
    static func information(from facts: ConsumptionFacts, policy: Policy) -> ConsumptionInformation? {
        guard facts.consented == true else { return nil }
        return ConsumptionInformation(
            customerConsented: true,
            deliveryStatus: facts.delivery == .delivered ? .delivered : .undeliveredOther,
            sampleContentProvided: policy.sampleContentProvided,
            consumptionPercentage: facts.consumedShare,
            refundPreference: policy.refundPreference)
    }

}
