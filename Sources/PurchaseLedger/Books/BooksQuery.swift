/// What the books are asked (FORMAT.md, "The books"): periods of valid time `[from, to)`, cut by
/// day, ISO week or month (UTC), an instant for the figures at a time, and the environments.
/// The position (what the ledger knew) is chosen by whoever holds the state.
public struct BooksQuery: Sendable, Hashable {
    /// How `[from, to)` is cut: each period ends at the next UTC midnight, Monday or first of a
    /// month, the first and last cut to `from` and `to`.
    public enum Granularity: String, Sendable, Hashable, CaseIterable {
        case day, week, month
    }

    /// Why a query cannot be answered; it changes nothing.
    public struct Invalid: Error, Sendable, Hashable, CustomStringConvertible {
        public var message: String
        public var description: String { message }
    }

    /// The most periods one query may ask (a day at a time, 27 years): each costs work for every
    /// subscription of the ledger.
    public static let maximumPeriods = 10_000

    /// Periods of valid time: both bounds or neither.
    public private(set) var from: Timestamp?
    public private(set) var to: Timestamp?
    public private(set) var granularity: Granularity?
    /// The instant of `Books.At`.
    public private(set) var at: Timestamp
    /// The environments whose store reports count; Production alone by default (sandbox
    /// purchases are never revenue).
    public private(set) var environments: Set<StoreEnvironment>

    /// - Throws: `Invalid` when one bound is given without the other, `to` is not after `from`,
    ///   `by` is given without a range, a time is outside years 0000–9999, no environment is
    ///   given, or the range holds more than `maximumPeriods` periods.
    public init(
        from: Timestamp? = nil, to: Timestamp? = nil, by granularity: Granularity? = nil, at: Timestamp = .now(),
        environments: Set<StoreEnvironment> = [.production]
    ) throws(Invalid) {
        guard (from == nil) == (to == nil) else { throw Invalid(message: "from and to go together: give both or neither") }
        if let from, let to {
            guard from.isRepresentable, to.isRepresentable else { throw Invalid(message: "from and to must be within years 0000–9999") }
            guard from < to else { throw Invalid(message: "to must be after from") }
        } else if granularity != nil {
            throw Invalid(message: "by needs from and to")
        }
        guard at.isRepresentable else { throw Invalid(message: "at must be within years 0000–9999") }
        guard !environments.isEmpty else { throw Invalid(message: "name at least one environment") }
        self.from = from
        self.to = to
        self.granularity = granularity
        self.at = at
        self.environments = environments
        guard periodCount() <= Self.maximumPeriods else {
            throw Invalid(message: "the range holds more than \(Self.maximumPeriods) periods; cut it coarser or shorter")
        }
    }

    /// The environments left out of the view.
    var excluded: Set<StoreEnvironment> { Set(StoreEnvironment.allCases).subtracting(environments) }

    /// The periods, in order: none without a range, the range whole without a granularity.
    public var periods: [(from: Timestamp, to: Timestamp)] {
        guard let from, let to else { return [] }
        var periods: [(from: Timestamp, to: Timestamp)] = []
        var start = from
        while start < to {
            let end = granularity.map { min(Self.nextBoundary(after: start, $0), to) } ?? to
            periods.append((start, end))
            start = end
        }
        return periods
    }

    /// How many periods, counted no further than one past the most allowed (checked before
    /// they are made).
    private func periodCount() -> Int {
        guard let from, let to else { return 0 }
        guard let granularity else { return 1 }
        var (count, start) = (0, from)
        while start < to, count <= Self.maximumPeriods {
            start = Self.nextBoundary(after: start, granularity)
            count += 1
        }
        return count
    }

    /// The first UTC midnight, Monday 00:00 or first of a month 00:00 after `time`.
    static func nextBoundary(after time: Timestamp, _ granularity: Granularity) -> Timestamp {
        let day = time.seconds >= 0 ? time.seconds / 86_400 : (time.seconds - 86_399) / 86_400
        switch granularity {
        case .day:
            return Timestamp(seconds: (day + 1) * 86_400)
        case .week:
            // 1970-01-01 was a Thursday: day 4 (mod 7) is a Monday.
            let weekday = ((day - 4) % 7 + 7) % 7
            return Timestamp(seconds: (day + 7 - weekday) * 86_400)
        case .month:
            let (year, month, _) = Timestamp.civil(fromDays: day)
            let next = month == 12 ? (year + 1, 1) : (year, month + 1)
            return Timestamp(seconds: Timestamp.daysSinceEpoch(year: next.0, month: next.1, day: 1) * 86_400)
        }
    }
}
