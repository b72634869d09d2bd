#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An instant, to the nanosecond: what an event's `at` and a subscription's `expiresAt` hold.
///
/// Parsed from RFC 3339 (any UTC offset, fractional seconds to nine digits; further digits are
/// dropped) and always written back in UTC with the shortest exact fraction, so the text of a
/// timestamp is canonical: `2026-03-01T09:30:00.25Z`.
public struct Timestamp: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// Whole seconds since 1970-01-01T00:00:00Z (negative before).
    public var seconds: Int64
    /// Nanoseconds within the second, 0 ..< 1,000,000,000.
    public var nanoseconds: UInt32

    public init(seconds: Int64, nanoseconds: UInt32 = 0) {
        precondition(nanoseconds < 1_000_000_000, "nanoseconds out of range")
        self.seconds = seconds
        self.nanoseconds = nanoseconds
    }

    /// The current time of the system clock.
    public static func now() -> Timestamp {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return Timestamp(seconds: Int64(time.tv_sec), nanoseconds: UInt32(time.tv_nsec))
    }

    /// 0000-01-01T00:00:00Z and 9999-12-31T23:59:59.999999999Z: the range RFC 3339 can write.
    public static let earliest = Timestamp(seconds: -62_167_219_200)
    public static let latest = Timestamp(seconds: 253_402_300_799, nanoseconds: 999_999_999)

    /// True when RFC 3339 can write this instant in UTC (years 0000 to 9999).
    public var isRepresentable: Bool { self >= .earliest && self <= .latest }

    public static func < (lhs: Timestamp, rhs: Timestamp) -> Bool {
        (lhs.seconds, lhs.nanoseconds) < (rhs.seconds, rhs.nanoseconds)
    }

    /// RFC 3339 (`rfc3339`) for a representable instant; seconds since 1970 for another.
    public var description: String {
        isRepresentable ? rfc3339 : "\(seconds) s \(nanoseconds) ns since 1970 (outside years 0000–9999)"
    }

    // MARK: RFC 3339

    /// Parses `YYYY-MM-DDTHH:MM:SS[.fraction](Z|+HH:MM|-HH:MM)`; `t` and `z` may be lower case.
    /// Returns nil for anything else, including impossible dates. A leap second is accepted
    /// only where one can occur, at 23:59:60 UTC, and read as 23:59:59.999999999 (the last
    /// instant this type can tell from the next day).
    public init?(rfc3339 text: some StringProtocol) {
        guard let parsed = Array(text.utf8).withUnsafeBufferPointer(Self.parse) else {
            return nil
        }
        self = parsed
    }

    /// Parses RFC 3339 from UTF-8 bytes (see `init?(rfc3339:)`).
    static func parse(_ b: UnsafeBufferPointer<UInt8>) -> Timestamp? {
        var i = 0
        func digits(_ count: Int) -> Int? {
            guard i + count <= b.count else { return nil }
            var value = 0
            for _ in 0..<count {
                let d = Int(b[i]) - 48
                guard d >= 0 && d <= 9 else { return nil }
                value = value * 10 + d
                i += 1
            }
            return value
        }
        func expect(_ characters: UInt8...) -> Bool {
            guard i < b.count, characters.contains(b[i]) else { return false }
            i += 1
            return true
        }
        guard let year = digits(4), expect(0x2D), let month = digits(2), expect(0x2D), let day = digits(2),
              expect(0x54, 0x74), let hour = digits(2), expect(0x3A), let minute = digits(2), expect(0x3A),
              let second = digits(2)
        else { return nil }
        guard (1...12).contains(month), day >= 1, day <= daysIn(month: month, year: year),
              hour <= 23, minute <= 59, second <= 60
        else { return nil }
        var nanos = 0
        if i < b.count, b[i] == 0x2E {
            i += 1
            var count = 0
            while i < b.count, b[i] >= 48, b[i] <= 57 {
                if count < 9 { nanos = nanos * 10 + Int(b[i] - 48) }
                count += 1
                i += 1
            }
            guard count > 0 else { return nil }
            for _ in count..<max(count, 9) { nanos *= 10 }
        }
        var offsetSeconds = 0
        guard i < b.count else { return nil }
        if b[i] == 0x5A || b[i] == 0x7A {
            i += 1
        } else {
            let sign = b[i] == 0x2B ? 1 : (b[i] == 0x2D ? -1 : 0)
            guard sign != 0 else { return nil }
            i += 1
            guard let offsetHours = digits(2), expect(0x3A), let offsetMinutes = digits(2),
                  offsetHours <= 23, offsetMinutes <= 59
            else { return nil }
            offsetSeconds = sign * (offsetHours * 3600 + offsetMinutes * 60)
        }
        guard i == b.count else { return nil }
        let days = daysSinceEpoch(year: year, month: month, day: day)
        if second == 60 {
            let utcSecondOfDay = ((hour * 3600 + minute * 60 + 59 - offsetSeconds) % 86_400 + 86_400) % 86_400
            guard utcSecondOfDay == 86_399 else { return nil }
            return Timestamp(seconds: days * 86_400 + Int64(hour * 3600 + minute * 60 + 59 - offsetSeconds), nanoseconds: 999_999_999)
        }
        let seconds = days * 86_400 + Int64(hour * 3600 + minute * 60 + second - offsetSeconds)
        return Timestamp(seconds: seconds, nanoseconds: UInt32(nanos))
    }

    /// UTC, `Z`, and the fraction only as long as it needs to be. For a representable instant
    /// (`isRepresentable`): every time the ledger is given or reads back is checked to be one.
    public var rfc3339: String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(30)
        appendRFC3339(to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    func appendRFC3339(to out: inout [UInt8]) {
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let secondOfDay = Int(seconds - days * 86_400)
        let (year, month, day) = Self.civil(fromDays: days)
        func put(_ value: Int, width: Int) {
            var divisor = 1
            for _ in 1..<width { divisor *= 10 }
            var v = value
            while divisor > 0 {
                out.append(UInt8(48 + (v / divisor) % 10))
                v %= divisor
                divisor /= 10
            }
        }
        put(year, width: 4); out.append(0x2D)
        put(month, width: 2); out.append(0x2D)
        put(day, width: 2); out.append(0x54)
        put(secondOfDay / 3600, width: 2); out.append(0x3A)
        put(secondOfDay / 60 % 60, width: 2); out.append(0x3A)
        put(secondOfDay % 60, width: 2)
        if nanoseconds > 0 {
            out.append(0x2E)
            var fraction = Int(nanoseconds)
            var width = 9
            while fraction % 10 == 0 {
                fraction /= 10
                width -= 1
            }
            put(fraction, width: width)
        }
        out.append(0x5A)
    }

    // MARK: Civil calendar (proleptic Gregorian), after Howard Hinnant's algorithms.

    private static func isLeap(_ year: Int) -> Bool {
        year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
    }

    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: isLeap(year) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    static func daysSinceEpoch(year: Int, month: Int, day: Int) -> Int64 {
        let y = Int64(month <= 2 ? year - 1 : year)
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let m = Int64(month)
        let dayOfYear = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + Int64(day) - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    static func civil(fromDays days: Int64) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        return (Int(year), Int(month), Int(day))
    }
}
