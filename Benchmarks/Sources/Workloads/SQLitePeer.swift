import Foundation
import GRDB

/// The peer: the same workload on SQLite through GRDB. A WAL-mode events table with
/// `synchronous = FULL` (every commit durable, as the ledger's), keyed by position, with the
/// indexes the ledger keeps too: a unique event id (idempotency) and account + position
/// (history).
public final class SQLitePeer: @unchecked Sendable {
    private let queue: DatabaseQueue
    private var next: Int64 = 1

    public init(path: String) throws {
        var configuration = Configuration()
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = FULL")
        }
        queue = try DatabaseQueue(path: path, configuration: configuration)
        try queue.writeWithoutTransaction { db in
            _ = try String.fetchOne(db, sql: "PRAGMA journal_mode = WAL")
            try db.execute(sql: """
                CREATE TABLE IF NOT EXISTS events (
                    position INTEGER PRIMARY KEY,
                    id TEXT NOT NULL UNIQUE,
                    account TEXT NOT NULL,
                    body BLOB NOT NULL)
                """)
            try db.execute(sql: "CREATE INDEX IF NOT EXISTS events_by_account ON events(account, position)")
        }
    }

    /// Inserts the rows in one transaction.
    public func insert(_ rows: [(id: String, account: String, body: [UInt8])]) throws {
        try queue.write { db in
            let statement = try db.cachedStatement(sql: "INSERT INTO events (position, id, account, body) VALUES (?, ?, ?, ?)")
            for row in rows {
                try statement.execute(arguments: [next, row.id, row.account, Data(row.body)])
                next += 1
            }
        }
    }

    /// Reads every body in position order; returns the bytes seen.
    public func scan() throws -> Int {
        try queue.read { db in
            var total = 0
            let cursor = try Row.fetchCursor(db, sql: "SELECT body FROM events ORDER BY position")
            while let row = try cursor.next() {
                let body: Data = row[0]
                total &+= Int(body.first ?? 0) &+ body.count
            }
            return total
        }
    }
}
