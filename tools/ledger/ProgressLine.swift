import Synchronization

/// A one-line report on standard error while long work runs: how far (a percentage when the
/// whole is known), the rate, and the time left. Drawn only when standard error is a terminal,
/// so that a script reading the output or the log sees results, not carriage returns. Redrawn
/// at most five times a second; safe to clear from a signal handler's thread.
final class ProgressLine: Sendable {
    private let verb: String
    private let unit: String
    private let isShown: Bool
    private let clock = ContinuousClock()
    private let started: ContinuousClock.Instant
    private let state = Mutex(State())
    private let latest = Atomic<UInt64>(0)

    /// The last count given to `update`, whether or not it was drawn: where the work is, for a
    /// message on Ctrl-C.
    var done: UInt64 { latest.load(ordering: .relaxed) }

    private struct State {
        var lastDrawn: ContinuousClock.Instant?
        var isDrawn = false
    }

    /// `verb` says what is done ("verifying"), `unit` what is counted ("events").
    init(_ verb: String, unit: String, shown: Bool = Console.errorIsTerminal) {
        self.verb = verb
        self.unit = unit
        isShown = shown
        started = clock.now
    }

    /// `done` units of `total` (when known).
    func update(_ done: UInt64, of total: UInt64?) {
        update(done, fraction: total.map { $0 == 0 ? 1 : Double(done) / Double($0) }, total: total)
    }

    /// `done` units, and the `fraction` of the whole done when it is known some other way (bytes
    /// read of a file whose line count is not).
    func update(_ done: UInt64, fraction: Double?, total: UInt64? = nil) {
        latest.store(done, ordering: .relaxed)
        guard isShown else { return }
        let now = clock.now
        let text: String? = state.withLock { state in
            if let last = state.lastDrawn, now - last < .milliseconds(200) { return nil }
            state.lastDrawn = now
            state.isDrawn = true
            return Self.text(verb: verb, done: done, total: total, unit: unit, fraction: fraction, elapsed: Self.seconds(now - started))
        }
        if let text { Console.status("\r\u{1B}[K" + text) }
    }

    /// Removes the line, so that what follows starts on a clean one.
    func clear() {
        let wasDrawn = state.withLock { state in
            defer { state.isDrawn = false }
            return state.isDrawn
        }
        if wasDrawn { Console.status("\r\u{1B}[K") }
    }

    /// `verifying  42% · 420,000 of 1,000,000 events · 512,000 events/s · 1 s left`
    static func text(verb: String, done: UInt64, total: UInt64?, unit: String, fraction: Double?, elapsed: Double) -> String {
        var parts: [String] = []
        var head = verb
        if let fraction {
            let percent = Int((min(max(fraction, 0), 1) * 100).rounded(.down))
            head += " " + String(repeating: " ", count: max(0, 3 - String(percent).count)) + "\(percent)%"
        }
        parts.append(head)
        parts.append(total.map { "\(grouped(done)) of \(grouped($0)) \(unit)" } ?? "\(grouped(done)) \(unit)")
        if elapsed > 0.5 {
            parts.append("\(grouped(Int(Double(done) / elapsed))) \(unit)/s")
            if let fraction, fraction > 0.001, fraction < 1 {
                parts.append(duration(elapsed * (1 - fraction) / fraction) + " left")
            }
        }
        return parts.joined(separator: " · ")
    }

    /// `<1 s`, `17 s`, `3 min 20 s`, `1 h 05 min`.
    static func duration(_ seconds: Double) -> String {
        let whole = Int(seconds.rounded())
        switch whole {
        case ..<1: return "<1 s"
        case ..<60: return "\(whole) s"
        case ..<3600: return "\(whole / 60) min \(whole % 60) s"
        default:
            let minutes = (whole % 3600) / 60
            return "\(whole / 3600) h \(minutes < 10 ? "0" : "")\(minutes) min"
        }
    }

    private static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}
