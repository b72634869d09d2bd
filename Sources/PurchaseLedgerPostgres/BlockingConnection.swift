import Dispatch
import Logging
import NIOCore
import NIOPosix
import PostgresNIO
import PurchaseLedger
import Synchronization

/// One PostgreSQL connection used synchronously, from one thread at a time: the ledger's
/// storage protocol is synchronous (it is what LMDB is), so its calls block their thread until
/// PostgreSQL answers. They never run on an event loop, whose threads do the waiting's other
/// half, so blocking cannot deadlock.
///
/// Statements whose result is not needed right away are sent without waiting (`send`) and
/// checked at the next `query` or `settle`: the calling thread goes on meanwhile. Each is still
/// a round trip of its own (postgres-nio sends a statement once the one before it has been
/// answered), so a write sends few. A connection that failed is closed and not reused.
final class BlockingConnection: @unchecked Sendable {
    let connection: PostgresConnection
    private let logger: Logger
    private var pipelined: [EventLoopFuture<PostgresQueryResult>] = []
    private var failed = false

    /// The connection failed (not a statement: the connection) or the server closed it.
    var isBroken: Bool {
        failed || connection.isClosed
    }

    private init(connection: PostgresConnection, logger: Logger) {
        self.connection = connection
        self.logger = logger
    }

    static func connect(_ location: PostgresLocation, logger: Logger) throws -> BlockingConnection {
        let next = ConnectionIDs.next.add(1, ordering: .relaxed).newValue
        do {
            let connection = try PostgresConnection.connect(
                on: MultiThreadedEventLoopGroup.singleton.next(), configuration: try location.connectionConfiguration(),
                id: next, logger: logger
            ).wait()
            return BlockingConnection(connection: connection, logger: logger)
        } catch {
            throw PostgresErrors.map(error, "cannot connect to \(location)")
        }
    }

    /// Runs `query` and returns its rows, after checking every statement sent before it.
    @discardableResult
    func query(_ query: PostgresQuery) throws -> PostgresQueryResult {
        try wait(start(query))
    }

    /// Sends `query` and returns its answer to come, for `wait`: a query whose answer is needed
    /// later, sent now so that it costs no round trip of its own.
    func start(_ query: PostgresQuery) -> EventLoopFuture<PostgresQueryResult> {
        connection.query(query, logger: logger)
    }

    /// The answer of a query `start`ed, after checking every statement sent before it.
    func wait(_ future: EventLoopFuture<PostgresQueryResult>) throws -> PostgresQueryResult {
        try settle()
        do {
            return try future.wait()
        } catch {
            failed = failed || !(error is PSQLError && (error as! PSQLError).code == .server)
            throw PostgresErrors.map(error, "a query failed")
        }
    }

    /// Sends `query` without waiting for it; its failure surfaces at the next `query`/`settle`.
    func send(_ query: PostgresQuery) {
        pipelined.append(connection.query(query, logger: logger))
    }

    /// Waits for every statement sent so far; throws the first failure.
    func settle() throws {
        guard !pipelined.isEmpty else { return }
        let waiting = pipelined
        pipelined.removeAll(keepingCapacity: true)
        var failure: (any Error)?
        for future in waiting {
            do {
                _ = try future.wait()
            } catch {
                failure = failure ?? error
            }
        }
        if let failure {
            failed = failed || !(failure is PSQLError && (failure as! PSQLError).code == .server)
            throw PostgresErrors.map(failure, "a statement failed")
        }
    }

    func close() {
        pipelined.removeAll()
        try? connection.close().wait()
    }
}

private enum ConnectionIDs {
    static let next = Atomic<Int>(0)
}

/// Connections for read transactions, opened when needed and kept for reuse (at most `limit`
/// at once; a reader beyond waits for one to come back).
final class ReaderPool: Sendable {
    private struct State {
        var idle: [BlockingConnection] = []
        var open = 0
        var isClosed = false
    }

    private let state = Mutex(State())
    private let available: DispatchSemaphore
    private let location: PostgresLocation
    private let logger: Logger

    init(location: PostgresLocation, limit: Int, logger: Logger) {
        self.location = location
        self.logger = logger
        available = DispatchSemaphore(value: limit)
    }

    func withConnection<R>(_ body: (BlockingConnection) throws -> R) throws -> R {
        available.wait()
        defer { available.signal() }
        let reused: BlockingConnection? = try state.withLock { state in
            if state.isClosed { throw StorageError(.closed, "the ledger is closed") }
            return state.idle.popLast()
        }
        let connection = try reused ?? BlockingConnection.connect(location, logger: logger)
        defer {
            let keep = !connection.isBroken && state.withLock { state in
                guard !state.isClosed else { return false }
                state.idle.append(connection)
                return true
            }
            if !keep { connection.close() }
        }
        return try body(connection)
    }

    func close() {
        let idle = state.withLock { state in
            state.isClosed = true
            defer { state.idle.removeAll() }
            return state.idle
        }
        for connection in idle { connection.close() }
    }
}
