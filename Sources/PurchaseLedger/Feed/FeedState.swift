/// What the consumers of the change feed keep in the ledger's own storage (a webhook
/// endpoint's cursor, what it parked, who delivers for it): small values under string keys,
/// written by the ledger's one writer with the appends, durable as events are.
extension Ledger {
    /// The value stored under `key`, nil when none is.
    public func feedState(_ key: String) throws -> [UInt8]? {
        try storage.read { try $0.feedState(key) }
    }

    /// Every value whose key starts with `prefix`, in key order.
    public func feedStates(prefix: String) throws -> [(key: String, value: [UInt8])] {
        try storage.read { try $0.feedStates(prefix: prefix) }
    }

    /// Reads and writes feed state in one atomic transaction (a compare-and-set, such as taking
    /// a lease), on the writer's thread; durable when this returns. Throwing writes nothing.
    /// It joins the next group commit of appends: a consumer storing its progress costs the
    /// writer no disk flush of its own while appends flow. As an append, it is withdrawn
    /// (`CancellationError`, nothing written) when the task is cancelled before the writer took it.
    public func updateFeedState<R: Sendable>(_ body: @escaping @Sendable (FeedStateTransaction) throws -> R) async throws -> R {
        guard let writer else { throw StorageError(.readOnly, "the ledger at \(location) is open read-only") }
        return try await writer.writeWithAppends { storage in try body(FeedStateTransaction(writer: storage)) }
    }
}

/// Feed state inside one write (`Ledger.updateFeedState`).
public struct FeedStateTransaction {
    let writer: any LedgerStorageWriter

    public func value(_ key: String) throws -> [UInt8]? {
        try writer.feedState(key)
    }

    public func values(prefix: String) throws -> [(key: String, value: [UInt8])] {
        try writer.feedStates(prefix: prefix)
    }

    /// Stores `value` under `key`; nil removes it.
    public func set(_ key: String, _ value: [UInt8]?) throws {
        guard key.utf8.count <= 511, !key.isEmpty else {
            throw StorageError(.io, "a feed state's key is 1 to 511 bytes (got \(key.utf8.count))")
        }
        try writer.setFeedState(key, value)
    }
}

extension LedgerLog {
    /// Every feed state whose key starts with `prefix`, in key order (`Ledger.feedStates`).
    public func feedStates(prefix: String) throws -> [(key: String, value: [UInt8])] {
        try storage.read { try $0.feedStates(prefix: prefix) }
    }
}
