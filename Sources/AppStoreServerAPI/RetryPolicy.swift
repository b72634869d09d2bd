import Foundation

/// How the client retries 429 (rate limited), 5xx and connection failures: up to
/// `maximumAttempts` calls in all, waiting what `Retry-After` asks (capped at `maximumWait`),
/// else an exponential backoff from `initialBackoff`.
public struct AppStoreServerAPIRetryPolicy: Sendable, Hashable {
    public var maximumAttempts: Int
    public var initialBackoff: Duration
    public var maximumWait: Duration

    public init(maximumAttempts: Int = 5, initialBackoff: Duration = .milliseconds(500), maximumWait: Duration = .seconds(60)) {
        self.maximumAttempts = max(1, maximumAttempts)
        self.initialBackoff = initialBackoff
        self.maximumWait = maximumWait
    }

    /// The wait before attempt `attempt + 1` (attempt counts from 1).
    func wait(after attempt: Int, retryAfter header: String?, now: Date = Date()) -> Duration {
        if let asked = Self.retryAfter(header, now: now) { return min(asked, maximumWait) }
        let backoff = initialBackoff * (1 << min(attempt - 1, 16))
        return min(backoff, maximumWait)
    }

    /// `Retry-After` in either form: Apple documents a UNIX time in milliseconds; HTTP's own
    /// form is seconds to wait. A number too large to be seconds to wait (past year 5138 as
    /// seconds) is read as Apple's. An HTTP date or anything else is ignored (then: backoff).
    static func retryAfter(_ header: String?, now: Date) -> Duration? {
        guard let text = header?.trimmingCharacters(in: .whitespaces), let number = Double(text),
              number.isFinite, number >= 0
        else { return nil }
        if number >= 1e11 {
            let milliseconds = number - now.timeIntervalSince1970 * 1000
            return .milliseconds(max(0, min(milliseconds, 1e9)))
        }
        return .milliseconds(min(number, 1e6) * 1000)
    }
}
