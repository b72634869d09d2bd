/// The books' arithmetic: each transaction's part of a figure is an exact fraction, rounded half
/// to even to a whole milliunit once (FORMAT.md, "The books"). In 128 bits, so that no price the
/// log holds can overflow it.
enum ExactMoney {
    /// `numerator / denominator` (denominator > 0) rounded to the nearest integer, half to even.
    static func rounded(_ numerator: Int128, over denominator: Int128) -> Int128 {
        precondition(denominator > 0, "a share of nothing")
        var quotient = numerator / denominator
        var remainder = numerator % denominator
        if remainder < 0 {
            quotient -= 1
            remainder += denominator
        }
        // remainder in [0, denominator): compare it with the half without overflowing.
        let aboveHalf = remainder > denominator - remainder
        let atHalf = remainder == denominator - remainder
        if aboveHalf || (atHalf && quotient & 1 != 0) { quotient += 1 }
        return quotient
    }
}

extension Timestamp {
    /// Nanoseconds since 1970, exactly.
    var nanosecondsSinceEpoch: Int128 {
        Int128(seconds) * 1_000_000_000 + Int128(nanoseconds)
    }
}
