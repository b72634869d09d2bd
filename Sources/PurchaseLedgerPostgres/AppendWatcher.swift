import Dispatch
import Logging
import NIOCore
import NIOPosix
import PostgresNIO
import Synchronization

/// Tells a ledger that another process may have appended: on each notification of the
/// ledger's channel (`LISTEN`; its payload is the position committed), and every
/// `pollInterval` whatever happens, so that a lost
/// listening connection (or an engine without LISTEN/NOTIFY) delays catching up by at most
/// one interval. A lost connection is opened again at the next poll.
///
/// `@unchecked`: the timer is set up in `init` and only cancelled after; the rest is in `state`.
final class AppendWatcher: @unchecked Sendable {
    private struct State {
        var connection: PostgresConnection?
        var connecting = false
        var isStopped = false
    }

    private let location: PostgresLocation
    /// Nil: poll only.
    private let channel: String?
    private let logger: Logger
    private let onChange: @Sendable (UInt64?) -> Void
    private let state = Mutex(State())
    private let timer: any DispatchSourceTimer

    init(location: PostgresLocation, channel: String?, pollInterval: Duration, logger: Logger, onChange: @escaping @Sendable (UInt64?) -> Void) {
        self.location = location
        self.channel = channel
        self.logger = logger
        self.onChange = onChange
        timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "PurchaseLedger.postgres.poll"))
        let interval = DispatchTimeInterval.nanoseconds(Int(pollInterval.components.seconds) * 1_000_000_000 + Int(pollInterval.components.attoseconds / 1_000_000_000))
        timer.schedule(deadline: .now() + interval, repeating: interval)
        timer.setEventHandler { [weak self] in
            guard let self else { return }
            self.listenIfNeeded()
            self.onChange(nil)
        }
        timer.resume()
        listenIfNeeded()
    }

    private func listenIfNeeded() {
        guard let channel else { return }
        let start = state.withLock { state -> Bool in
            guard !state.isStopped, !state.connecting, state.connection?.isClosed ?? true else { return false }
            state.connecting = true
            return true
        }
        guard start else { return }
        let configuration: PostgresConnection.Configuration
        do {
            configuration = try location.connectionConfiguration()
        } catch {
            state.withLock { $0.connecting = false }
            return
        }
        let onChange = self.onChange
        PostgresConnection.connect(on: MultiThreadedEventLoopGroup.singleton.next(), configuration: configuration, id: 0, logger: logger)
            .flatMap { connection in
                connection.addListener(channel: channel) { _, notification in onChange(UInt64(notification.payload)) }
                return connection.query("LISTEN \(unescaped: channel)", logger: self.logger).map { _ in connection }
            }
            .whenComplete { [weak self] result in
                guard let self else {
                    if case .success(let connection) = result { connection.close().whenComplete { _ in } }
                    return
                }
                let keep: PostgresConnection? = self.state.withLock { state in
                    state.connecting = false
                    guard case .success(let connection) = result else { return nil }
                    if state.isStopped { return nil }
                    state.connection = connection
                    return connection
                }
                switch result {
                case .success(let connection) where keep == nil:
                    connection.close().whenComplete { _ in }
                case .success:
                    // Appends made while nobody listened are caught up now.
                    onChange(nil)
                case .failure(let error):
                    self.logger.warning("cannot listen for other processes' appends; polling meanwhile", metadata: ["error": "\(error)"])
                }
            }
    }

    /// Tells the ledger at once, as a poll would.
    func signal() {
        onChange(nil)
    }

    /// A connection listens for notifications now.
    var isListening: Bool {
        state.withLock { $0.connection.map { !$0.isClosed } ?? false }
    }

    func stop() {
        timer.cancel()
        let connection = state.withLock { state in
            state.isStopped = true
            defer { state.connection = nil }
            return state.connection
        }
        try? connection?.close().wait()
    }
}
