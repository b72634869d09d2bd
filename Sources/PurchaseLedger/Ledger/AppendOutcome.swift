/// What appending an event did.
public enum AppendOutcome: Sendable, Hashable {
    /// The event was appended at this log position (durable when reported).
    case appended(position: UInt64)
    /// The event repeats the one at this position (same id, or a redelivery StoreKit makes):
    /// nothing was appended.
    case duplicate(of: UInt64)

    /// The position appended, or the position of the event this one duplicates.
    public var position: UInt64 {
        switch self {
        case .appended(let position), .duplicate(let position): position
        }
    }
}

/// One event's result in a batch: its outcome, or why it was rejected.
public typealias AppendResult = Result<AppendOutcome, LedgerError>

/// One event of the log, with its position.
public struct LogRecord: Sendable, Hashable {
    public var position: UInt64
    public var event: Event

    public init(position: UInt64, event: Event) {
        self.position = position
        self.event = event
    }
}
