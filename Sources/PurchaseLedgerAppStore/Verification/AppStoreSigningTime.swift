import Foundation

/// The time a payload's chain is checked at: its `signedDate`, in whole seconds, as Apple's
/// library reads it (`int(signedDate) // 1000`), or now when the payload has none.
///
/// `signedDate` is read before the signature is checked, so it is anyone's number. It must be
/// finite and within `earliest … now + allowedSkew`: anything else is `INVALID_JWT_FORMAT` and
/// never reaches the certificate code (swift-certificates traps on a time past year 9999).
/// Apple signs with the time of signing, so a real payload is always inside the window.
struct AppStoreSigningTime: Sendable, Hashable {
    /// 2000-01-01T00:00:00Z: before the App Store, and so before any real `signedDate`.
    static let earliest: Int64 = 946_684_800
    /// How far ahead of this server's clock a `signedDate` may be (clock skew, generously).
    static let allowedSkew: Int64 = 86_400

    /// Seconds since 1970.
    let seconds: Int64

    var date: Date { Date(timeIntervalSince1970: TimeInterval(seconds)) }

    init(seconds: Int64) {
        self.seconds = seconds
    }

    /// - Parameters:
    ///   - signedDate: the payload's milliseconds since 1970, if it has one.
    ///   - now: this server's clock.
    init(signedDate: Double?, now: Date = Date()) throws(AppStoreVerificationError) {
        let current = Self.wholeSeconds(now.timeIntervalSince1970)
        guard let signedDate else {
            self.init(seconds: current)
            return
        }
        // Compared as Doubles first, so that no conversion below can overflow.
        guard signedDate.isFinite,
              signedDate >= Double(Self.earliest) * 1000,
              signedDate < Double(current + Self.allowedSkew + 1) * 1000
        else {
            throw AppStoreVerificationError(.invalidJWTFormat, "signedDate is not a time between 2000-01-01 and tomorrow")
        }
        // `int(signedDate) // 1000`: whole milliseconds first, so that no rounding of the
        // division can carry a date into the next second.
        self.init(seconds: Self.wholeSeconds(signedDate.rounded(.down) / 1000))
    }

    /// `value` rounded down; callers keep it within ±2^53 first.
    private static func wholeSeconds(_ value: Double) -> Int64 {
        let whole = value.rounded(.down)
        guard whole.isFinite, whole > -9.0e15, whole < 9.0e15 else { return 0 }
        return Int64(whole)
    }
}
