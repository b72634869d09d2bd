/// What a proof-carrying answer adds to an account's answer (docs/SERVER.md, "Checkpoints and
/// proofs"): the newest checkpoint, the account's salt, and every event of its history up to the
/// checkpoint's size, each with its leaf data and its inclusion proof. A client holding only
/// the verifier key checks the note, each proof against its root, that each leaf's commitment is
/// SHA-256(salt ‖ the id it asked about), and that the `previous` links run back without a gap.
public struct AccountProof: Sendable {
    public struct ProvenEvent: Sendable, Hashable {
        public let position: UInt64
        /// The leaf data (`ledger export --as-forgotten`'s line).
        public let leaf: [UInt8]
        /// The leaf's inclusion proof in the checkpoint's tree, leaf to root.
        public let hashes: [MerkleHash]
    }

    /// Why there is no proof to give.
    public enum Refusal: Error, Sendable, Hashable {
        /// No checkpoint was signed yet.
        case noCheckpoint
        /// The ledger has no event of the id up to the newest checkpoint (never seen,
        /// forgotten, or seen only since).
        case nothingToProve
        /// The account has more events up to the checkpoint than `limit`.
        case tooLarge(limit: Int)
    }

    /// The account's events an answer proves by default, at most.
    public static let defaultLimit = 10_000

    public let checkpoint: StoredCheckpoint
    public let salt: [UInt8]
    public let events: [ProvenEvent]

    /// The proof of `account`'s history up to the newest checkpoint, as `reader` sees the ledger.
    static func read(_ account: String, limit: Int, _ reader: any LedgerStorageReader) throws -> AccountProof {
        guard let checkpoint = try StoredCheckpoint.newest(reader) else { throw Refusal.noCheckpoint }
        guard let handle = try reader.accountHandle(of: account),
              let commitment = try AccountCommitment.read(handle, reader: reader), let salt = commitment.salt
        else { throw Refusal.nothingToProve }
        let positions = try reader.positions(ofAccount: account, after: 0, limit: limit == .max ? limit : limit + 1).filter { $0 <= checkpoint.size }
        guard !positions.isEmpty else { throw Refusal.nothingToProve }
        guard positions.count <= limit else { throw Refusal.tooLarge(limit: limit) }
        let hashes = StoredMerkleHashes(reader)
        var renderer = LeafRenderer()
        var events: [ProvenEvent] = []
        events.reserveCapacity(positions.count)
        for position in positions {
            var record: [UInt8]?
            _ = try reader.record(at: position) { record = Array($0) }
            guard let record else {
                throw StorageError(.damaged, "the history index names position \(position), which the log lacks", position: position)
            }
            let leaf = try renderer.leaf(record, at: position) { named, position in
                guard named == handle else {
                    throw StorageError(.damaged, "the history index names position \(position) for an account whose record it is not", position: position)
                }
                // Its first event: no `previous`.
                return LeafRenderer.Account(commitment: commitment.text, last: 0)
            }
            let path = try MerkleTree.inclusionProof(index: position - 1, size: checkpoint.size, reading: hashes)
            events.append(ProvenEvent(position: position, leaf: leaf, hashes: path))
        }
        return AccountProof(checkpoint: checkpoint, salt: salt, events: events)
    }

    /// `"proof": {"checkpoint", "accountSalt", "events": [{"position", "leaf", "hashes"}]}`, a
    /// member of the account's object.
    package func writeMember(to writer: inout JSONWriter) {
        writer.key("proof")
        writer.beginObject()
        writer.member("checkpoint", checkpoint.note)
        writer.member("accountSalt", Base64.encode(salt))
        writer.key("events")
        writer.beginArray()
        for event in events {
            writer.beginObject()
            writer.member("position", Int64(clamping: event.position))
            writer.member("leaf", String(decoding: event.leaf, as: UTF8.self))
            writer.hashes(event.hashes)
            writer.endObject()
        }
        writer.endArray()
        writer.endObject()
    }
}

extension AccountProof {
    /// The proof of `account`'s history as `storage` holds it, with the answer `projection`
    /// gives at the checkpoint's size (`Ledger` and `LedgerLog` pass their own).
    static func proven(
        _ account: String, limit: Int, storage: any LedgerStorage, projection: (_ position: UInt64) throws -> AccountProjection?
    ) throws -> (projection: AccountProjection, proof: AccountProof) {
        let proof = try storage.read { try AccountProof.read(account, limit: limit, $0) }
        // Forgotten since the proof was read: nothing to prove any more.
        guard let answer = try projection(proof.checkpoint.size) else { throw Refusal.nothingToProve }
        return (answer, proof)
    }
}

extension Ledger {
    /// The proof of `account`'s history up to the newest checkpoint, and its answer there.
    /// - Parameters:
    ///   - account: the id asked about.
    ///   - time: the instant the answer is for (valid time).
    ///   - environments: the store's environments whose reports the answer leaves out.
    ///   - limit: the most events to prove (`AccountProof.defaultLimit`).
    /// - Returns: the account's answer at the checkpoint's size (its position), and the proof.
    /// - Throws: `AccountProof.Refusal`, or a `StorageError`.
    public func provenProjection(
        of account: String, asOf time: Timestamp = .now(), excluding environments: Set<StoreEnvironment> = [],
        limit: Int = AccountProof.defaultLimit
    ) throws -> (projection: AccountProjection, proof: AccountProof) {
        try AccountProof.proven(account, limit: limit, storage: storage) {
            try projection(of: account, atPosition: $0, asOf: time, excluding: environments)
        }
    }
}

extension LedgerLog {
    /// See `Ledger.provenProjection(of:asOf:excluding:limit:)`.
    public func provenProjection(
        of account: String, asOf time: Timestamp = .now(), excluding environments: Set<StoreEnvironment> = [],
        limit: Int = AccountProof.defaultLimit
    ) throws -> (projection: AccountProjection, proof: AccountProof) {
        try AccountProof.proven(account, limit: limit, storage: storage) {
            try projection(of: account, atPosition: $0, asOf: time, excluding: environments)
        }
    }
}
