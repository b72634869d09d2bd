/// What the books need beyond the products (FORMAT.md, "The books"): how long a subscription's
/// period is, the periods the app was in Apple's Small Business Program, and the tax rates of
/// storefronts. None of it changes a rule or an account's answer, so a later catalog may change
/// it; the books at a position read the catalog in force there.
extension Catalog {
    /// One period of an auto-renewable subscription, as Apple sells them (and StoreKit testing),
    /// with the factor that makes its price a month's for MRR, as RevenueCat normalises it.
    public enum SubscriptionPeriod: String, Sendable, Hashable, CaseIterable {
        case oneDay = "P1D", threeDays = "P3D", oneWeek = "P1W", twoWeeks = "P2W", fourWeeks = "P4W"
        case oneMonth = "P1M", twoMonths = "P2M", threeMonths = "P3M", sixMonths = "P6M", oneYear = "P1Y"

        /// An ISO 8601 duration naming one of the periods (`P7D` is `P1W`, `P12M` is `P1Y`);
        /// nil for any other.
        public init?(iso8601 text: String) {
            let aliases = ["P7D": Self.oneWeek, "P14D": .twoWeeks, "P28D": .fourWeeks, "P12M": .oneYear]
            guard let period = Self(rawValue: text) ?? aliases[text] else { return nil }
            self = period
        }

        /// A month's worth of one period's price is its price × `numerator` / `denominator`.
        public var monthlyFactor: (numerator: Int64, denominator: Int64) {
            switch self {
            case .oneDay: (30, 1)
            case .threeDays: (10, 1)
            case .oneWeek: (4, 1)
            case .twoWeeks: (2, 1)
            case .fourWeeks, .oneMonth: (1, 1)
            case .twoMonths: (1, 2)
            case .threeMonths: (1, 3)
            case .sixMonths: (1, 6)
            case .oneYear: (1, 12)
            }
        }
    }

    /// The catalog's settings for the books.
    public struct Accounting: Sendable, Hashable {
        /// A span of time, `[from, to)`; without `to`, open-ended.
        public struct Interval: Sendable, Hashable {
            public var from: Timestamp
            public var to: Timestamp?

            public init(from: Timestamp, to: Timestamp? = nil) {
                self.from = from
                self.to = to
            }

            public func contains(_ time: Timestamp) -> Bool {
                from <= time && to.map { time < $0 } ?? true
            }
        }

        /// Tax rates are kept in millionths: 0.2 is 200,000.
        public static let taxRateScale: Int64 = 1_000_000

        /// When the app was in the Small Business Program: Apple's commission is 15% on what was
        /// bought then.
        public var smallBusinessProgram: [Interval] = []
        /// Storefront (Apple's three-letter code) → its tax rate, in millionths.
        public var taxRates: [String: Int64] = [:]

        public init(smallBusinessProgram: [Interval] = [], taxRates: [String: Int64] = [:]) {
            self.smallBusinessProgram = smallBusinessProgram
            self.taxRates = taxRates
        }

        public var isEmpty: Bool { smallBusinessProgram.isEmpty && taxRates.isEmpty }

        /// Refuses what no catalog file can give (`read(from:)` checks the same): a rate out of
        /// 0…1, a storefront not of three capital letters, a period that ends before it starts.
        func check() throws(CatalogError) {
            for (code, rate) in taxRates where !isThreeCapitalLetters(code) || !(0...Self.taxRateScale).contains(rate) {
                throw CatalogError(.invalid, "taxRates: \(code) must be three capital letters with a rate from 0 to 1 (in millionths, 0 to \(Self.taxRateScale))")
            }
            for interval in smallBusinessProgram {
                guard interval.from.isRepresentable, interval.to.map({ $0.isRepresentable && interval.from < $0 }) ?? true else {
                    throw CatalogError(.invalid, "smallBusinessProgram: a period must end after it starts, within years 0000–9999")
                }
            }
        }

        /// `smallBusinessProgram: [{"from", "to"?}]` and `taxRates: {"FRA": 0.2}`, top-level
        /// members of a catalog or of a `.storekit` file's side file; none when absent.
        static func read(from fields: [UTF8Key: JSONValue]) throws(CatalogError) -> Accounting {
            var accounting = Accounting()
            switch fields["smallBusinessProgram"] {
            case nil, .null?:
                break
            case .array(let entries)?:
                for (index, entry) in entries.enumerated() {
                    guard case .object(let object) = entry, case .string(let fromText)? = object["from"],
                        let from = Timestamp(rfc3339: fromText), from.isRepresentable
                    else {
                        throw CatalogError(.invalid, "smallBusinessProgram[\(index)] needs \"from\", an RFC 3339 time")
                    }
                    var to: Timestamp?
                    switch object["to"] {
                    case nil, .null?: break
                    case .string(let text)?:
                        guard let time = Timestamp(rfc3339: text), time.isRepresentable, from < time else {
                            throw CatalogError(.invalid, "smallBusinessProgram[\(index)]: \"to\" must be an RFC 3339 time after \"from\"")
                        }
                        to = time
                    case let other?:
                        throw CatalogError(.invalid, "smallBusinessProgram[\(index)]: \"to\" must be a string, not \(other.typeName)")
                    }
                    accounting.smallBusinessProgram.append(Interval(from: from, to: to))
                }
            case let other?:
                throw CatalogError(.invalid, "\"smallBusinessProgram\" must be an array, not \(other.typeName)")
            }
            switch fields["taxRates"] {
            case nil, .null?:
                break
            case .object(let rates)?:
                for (storefront, value) in rates {
                    let code = storefront.string
                    guard isThreeCapitalLetters(code) else {
                        throw CatalogError(.invalid, "taxRates: \"\(code)\" is not a storefront (three capital letters, as Apple's storefront)")
                    }
                    guard case .number(let number) = value, let rate = number.integer(scaledBy: 6), (0...taxRateScale).contains(rate) else {
                        throw CatalogError(.invalid, "taxRates: the rate of \(code) must be a number from 0 to 1 with at most 6 decimals")
                    }
                    accounting.taxRates[code] = rate
                }
            case let other?:
                throw CatalogError(.invalid, "\"taxRates\" must be an object, not \(other.typeName)")
            }
            return accounting
        }

        func write(to writer: inout JSONWriter) {
            if !smallBusinessProgram.isEmpty {
                writer.key("smallBusinessProgram")
                writer.beginArray()
                for interval in smallBusinessProgram {
                    writer.beginObject()
                    writer.member("from", interval.from)
                    writer.member("to", ifPresent: interval.to)
                    writer.endObject()
                }
                writer.endArray()
            }
            if !taxRates.isEmpty {
                writer.key("taxRates")
                writer.beginObject()
                for code in taxRates.keys.sorted() {
                    writer.key(code)
                    writer.raw(Self.decimal(taxRates[code]!))
                }
                writer.endObject()
            }
        }

        /// A rate in millionths as the shortest decimal: 200,000 is `0.2`.
        static func decimal(_ millionths: Int64) -> String {
            let whole = millionths / taxRateScale
            var fraction = String(millionths % taxRateScale)
            guard fraction != "0" else { return String(whole) }
            fraction = String(repeating: "0", count: 6 - fraction.count) + fraction
            while fraction.hasSuffix("0") { fraction.removeLast() }
            return "\(whole).\(fraction)"
        }
    }
}

/// An ISO 4217 currency or an Apple storefront code: three capital letters A–Z.
func isThreeCapitalLetters(_ code: String) -> Bool {
    code.utf8.count == 3 && code.utf8.allSatisfy { (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) }
}
