import Hummingbird
import PurchaseLedger

/// `GET /v1/accounts/{account}?proof=true` (docs/SERVER.md, "Checkpoints and proofs"): the
/// account's answer at the newest checkpoint's size, with the proof of every event of its
/// history up to it (`AccountProof`). Scopes `accounts:read` and `proofs:read`; an expensive
/// read, in a slot of `ExpensiveReads`, stopped when the client leaves.
extension LedgerRoutes {
    func provenAccount(
        _ account: String, asOf: Timestamp, excluding environments: Set<StoreEnvironment>, timeline: Bool, context: Context
    ) async throws -> Response {
        try context.require(.proofsRead)
        guard !timeline else { throw LedgerHTTPError.badRequest("proof=true answers without a timeline: ask for it apart") }
        guard let slot = reads.tryAcquire(key: context.keyName) else { throw LedgerHTTPError.busy("an account's proof") }
        let ledger = self.ledger
        do {
            let (projection, proof) = try await ExpensiveReads.run(in: slot, until: context.clientLeft) {
                try ledger.provenProjection(of: account, asOf: asOf, excluding: environments)
            }
            return .json(projection.json(position: proof.checkpoint.size) { proof.writeMember(to: &$0) } + "\n")
        } catch let refusal as AccountProof.Refusal {
            switch refusal {
            case .noCheckpoint:
                throw LedgerHTTPError(status: .notFound, code: "notFound", message: "no checkpoint has been signed yet: nothing can be proven")
            case .nothingToProve:
                throw LedgerHTTPError(status: .notFound, code: "notFound", message: "the ledger has no event of this account up to its newest checkpoint")
            case .tooLarge(let limit):
                throw LedgerHTTPError(status: .unprocessableContent, code: "proofTooLarge",
                    message: "the account has more than \(limit) events up to the newest checkpoint: too many to prove in one answer")
            }
        } catch {
            throw Self.httpError(storage: error, logger: context.logger)
        }
    }
}
