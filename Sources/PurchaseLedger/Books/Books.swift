/// The books as known at a position (FORMAT.md, "The books"): sales, refunds, proceeds and
/// revenue recognised per period of valid time, and subscriptions, MRR and deferred revenue at
/// an instant. Estimates from the prices Apple signs: App Store Connect's reports are the ones
/// for accounting.
///
/// Money is in milliunits of each currency, exact sums of parts each rounded half to even.
///
/// ## Topics
/// - ``Money``
/// - ``Period``
/// - ``At``
public struct Books: Sendable, Hashable {
    /// One currency's money over a period.
    public struct Money: Sendable, Hashable {
        public var sales: Int128 = 0
        public var refunds: Int128 = 0
        public var net: Int128 { sales - refunds }
        /// Net less Apple's commission (and the storefront's tax, where the catalog gives it).
        public var proceeds: Int128 = 0
        public var recognised: Int128 = 0

        public init() {}
    }

    /// The figures of one period `[from, to)`.
    public struct Period: Sendable, Hashable {
        public var from: Timestamp
        public var to: Timestamp
        /// By ISO 4217 code.
        public var byCurrency: [String: Money] = [:]
        /// Auto-renewable transactions purchased in the period that start a chain.
        public var new = 0
        /// Those that continue one (upgrades too).
        public var renewals = 0
        /// (Account, subscription group) pairs paid and active at `from`, not active at `to`.
        public var churned = 0
        /// Pairs paid and active at `from`.
        public var activeAtStart = 0
        /// Transactions purchased in the period without `price` or `currency`.
        public var unpriced = 0
        /// The figures at `from`: the series of MRR, subscriptions and deferred revenue over
        /// the periods, in one answer.
        public var atStart: At

        init(from: Timestamp, to: Timestamp) {
            self.from = from
            self.to = to
            atStart = At(time: from)
        }
    }

    /// The figures at one instant.
    public struct At: Sendable, Hashable {
        public var time: Timestamp
        /// (Account, subscription group) pairs active or in their grace period.
        public var active = 0
        /// Those whose transaction in force is a free trial.
        public var inTrial = 0
        public var paid: Int { active - inTrial }
        /// Paid subscriptions' prices normalised to a month, by currency.
        public var mrr: [String: Int128] = [:]
        /// Paid subscriptions whose product has no period in the catalog, at their price.
        public var mrrUnnormalised: [String: Int128] = [:]
        /// Paid subscriptions whose transaction in force has no price or currency.
        public var unpriced = 0
        /// What was paid for and is not yet recognised, by currency.
        public var deferred: [String: Int128] = [:]
    }

    /// How many events the books reflect.
    public var position: UInt64
    public var environments: Set<StoreEnvironment>
    /// Transactions purchased in the range asked (any time without one) that lack `price` or
    /// `currency`.
    public var unpriced = 0
    public var periods: [Period]
    public var at: At

    /// `{"position", "estimate": true, "environments", "unpriced", "periods": [...], "at": {...}}`.
    public var json: String {
        var writer = JSONWriter()
        writer.beginObject()
        writer.member("position", Int64(position))
        writer.member("estimate", true)
        writer.key("environments")
        writer.beginArray()
        for environment in StoreEnvironment.allCases where environments.contains(environment) {
            writer.string(environment.rawValue)
        }
        writer.endArray()
        writer.member("unpriced", Int64(unpriced))
        writer.key("periods")
        writer.beginArray()
        for period in periods {
            writer.beginObject()
            writer.member("from", period.from)
            writer.member("to", period.to)
            writer.key("byCurrency")
            writer.beginObject()
            for currency in period.byCurrency.keys.sorted(by: utf8Order) {
                let money = period.byCurrency[currency]!
                writer.key(currency)
                writer.beginObject()
                Self.write("sales", money.sales, to: &writer)
                Self.write("refunds", money.refunds, to: &writer)
                Self.write("net", money.net, to: &writer)
                Self.write("proceeds", money.proceeds, to: &writer)
                Self.write("recognised", money.recognised, to: &writer)
                writer.endObject()
            }
            writer.endObject()
            writer.member("new", Int64(period.new))
            writer.member("renewals", Int64(period.renewals))
            writer.member("churned", Int64(period.churned))
            writer.member("activeAtStart", Int64(period.activeAtStart))
            writer.member("unpriced", Int64(period.unpriced))
            writer.key("atStart")
            Self.write(period.atStart, to: &writer)
            writer.endObject()
        }
        writer.endArray()
        writer.key("at")
        Self.write(at, to: &writer)
        writer.endObject()
        return writer.string
    }

    private static func write(_ at: At, to writer: inout JSONWriter) {
        writer.beginObject()
        writer.member("time", at.time)
        writer.member("active", Int64(at.active))
        writer.member("inTrial", Int64(at.inTrial))
        writer.member("paid", Int64(at.paid))
        write("mrr", at.mrr, to: &writer)
        write("mrrUnnormalised", at.mrrUnnormalised, to: &writer)
        writer.member("unpriced", Int64(at.unpriced))
        write("deferred", at.deferred, to: &writer)
        writer.endObject()
    }

    private static func write(_ name: String, _ value: Int128, to writer: inout JSONWriter) {
        writer.key(name)
        writer.raw(String(value))
    }

    private static func write(_ name: String, _ amounts: [String: Int128], to writer: inout JSONWriter) {
        writer.key(name)
        writer.beginObject()
        for currency in amounts.keys.sorted(by: utf8Order) {
            write(currency, amounts[currency]!, to: &writer)
        }
        writer.endObject()
    }
}
