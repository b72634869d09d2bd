import NIOCore
import PostgresNIO
import PurchaseLedger

/// The rows of one storage write not yet sent: the records appended, the transactions' holders
/// and the revocations set, the customers claimed, the account states of a snapshot put and deleted. `statement` sends
/// them all as one statement, one round trip, however many there are (postgres-nio sends a
/// statement once the one before it has been answered, so a statement per holder or state was a
/// round trip per holder or state).
struct PendingWrites {
    private var positions: [Int64] = []
    private var eventIDs: [ByteBuffer] = []
    private var accounts: [ByteBuffer] = []
    private var records: [ByteBuffer] = []
    /// The last holder set for each transaction: one upsert may change a row only once. By
    /// bytes, as the index compares them.
    private var holders: [UTF8Key: TransactionHolder] = [:]
    private var revocations: [UTF8Key: UInt64] = [:]
    /// Rows of the account table: handle, account.
    private var accountNames: [(handle: Int64, account: ByteBuffer)] = []
    /// Proofs kept apart from their records: position, proof.
    private var proofs: [(position: Int64, proof: ByteBuffer)] = []
    /// Each customer's (`appTransactionId`) first account in this write.
    private var customers: [UTF8Key: String] = [:]
    /// Account states to put (their bytes) or delete (nil), the last of each kept.
    private var states: [AccountStateKey: ByteBuffer?] = [:]
    /// Feed and proof state to set (its bytes) or delete (nil), the last of each key kept.
    private var feeds: [UTF8Key: ByteBuffer?] = [:]

    private struct AccountStateKey: Hashable {
        let account: UTF8Key
        let version: UInt64
    }

    var isEmpty: Bool {
        positions.isEmpty && holders.isEmpty && revocations.isEmpty && customers.isEmpty && states.isEmpty && accountNames.isEmpty && proofs.isEmpty
            && feeds.isEmpty
    }

    mutating func append(record: [UInt8], at position: UInt64, eventID: String, account: String) {
        positions.append(Int64(position))
        eventIDs.append(Keys.bytes(eventID))
        accounts.append(Keys.bytes(account))
        records.append(ByteBuffer(bytes: record))
    }

    mutating func putAccountName(_ account: String, handle: UInt64) {
        accountNames.append((Int64(handle), Keys.bytes(account)))
    }

    mutating func putProof(_ proof: String, at position: UInt64) {
        proofs.append((Int64(position), Keys.bytes(proof)))
    }

    mutating func setHolder(_ holder: TransactionHolder, ofTransaction transaction: String) {
        holders[UTF8Key(transaction)] = holder
    }

    mutating func setRevocation(_ position: UInt64, ofTransaction transaction: String) {
        revocations[UTF8Key(transaction)] = position
    }

    /// The first claim of a customer in this write stays (as the first committed one does).
    mutating func claimAppTransaction(_ appTransaction: String, for account: String) {
        let key = UTF8Key(appTransaction)
        if customers[key] == nil { customers[key] = account }
    }

    mutating func putAccountState(_ bytes: [UInt8], account: String, version: UInt64) {
        states[AccountStateKey(account: UTF8Key(account), version: version)] = .some(ByteBuffer(bytes: bytes))
    }

    mutating func deleteAccountState(account: String, version: UInt64) {
        states[AccountStateKey(account: UTF8Key(account), version: version)] = .some(nil)
    }

    mutating func setFeedState(_ key: String, _ value: [UInt8]?) {
        feeds[UTF8Key(key)] = .some(value.map { ByteBuffer(bytes: $0) })
    }

    /// Every account state is being deleted: those pending need not be sent.
    mutating func forgetAccountStates() {
        states.removeAll()
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
        if !accountNames.isEmpty {
            writes.append("""
                INSERT INTO ledger_accounts (handle, account)
                SELECT * FROM unnest(\(bind(accountNames.map(\.handle)))::bigint[], \(bind(accountNames.map(\.account)))::bytea[])
                """)
        }
        if !proofs.isEmpty {
            writes.append("""
                INSERT INTO ledger_proofs (position, proof)
                SELECT * FROM unnest(\(bind(proofs.map(\.position)))::bigint[], \(bind(proofs.map(\.proof)))::bytea[])
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
        if !customers.isEmpty {
            let entries = Array(customers)
            writes.append("""
                INSERT INTO ledger_app_transactions (app_transaction, account)
                SELECT * FROM unnest(\(bind(entries.map { Keys.bytes($0.key.string) }))::bytea[], \(bind(entries.map { Keys.bytes($0.value) }))::bytea[])
                ON CONFLICT (app_transaction) DO NOTHING
                """)
        }
        var deleted: [AccountStateKey] = []
        var put: [(key: AccountStateKey, bytes: ByteBuffer)] = []
        for (key, bytes) in states {
            if let bytes { put.append((key, bytes)) } else { deleted.append(key) }
        }
        if !deleted.isEmpty {
            writes.append("""
                DELETE FROM ledger_account_states WHERE (account, version) IN
                    (SELECT * FROM unnest(\(bind(deleted.map { Keys.bytes($0.account.string) }))::bytea[], \(bind(deleted.map { Int64($0.version) }))::bigint[]))
                """)
        }
        if !put.isEmpty {
            writes.append("""
                INSERT INTO ledger_account_states (account, version, state)
                SELECT * FROM unnest(\(bind(put.map { Keys.bytes($0.key.account.string) }))::bytea[], \(bind(put.map { Int64($0.key.version) }))::bigint[],
                    \(bind(put.map(\.bytes)))::bytea[])
                ON CONFLICT (account, version) DO UPDATE SET state = excluded.state
                """)
        }
        var feedsDeleted: [ByteBuffer] = []
        var feedsSet: [(key: ByteBuffer, value: ByteBuffer)] = []
        for (key, value) in feeds {
            if let value { feedsSet.append((Keys.bytes(key.string), value)) } else { feedsDeleted.append(Keys.bytes(key.string)) }
        }
        if !feedsDeleted.isEmpty {
            writes.append("DELETE FROM ledger_feeds WHERE key = ANY(\(bind(feedsDeleted))::bytea[])")
        }
        if !feedsSet.isEmpty {
            writes.append("""
                INSERT INTO ledger_feeds (key, value)
                SELECT * FROM unnest(\(bind(feedsSet.map(\.key)))::bytea[], \(bind(feedsSet.map(\.value)))::bytea[])
                ON CONFLICT (key) DO UPDATE SET value = excluded.value
                """)
        }
        if let head {
            writes.append("UPDATE ledger_head SET position = \(bind(Int64(head))) WHERE id = 1")
        }
        // Delivered at commit, to every process listening.
        let result = notification.map { "SELECT pg_notify(\(bind($0.channel)), \(bind($0.payload)))" } ?? "SELECT 1"
        // Every statement of a `WITH` runs, referred to or not, on the same snapshot; they
        // write different tables, or different rows of one (states deleted and put), so none
        // needs to see another's rows.
        let with = writes.enumerated().map { "w\($0.offset) AS (\($0.element))" }.joined(separator: ",\n")
        return PostgresQuery(unsafeSQL: writes.isEmpty ? result : "WITH \(with)\n\(result)", binds: binds)
    }
}
