import HTTPTypes
import Hummingbird
import NIOCore
import PurchaseLedger

/// The proof tree's routes (docs/SERVER.md, "Checkpoints and proofs"), scope `proofs:read`:
/// the signed checkpoints and the RFC 9162 proofs of the tree, in the shapes `ledger
/// checkpoints --json` and `ledger prove` print. They read the stored tree only: a size
/// beyond it (the newest checkpoint's, by default) is refused, never waited for.
extension LedgerRoutes {
    /// At most this many checkpoints a page.
    static var checkpointsPerPage: Int { 1000 }

    func addProofRoutes(to routes: RouteCollection<Context>) {
        routes.get("/v1/checkpoint") { _, context in try newestCheckpoint(context: context) }
        routes.get("/v1/checkpoints") { request, context in try checkpoints(request, context: context) }
        routes.get("/v1/proofs/inclusion") { request, context in try inclusionProof(request, context: context) }
        routes.get("/v1/proofs/consistency") { request, context in try consistencyProof(request, context: context) }
    }

    /// The newest signed note, as signed (`text/plain`); 404 before the first.
    func newestCheckpoint(context: Context) throws -> Response {
        try context.require(.proofsRead)
        guard let newest = try readLedger(context, { try ledger.newestCheckpoint() }) else {
            throw LedgerHTTPError(status: .notFound, code: "notFound", message: "no checkpoint has been signed yet (\"checkpoints\" in the configuration)")
        }
        var headers = HTTPFields()
        headers[.contentType] = "text/plain; charset=utf-8"
        return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: newest.note)))
    }

    /// `[{"size", "signedAt", "note"}, ...]`: those of a size greater than `after` (default 0),
    /// oldest first, at most `checkpointsPerPage`.
    func checkpoints(_ request: Request, context: Context) throws -> Response {
        try context.require(.proofsRead)
        let after = try integerParameter(request, "after", default: 0, range: 0...UInt64(Int64.max))
        let page = try readLedger(context) { try ledger.checkpoints(after: after, limit: Self.checkpointsPerPage) }
        return .json(StoredCheckpoint.json(page) + "\n")
    }

    /// `{"leafIndex", "treeSize", "hashes"}` for `position` in the tree of `size` leaves.
    func inclusionProof(_ request: Request, context: Context) throws -> Response {
        try context.require(.proofsRead)
        let position = try requiredInteger(request, "position")
        let size = try optionalInteger(request, "size")
        let proof = try proving(context) { try ledger.inclusionProof(position: position, size: size) }
        return .json(proof.json + "\n")
    }

    /// `{"fromSize", "treeSize", "hashes"}` from the tree of `from` leaves to that of `size`.
    func consistencyProof(_ request: Request, context: Context) throws -> Response {
        try context.require(.proofsRead)
        let from = try requiredInteger(request, "from")
        let size = try optionalInteger(request, "size")
        let proof = try proving(context) { try ledger.consistencyProof(from: from, size: size) }
        return .json(proof.json + "\n")
    }

    /// A proof, or 400 `badRequest` saying the range when its sizes are out of it (a storage
    /// failure as `readLedger` answers it).
    private func proving<R>(_ context: Context, _ body: () throws -> R) throws -> R {
        try readLedger(context) {
            do {
                return try body()
            } catch let range as MerkleTree.OutOfRange {
                throw LedgerHTTPError.badRequest(range.description)
            }
        }
    }

    private func requiredInteger(_ request: Request, _ name: String) throws -> UInt64 {
        guard request.uri.queryParameters[Substring(name)] != nil else {
            throw LedgerHTTPError.badRequest("\(name) is required: an integer from 1")
        }
        return try integerParameter(request, name, default: 0, range: 1...UInt64(Int64.max))
    }

    private func optionalInteger(_ request: Request, _ name: String) throws -> UInt64? {
        guard request.uri.queryParameters[Substring(name)] != nil else { return nil }
        return try integerParameter(request, name, default: 0, range: 1...UInt64(Int64.max))
    }
}
