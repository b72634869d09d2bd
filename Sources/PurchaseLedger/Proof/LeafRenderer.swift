/// Renders leaves in log order (`ProofLeaf`), keeping each account's commitment and the
/// position of its last event so far (the next leaf's `previous`): what extending the tree and
/// reading the leaves again share.
struct LeafRenderer {
    /// An account as its leaves need it: its commitment, and the position of its newest event
    /// rendered so far (the next one's `previous`; 0 before its first).
    struct Account {
        var commitment: String
        var last: UInt64
    }

    /// The accounts seen, each with its commitment and last position.
    private(set) var accounts: [UInt64: Account]

    /// `accounts`: those already known, as a follower of the tree keeps them between batches.
    init(accounts: [UInt64: Account] = [:]) {
        self.accounts = accounts
    }

    private var writer = JSONWriter()

    /// The records `start...end` as `reader` sees them, read whole (on a remote storage no
    /// other query may run while records stream), checked to run without a gap.
    static func records(_ reader: any LedgerStorageReader, from start: UInt64, through end: UInt64) throws -> [(position: UInt64, bytes: [UInt8])] {
        var records: [(position: UInt64, bytes: [UInt8])] = []
        var expected = start
        try reader.forEachRecord(from: start, through: end) { position, bytes in
            guard position == expected else {
                throw StorageError(.damaged, "the log has no record at position \(expected)", position: expected)
            }
            expected += 1
            records.append((position, Array(bytes)))
            return true
        }
        guard expected == end + 1 else {
            throw StorageError(.damaged, "the log has no record at position \(expected)", position: expected)
        }
        return records
    }

    /// The leaf data of the record at `position`; `account` gives an account's commitment and
    /// its last position before this reading the first time the account is seen.
    mutating func leaf(
        _ bytes: [UInt8], at position: UInt64, account: (_ handle: UInt64, _ position: UInt64) throws -> Account
    ) throws -> [UInt8] {
        try withLeaf(bytes, at: position, account: account) { Array($0) }
    }

    /// Calls `body` with the leaf data of the record at `position`, in the renderer's own
    /// buffer (valid only during the call: a leaf hashed needs no copy).
    mutating func withLeaf<Result>(
        _ bytes: [UInt8], at position: UInt64, account first: (_ handle: UInt64, _ position: UInt64) throws -> Account,
        _ body: (UnsafeRawBufferPointer) throws -> Result
    ) throws -> Result {
        let (handle, event) = try bytes.withUnsafeBytes { try ProofLeaf.decodeAsForgotten($0, at: position) }
        var account = try accounts[handle] ?? first(handle, position)
        writer.removeAll()
        ProofLeaf.write(event, commitment: account.commitment, previous: account.last, to: &writer)
        account.last = position
        accounts[handle] = account
        return try writer.bytes.withUnsafeBytes(body)
    }
}
