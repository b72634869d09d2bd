import Crypto
#if canImport(Glibc)
import Glibc
#endif

/// Each account's commitment (docs/FORMAT.md, "The proof tree"): SHA-256(salt ‖ the account id's
/// UTF-8 bytes), with a salt of 32 random bytes made the first time the account's commitment is
/// needed (its first leaf, or its forget, whichever comes first). A leaf carries the commitment,
/// never the id; whoever holds the salt and the id can check it, and a forget destroys the salt,
/// so that nobody can link the commitment to the id again while every leaf stays as it was.
///
/// Kept beside the log under `proof/account/<handle>`: the commitment, then the salt until a
/// forget. Written twice at most (made, then forgotten): a leaf's `previous` comes from the
/// history index, so that extending the tree writes nothing of the accounts it had seen.
/// Ledgers written before kept the position of the account's newest leaf between the two:
/// it is read past, never used, and the next batch that reads the record rewrites it.
struct AccountCommitment: Equatable {
    var commitment: [UInt8] {
        didSet { text = Base64.encode(commitment) }
    }
    /// The commitment in standard base64, as leaves carry it (encoded once per account).
    private(set) var text: String
    /// Nil once the account was forgotten.
    var salt: [UInt8]?
    /// Read in the form ledgers written before kept it (with its newest leaf's position):
    /// the next write of the tree rewrites it, so that a version from before, which would
    /// take that position as the account's newest leaf still, fails on it instead.
    private(set) var isOlderForm = false

    static let prefix = "proof/account/"

    static func key(_ handle: UInt64) -> String {
        prefix + String(handle)
    }

    /// A new salt from `salts` and its commitment to `id`.
    static func make(for id: String, salts: inout SaltSource) -> AccountCommitment {
        let salt = salts.next()
        return AccountCommitment(commitment: commitment(salt: salt, id: id), salt: salt)
    }

    static func commitment(salt: [UInt8], id: String) -> [UInt8] {
        var hasher = SHA256()
        hasher.update(data: salt)
        hasher.update(data: Array(id.utf8))
        return Array(hasher.finalize())
    }

    var bytes: [UInt8] {
        var bytes = commitment
        if let salt { bytes += salt }
        return bytes
    }

    init(commitment: [UInt8], salt: [UInt8]?) {
        self.commitment = commitment
        self.text = Base64.encode(commitment)
        self.salt = salt
    }

    init(stored bytes: [UInt8], key: String) throws {
        // 32 or 64 bytes; 40 or 72 as ledgers written before kept it, with a position to skip.
        let saltStart: Int
        switch bytes.count {
        case 32, 64: saltStart = 32
        case 40, 72: saltStart = 40
        default: throw StorageError(.damaged, "the proof state \(key) holds \(bytes.count) bytes, not 32 or 64 (40 or 72 before)")
        }
        commitment = Array(bytes[0..<32])
        text = Base64.encode(commitment)
        salt = bytes.count > saltStart ? Array(bytes[saltStart..<saltStart + 32]) : nil
        isOlderForm = saltStart == 40
    }

    /// The records of `handles` still in the older form in `writer`'s view, as they are to be
    /// stored instead (each salt as it is now: a forget in between destroyed it), in one read.
    static func rewritten(_ handles: [UInt64], writer: any LedgerStorageWriter) throws -> [(key: String, bytes: [UInt8])] {
        guard !handles.isEmpty else { return [] }
        return try writer.feedStates(keys: handles.map(key)).compactMap { key, value in
            let now = try AccountCommitment(stored: value, key: key)
            return now.isOlderForm ? (key, now.bytes) : nil
        }
    }

    /// The commitments of the accounts `handles` name, those stored and, for the others
    /// (`made`), new ones made from their ids: two reads in all (a remote storage's round
    /// trips), not two an account.
    /// - Throws: `StorageError.damaged` for a handle the account table lacks.
    static func readOrMake(
        _ handles: Set<UInt64>, salts: inout SaltSource, reader: any LedgerStorageReader
    ) throws -> (commitments: [UInt64: AccountCommitment], made: Set<UInt64>) {
        var commitments: [UInt64: AccountCommitment] = [:]
        let stored = try reader.feedStates(keys: handles.map(key))
        var missing: [UInt64] = []
        for handle in handles {
            let key = key(handle)
            if let bytes = stored[key] { commitments[handle] = try AccountCommitment(stored: bytes, key: key) } else { missing.append(handle) }
        }
        for (handle, id) in try reader.accountNames(handles: missing.sorted()) {
            commitments[handle] = make(for: id, salts: &salts)
        }
        if let lacking = missing.first(where: { commitments[$0] == nil }) {
            throw StorageError(.damaged, "the log names account handle \(lacking), which the account table lacks")
        }
        return (commitments, Set(missing))
    }

    /// The account's stored commitment, nil when none was made yet.
    static func read(_ handle: UInt64, reader: any LedgerStorageReader) throws -> AccountCommitment? {
        let key = key(handle)
        return try reader.feedState(key).map { try AccountCommitment(stored: $0, key: key) }
    }

    /// `ledger copy` (`Ledger.copyFeed`): the feed state `value` the source held under `key`,
    /// as the copy stores it over what it holds (`existing`). An account's commitment read
    /// from the source before a forget the copy has replayed since keeps no salt: the
    /// forget destroyed it in the copy, and a copy never brings a salt back. A commitment in
    /// the older form is stored in the new one. Any other value as it is.
    static func copied(_ value: [UInt8], under key: String, over existing: [UInt8]?) throws -> [UInt8] {
        guard key.hasPrefix(prefix) else { return value }
        var copied = try AccountCommitment(stored: value, key: key)
        if let existing, try AccountCommitment(stored: existing, key: key).salt == nil { copied.salt = nil }
        return copied.bytes
    }

    /// Forgetting (`Forgetting.perform`): makes the account's commitment from its id when it has
    /// none yet (its events' leaves still to come carry it), then destroys the salt.
    static func forget(_ handle: UInt64, id: String, writer: any LedgerStorageWriter) throws {
        var salts = SaltSource()
        var stored = try read(handle, reader: writer) ?? make(for: id, salts: &salts)
        stored.salt = nil
        try writer.setFeedState(key(handle), stored.bytes)
    }
}

/// Salts of 32 bytes from the system's generator, drawn eight at a time: an extension of the
/// tree that meets many new accounts makes one system call per eight of them, not four each.
/// The salts drawn and not used die with the value, which cannot be copied: a copy would hand
/// the same salts to other accounts.
struct SaltSource: ~Copyable {
    private var drawn: [UInt8] = []
    private var used = 0

    mutating func next() -> [UInt8] {
        if used == drawn.count {
            drawn = Self.draw(256)
            used = 0
        }
        defer { used += 32 }
        return Array(drawn[used..<used + 32])
    }

    /// `count` random bytes (a multiple of 8).
    private static func draw(_ count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        #if canImport(Glibc)
        // getentropy(3) (getrandom(2)) fills up to 256 bytes in one call.
        if count <= 256, bytes.withUnsafeMutableBytes({ getentropy($0.baseAddress, count) }) == 0 { return bytes }
        #endif
        var generator = SystemRandomNumberGenerator()
        for start in stride(from: 0, to: count, by: 8) {
            withUnsafeBytes(of: generator.next() as UInt64) { bytes.replaceSubrange(start..<start + 8, with: $0) }
        }
        return bytes
    }
}
