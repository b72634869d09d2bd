import Logging
import Synchronization

/// Logs refused anonymous requests at a bounded rate: at most `burst` lines in each `interval`;
/// the rest are counted, and the count is logged once the next interval opens. A client that
/// sends a million bad notifications costs the log a few lines a minute (the metrics still
/// count every refusal).
final class RefusalLog: Sendable {
    private struct Window {
        var start: ContinuousClock.Instant
        var logged = 0
        var suppressed = 0
    }

    let burst: Int
    let interval: Duration
    private let window: Mutex<Window>

    init(burst: Int = 20, interval: Duration = .seconds(60)) {
        self.burst = burst
        self.interval = interval
        self.window = Mutex(Window(start: .now))
    }

    /// Logs `message` at warning unless this interval's lines are spent.
    func warning(_ message: @autoclosure () -> Logger.Message, metadata: @autoclosure () -> Logger.Metadata, logger: Logger) {
        let now = ContinuousClock.now
        let (log, suppressedBefore) = window.withLock { window -> (Bool, Int) in
            var suppressed = 0
            if now - window.start >= interval {
                suppressed = window.suppressed
                window = Window(start: now)
            }
            guard window.logged < burst else {
                window.suppressed += 1
                return (false, suppressed)
            }
            window.logged += 1
            return (true, suppressed)
        }
        if suppressedBefore > 0 {
            logger.warning("more refusals were not logged", metadata: ["count": "\(suppressedBefore)", "interval": "\(interval)"])
        }
        if log { logger.warning(message(), metadata: metadata()) }
    }
}
