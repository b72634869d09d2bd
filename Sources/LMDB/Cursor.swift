/// A position in a table, valid inside `ReadTransaction.withCursor`.
///
/// Each move returns the entry it lands on (nil past either end). The buffers point into the map
/// and are valid until the next move or the end of the transaction.
public final class Cursor<Key: LMDBEncodable, Value> {
    public typealias Entry = (key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer)
    private var handle: LMDBCall.Cursor?

    init(handle: LMDBCall.Cursor) {
        self.handle = handle
    }

    private var live: LMDBCall.Cursor {
        guard let handle else { preconditionFailure("LMDB cursor used after it was closed") }
        return handle
    }

    func close() {
        if let handle { LMDBCall.closeCursor(handle) }
        handle = nil
    }

    public func first() throws -> Entry? { try LMDBCall.move(live, .first) }
    public func last() throws -> Entry? { try LMDBCall.move(live, .last) }
    public func next() throws -> Entry? { try LMDBCall.move(live, .next) }
    public func previous() throws -> Entry? { try LMDBCall.move(live, .previous) }

    /// Moves to `key` exactly; nil when it is absent.
    public func seek(exactly key: Key) throws -> Entry? {
        let cursor = live
        return try key.withLMDBBytes { bytes throws(LMDBError) in try LMDBCall.move(cursor, .setKey, key: bytes) }
    }

    /// Moves to the first key at or after `key`; nil when there is none.
    public func seek(atOrAfter key: Key) throws -> Entry? {
        let cursor = live
        return try key.withLMDBBytes { bytes throws(LMDBError) in try LMDBCall.move(cursor, .setRange, key: bytes) }
    }
}
