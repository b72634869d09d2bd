import NIOCore
import PostgresNIO
import PurchaseLedger

/// The index writes of one storage write not yet sent: the records appended, the transactions'
/// holders and the revocations set. `statement` sends them all as one statement, one round
/// trip, however many there are (postgres-nio sends a statement once the one before it has been
/// answered, so a statement per holder was a round trip per holder).
struct PendingWrites {
    private var positions: [Int64] = []
    private var eventIDs: [ByteBuffer] = []
    private var accounts: [ByteBuffer] = []
    private var records: [ByteBuffer] = []
    /// The last holder set for each transaction: one upsert may change a row only once. By
    /// bytes, as the index compares them.
    private var holders: [UTF8Key: TransactionHolder] = [:]
    private var revocations: [UTF8Key: UInt64] = [:]

    var isEmpty: Bool {
        positions.isEmpty && holders.isEmpty && revocations.isEmpty
    }

    mutating func append(record: [UInt8], at position: UInt64, eventID: String, account: String) {
        positions.append(Int64(position))
        eventIDs.append(Keys.bytes(eventID))
        accounts.append(Keys.bytes(account))
        records.append(ByteBuffer(bytes: record))
    }

    mutating func setHolder(_ holder: TransactionHolder, ofTransaction transaction: String) {
        holders[UTF8Key(transaction)] = holder
    }

    mutating func setRevocation(_ position: UInt64, ofTransaction transaction: String) {
        revocations[UTF8Key(transaction)] = position
    }

    /// One statement for everything pending, each table's rows as arrays (`unnest`) in a
    /// data-modifying `WITH`, plus the head's new position and the commit's notification when
    /// given; nil when there is nothing to send.
    func statement(head: UInt64?, notification: (channel: String, payload: String)?) -> PostgresQuery? {
        guard !isEmpty || head != nil || notification != nil else { return nil }
        var binds = PostgresBindings()
        func bind(_ value: some PostgresDynamicTypeEncodable) -> String {
            binds.append(value)
            return "$\(binds.count)"
        }
        var writes: [String] = []
        if !positions.isEmpty {
            writes.append("""
                INSERT INTO ledger_events (position, event_id, account, record)
                SELECT * FROM unnest(\(bind(positions))::bigint[], \(bind(eventIDs))::bytea[], \(bind(accounts))::bytea[], \(bind(records))::bytea[])
                """)
        }
        if !holders.isEmpty {
            let entries = Array(holders)
            writes.append("""
                INSERT INTO ledger_transactions (transaction_id, account, payment, position, credits_consumable)
                SELECT * FROM unnest(\(bind(entries.map { Keys.bytes($0.key.string) }))::bytea[],
                    \(bind(entries.map { Keys.bytes($0.value.entry.account) }))::bytea[], \(bind(entries.map { Keys.bytes($0.value.entry.payment) }))::bytea[],
                    \(bind(entries.map { Int64($0.value.position) }))::bigint[], \(bind(entries.map(\.value.creditsConsumable)))::boolean[])
                ON CONFLICT (transaction_id) DO UPDATE SET account = excluded.account, payment = excluded.payment,
                    position = excluded.position, credits_consumable = excluded.credits_consumable
                """)
        }
        if !revocations.isEmpty {
            let entries = Array(revocations)
            writes.append("""
                INSERT INTO ledger_revocations (transaction_id, position)
                SELECT * FROM unnest(\(bind(entries.map { Keys.bytes($0.key.string) }))::bytea[], \(bind(entries.map { Int64($0.value) }))::bigint[])
                ON CONFLICT (transaction_id) DO UPDATE SET position = excluded.position
                """)
        }
        if let head {
            writes.append("UPDATE ledger_head SET position = \(bind(Int64(head))) WHERE id = 1")
        }
        // Delivered at commit, to every process listening.
        let result = notification.map { "SELECT pg_notify(\(bind($0.channel)), \(bind($0.payload)))" } ?? "SELECT 1"
        // Every statement of a `WITH` runs, referred to or not, on the same snapshot; they
        // write different tables, so none needs to see another's rows.
        let with = writes.enumerated().map { "w\($0.offset) AS (\($0.element))" }.joined(separator: ",\n")
        return PostgresQuery(unsafeSQL: writes.isEmpty ? result : "WITH \(with)\n\(result)", binds: binds)
    }
}
