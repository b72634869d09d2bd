/// A parsed JSON document. Numbers keep their literal text, so that an integer field can tell
/// `2` from `2.0` and no precision is lost before a field decides what it needs.
enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case number(JSONNumber)
    case string(String)
    case array([JSONValue])
    /// Keys compared by their bytes: `"é"` and `"e\u0301"` are two keys, as RFC 8259 reads them.
    case object([UTF8Key: JSONValue])

    /// A short name of the value's JSON type, for error messages.
    var typeName: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .number: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }
}

/// A JSON number, kept as its literal: the ledger judges integers and range bounds by the
/// exact decimal value, not by a rounded binary double.
struct JSONNumber: Sendable, Equatable {
    /// The literal as written, for example `-12`, `0.5` or `1e3`.
    var literal: String

    /// The value as a double (infinite for literals beyond its range).
    var double: Double { Double(literal) ?? .nan }

    /// The exact value, when it is an integer (`2`, `2.0` and `20e-1` all are), saturated to
    /// the range of `Int64`; nil when it has a fractional part.
    var integer: Int64? {
        let decimal = Decimal(literal)
        let digits = decimal.digits
        // Every digit after the decimal point must be zero.
        if digits.indices.contains(where: { $0 >= max(decimal.point, 0) && digits[$0] != 0 }) { return nil }
        var value: Int64 = 0
        var index = 0
        while index < decimal.point {
            let digit = index < digits.count ? Int64(digits[index]) : 0
            let (shifted, overflow1) = value.multipliedReportingOverflow(by: 10)
            let (next, overflow2) = shifted.addingReportingOverflow(digit)
            if overflow1 || overflow2 { return decimal.negative ? .min : .max }
            value = next
            index += 1
        }
        return decimal.negative ? -value : value
    }

    /// The exact value times 10^`exponent`, when that is an integer within `Int64` (`0.075`
    /// scaled by 6 is 75,000); nil otherwise. For decimal settings kept as integers.
    func integer(scaledBy exponent: Int) -> Int64? {
        let decimal = Decimal(literal)
        let places = decimal.point + exponent
        guard decimal.digits.count <= max(places, 0), places <= 19 else { return decimal.digits.isEmpty ? 0 : nil }
        var value: Int64 = 0
        for index in 0..<places {
            let digit = index < decimal.digits.count ? Int64(decimal.digits[index]) : 0
            let (shifted, overflow1) = value.multipliedReportingOverflow(by: 10)
            let (next, overflow2) = shifted.addingReportingOverflow(digit)
            if overflow1 || overflow2 { return nil }
            value = next
        }
        return decimal.negative ? -value : value
    }

    /// The double nearest the literal, nudged where rounding would put it on the wrong side of
    /// (or onto) one of `bounds`: `1.00000000000000000001` stays above 1, and
    /// `-0.99999999999999999999` stays above -1. Range checks on the result then agree with the
    /// exact decimal value.
    func double(keepingOrderAgainst bounds: [Int]) -> Double {
        var value = double
        for bound in bounds {
            let limit = Double(bound)
            switch Decimal(literal).compare(to: bound) {
            case .greater where value <= limit: value = limit.nextUp
            case .less where value >= limit: value = limit.nextDown
            case .equal: value = limit
            default: break
            }
        }
        return value
    }

    /// The literal as sign, significant digits and the position of the decimal point:
    /// value = 0.d₁d₂d₃… × 10^point.
    private struct Decimal {
        var negative = false
        var digits: [UInt8] = []
        var point = 0

        init(_ literal: String) {
            var integerDigits = 0
            var exponent = 0
            var exponentNegative = false
            var phase = 0 // 0 integer part, 1 fraction, 2 exponent
            for byte in literal.utf8 {
                switch byte {
                case UInt8(ascii: "-") where phase == 0: negative = true
                case UInt8(ascii: "-"): exponentNegative = true
                case UInt8(ascii: "+"): break
                case UInt8(ascii: "."): phase = 1
                case UInt8(ascii: "e"), UInt8(ascii: "E"): phase = 2
                default:
                    let digit = byte &- 0x30
                    if phase == 2 {
                        exponent = min(exponent * 10 + Int(digit), 1_000_000_000)
                    } else {
                        digits.append(digit)
                        if phase == 0 { integerDigits += 1 }
                    }
                }
            }
            // Drop leading zeros, moving the point with them.
            var leading = 0
            while leading < digits.count, digits[leading] == 0 { leading += 1 }
            digits.removeFirst(leading)
            while let last = digits.last, last == 0 { digits.removeLast() }
            point = digits.isEmpty ? 0 : integerDigits - leading + (exponentNegative ? -exponent : exponent)
        }

        enum Order { case less, equal, greater }

        /// Exact comparison with a small integer (-9…9).
        func compare(to bound: Int) -> Order {
            let selfSign = digits.isEmpty ? 0 : (negative ? -1 : 1)
            let boundSign = bound.signum()
            if selfSign != boundSign { return selfSign < boundSign ? .less : .greater }
            if selfSign == 0 { return .equal }
            // Same sign: compare magnitudes, then flip for negatives.
            let magnitude: Order
            if point > 1 {
                magnitude = .greater
            } else if point < 1 {
                magnitude = .less
            } else if Int(digits[0]) != abs(bound) {
                magnitude = Int(digits[0]) > abs(bound) ? .greater : .less
            } else {
                magnitude = digits.count > 1 ? .greater : .equal
            }
            guard selfSign < 0 else { return magnitude }
            switch magnitude {
            case .less: return .greater
            case .greater: return .less
            case .equal: return .equal
            }
        }
    }
}

struct JSONSyntaxError: Error, Sendable, Equatable, CustomStringConvertible {
    var message: String
    /// Byte offset in the input where the problem was found.
    var offset: Int

    var description: String { "\(message) at byte \(offset + 1)" }

    /// The message with the line and column (1-based, in bytes) where the problem is in
    /// `input`, for files a person edits: a catalog, a configuration.
    func described(in input: [UInt8]) -> String {
        var line = 1
        var lineStart = 0
        for index in 0..<min(offset, input.count) where input[index] == 0x0A {
            line += 1
            lineStart = index + 1
        }
        return "\(message) at line \(line), column \(offset - lineStart + 1)"
    }
}
