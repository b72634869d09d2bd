/// Adds up the books (FORMAT.md, "The books") over the accounts of one state, each seen through
/// the query's environments: money from the store's reports in force, subscriptions from each
/// group's transaction in force. One pass over the accounts; a transaction's money is counted
/// once, from its report signed last, whichever account holds it.
struct BooksCalculator {
    /// What the books keep of one transaction.
    private struct Sale {
        var record: StoreTransactionRecord
        /// Its chain's original purchase: the report's `originalPurchasedAt`, else the original
        /// transaction's `purchasedAt`, else its own start.
        var chainStart: Timestamp
    }

    /// Where a subscription group stands at an instant, for the counts.
    private enum Standing {
        /// Not counted: nothing started, or the transaction in force is family-shared.
        case absent
        case active(trial: Bool, record: StoreTransactionRecord)
        case inactive

        var isActive: Bool { if case .active = self { true } else { false } }
        var isPaidActive: Bool { if case .active(false, _) = self { true } else { false } }
    }

    /// A whole price, in the denominators of a fraction of it (`revocationPercentage`'s).
    private static let whole: Int128 = 100_000
    /// An auto-renewable bought a year or more after its chain began pays Apple 15%.
    private static let yearOfService: Int64 = 365 * 86_400

    private let query: BooksQuery
    private let catalog: Catalog
    private let periods: [(from: Timestamp, to: Timestamp)]
    /// Each period's start, then the last one's end.
    private let boundaries: [Timestamp]
    private var sales: [UTF8Key: Sale] = [:]
    private var books: Books

    init(query: BooksQuery, catalog: Catalog, position: UInt64) {
        self.query = query
        self.catalog = catalog
        periods = query.periods
        boundaries = periods.map(\.from) + (periods.last.map { [$0.to] } ?? [])
        books = Books(
            position: position, environments: query.environments, periods: periods.map { Books.Period(from: $0.from, to: $0.to) },
            at: Books.At(time: query.at))
    }

    /// Takes in one account's view: its reports in force (kept until every account is in, for
    /// a transaction reported in two) and its subscription groups' standings.
    mutating func add(_ view: AccountView) {
        for record in view.state.storeTransactions.values where record.fact.ownership != .familyShared {
            let key = UTF8Key(record.fact.transaction)
            if let existing = sales[key], !record.supersedes(existing.record) { continue }
            let original = record.fact.originalTransaction.flatMap { view.state.storeTransactions[UTF8Key($0)] }
            let chainStart = record.fact.originalPurchasedAt ?? original?.fact.purchasedAt ?? record.startsAt
            sales[key] = Sale(record: record, chainStart: chainStart)
        }
        for group in view.groups {
            countSubscription(group, in: view)
        }
    }

    /// The books, once every account is in.
    ///
    /// - Throws: `CancellationError` when its task is cancelled (checked every 1,024 sales).
    mutating func finish() throws(CancellationError) -> Books {
        for (index, sale) in sales.values.enumerated() {
            if index % 1024 == 0, Task.isCancelled { throw CancellationError() }
            count(sale)
        }
        return books
    }

    // MARK: Subscriptions

    private mutating func countSubscription(_ group: SubscriptionGroup, in view: AccountView) {
        // Asked at every period boundary: ordered once, each answer by a binary search.
        let group = SubscriptionGroup.Ordered(group)
        var previous = boundaries.isEmpty ? Standing.absent : standing(of: group, in: view, at: boundaries[0])
        for index in periods.indices {
            tally(previous, into: &books.periods[index].atStart)
            let next = standing(of: group, in: view, at: boundaries[index + 1])
            if previous.isPaidActive {
                books.periods[index].activeAtStart += 1
                if !next.isActive { books.periods[index].churned += 1 }
            }
            previous = next
        }
        tally(standing(of: group, in: view, at: query.at), into: &books.at)
    }

    /// Counts a group's standing in the figures at an instant: active, in trial, or paid and
    /// its price a month's in MRR.
    private func tally(_ standing: Standing, into at: inout Books.At) {
        guard case .active(let trial, let record) = standing else { return }
        at.active += 1
        if trial {
            at.inTrial += 1
            return
        }
        guard let price = record.fact.price, let currency = Self.currency(of: record.fact) else {
            at.unpriced += 1
            return
        }
        if let period = billedPeriod(of: record.fact) {
            let factor = period.monthlyFactor
            at.mrr[currency, default: 0] += ExactMoney.rounded(Int128(price) * Int128(factor.numerator), over: Int128(factor.denominator))
        } else {
            at.mrrUnnormalised[currency, default: 0] += Int128(price)
        }
    }

    private func standing(of ordered: SubscriptionGroup.Ordered, in view: AccountView, at time: Timestamp) -> Standing {
        guard let index = ordered.inForce(at: time) else { return .absent }
        let group = ordered.group
        let record = group.records[index]
        // Family sharing pays nothing, and a chain shared into the account (`shared`) is its
        // owner's subscription, counted there.
        guard record.fact.ownership != .familyShared, view.state.transfers[UTF8Key(record.fact.chain)]?.side != .sharing else {
            return .absent
        }
        let status = group.status(of: index, at: time, revoked: view.isRevoked(record, at: time), renewal: view.renewal(of: record))
        guard status.grantsAccess else { return .inactive }
        return .active(trial: record.fact.offerDiscountType == "FREE_TRIAL", record: record)
    }

    /// What one price pays for: a month for a monthly plan's instalment (`billingPlanType`
    /// `MONTHLY`), the offer's period for an offer paid up front, else the product's period.
    private func billedPeriod(of fact: StoreTransaction) -> Catalog.SubscriptionPeriod? {
        if fact.billingPlanType == "MONTHLY" { return .oneMonth }
        if fact.offerDiscountType == "PAY_UP_FRONT", let offer = fact.offerPeriod.flatMap(Catalog.SubscriptionPeriod.init(iso8601:)) {
            return offer
        }
        return catalog[fact.product]?.period
    }

    /// The transaction's currency: an ISO 4217 code (three capital letters), as Apple sends
    /// it; anything else prices nothing (and two spellings that Swift deems equal never merge).
    private static func currency(of fact: StoreTransaction) -> String? {
        fact.currency.flatMap { isThreeCapitalLetters($0) ? $0 : nil }
    }

    // MARK: Money

    private mutating func count(_ sale: Sale) {
        let record = sale.record
        let fact = record.fact
        let start = record.startsAt
        let purchasePeriod = period(containing: start)
        if let index = purchasePeriod, record.productType == .autoRenewable {
            if fact.originalTransaction.map({ sameBytes($0, fact.transaction) }) ?? true {
                books.periods[index].new += 1
            } else {
                books.periods[index].renewals += 1
            }
        }
        guard let price = fact.price, let currency = Self.currency(of: fact) else {
            if let index = purchasePeriod { books.periods[index].unpriced += 1 }
            if query.from == nil || purchasePeriod != nil { books.unpriced += 1 }
            return
        }
        let money = Transaction(record: record, price: Int128(price))
        let refundPeriod = money.refundedAt.flatMap(period(containing:))
        if let index = purchasePeriod { books.periods[index].byCurrency[currency, default: Books.Money()].sales += money.price }
        if let index = refundPeriod {
            books.periods[index].byCurrency[currency, default: Books.Money()].refunds += money.refund
        }
        // Proceeds: the period's exact net, less commission and tax, rounded once.
        let commission: Int128 = commissionIsReduced(sale) ? 15 : 30
        let rate = Int128(fact.storefront.flatMap { catalog.accounting.taxRates[$0] } ?? 0)
        let scale = Int128(Catalog.Accounting.taxRateScale)
        for index in Set([purchasePeriod, refundPeriod].compactMap { $0 }) {
            var net: Int128 = 0
            if index == purchasePeriod { net += money.price * Self.whole }
            if index == refundPeriod { net -= money.price * money.refundedShare }
            books.periods[index].byCurrency[currency, default: Books.Money()].proceeds += ExactMoney.rounded(
                net * (100 - commission) * scale, over: Self.whole * 100 * (scale + rate))
        }
        // Recognised: what was recognised by each period's end, less what was by its start.
        for index in recognitionPeriods(of: money, purchasePeriod: purchasePeriod, refundPeriod: refundPeriod) {
            let period = periods[index]
            let part = money.recognised(before: period.to) - money.recognised(before: period.from)
            if part != 0 {
                books.periods[index].byCurrency[currency, default: Books.Money()].recognised += ExactMoney.rounded(part, over: money.denominator)
            }
        }
        addDeferred(of: money, at: query.at, currency: currency, into: &books.at)
        // And at each period's start within its span.
        if let end = money.spreadUntil, var index = firstPeriod(startingAtOrAfter: money.start) {
            while index < periods.count, boundaries[index] < end {
                addDeferred(of: money, at: boundaries[index], currency: currency, into: &books.periods[index].atStart)
                index += 1
            }
        }
    }

    private func addDeferred(of money: Transaction, at time: Timestamp, currency: String, into at: inout Books.At) {
        let deferred = money.deferred(at: time)
        if deferred != 0 {
            at.deferred[currency, default: 0] += ExactMoney.rounded(deferred, over: money.denominator)
        }
    }

    /// The first period whose start is at or after `time`; nil when none is.
    private func firstPeriod(startingAtOrAfter time: Timestamp) -> Int? {
        var (low, high) = (0, periods.count)
        while low < high {
            let middle = (low + high) / 2
            if boundaries[middle] < time { low = middle + 1 } else { high = middle }
        }
        return low < periods.count ? low : nil
    }

    /// Apple's commission is 15% on what was bought in the Small Business Program, and on an
    /// auto-renewable a year or more into its chain; 30% otherwise.
    private func commissionIsReduced(_ sale: Sale) -> Bool {
        let start = sale.record.startsAt
        if catalog.accounting.smallBusinessProgram.contains(where: { $0.contains(start) }) { return true }
        guard sale.record.productType == .autoRenewable else { return false }
        let (served, overflow) = start.seconds.subtractingReportingOverflow(sale.chainStart.seconds)
        guard !overflow else { return false }
        return served > Self.yearOfService || (served == Self.yearOfService && start.nanoseconds >= sale.chainStart.nanoseconds)
    }

    /// The periods whose recognised revenue the transaction may change: those its span
    /// overlaps, and those of its purchase and its refund.
    private func recognitionPeriods(of money: Transaction, purchasePeriod: Int?, refundPeriod: Int?) -> [Int] {
        var indices = Set([purchasePeriod, refundPeriod].compactMap { $0 })
        if let end = money.spreadUntil, let first = boundaries.first, let last = boundaries.last, money.start < last, end > first {
            let from = period(containing: max(money.start, first)) ?? 0
            let through = period(containing: min(end, last)) ?? periods.count - 1
            indices.formUnion(from...through)
        }
        return indices.sorted()
    }

    /// The index of the period holding `time`; nil outside them all.
    private func period(containing time: Timestamp) -> Int? {
        guard let first = boundaries.first, let last = boundaries.last, first <= time, time < last else { return nil }
        var (low, high) = (0, periods.count)
        while high - low > 1 {
            let middle = (low + high) / 2
            if boundaries[middle] <= time { low = middle } else { high = middle }
        }
        return low
    }
}

extension BooksCalculator {
    /// One priced transaction's money over valid time, as exact fractions over `denominator`.
    struct Transaction {
        let price: Int128
        let start: Timestamp
        /// When its refund takes effect: a `revokedAt` that is not a family revoke.
        let refundedAt: Timestamp?
        /// The share refunded, in hundred-thousandths: all of it, or `revocationPercentage`
        /// of a prorated refund.
        let refundedShare: Int128
        /// Spread over `[start, spreadUntil)`: a subscription that expires after it starts.
        let spreadUntil: Timestamp?
        /// The span in units of `unit` nanoseconds (1, unless an absurd price needs it
        /// coarser to stay within 128 bits).
        private let span: Int128
        private let unit: Int128

        init(record: StoreTransactionRecord, price: Int128) {
            let fact = record.fact
            self.price = price
            start = record.startsAt
            if let revokedAt = fact.revokedAt, fact.revocationType != .familyRevoke {
                refundedAt = revokedAt
                refundedShare = fact.revocationType == .refundProrated ? Int128(fact.revocationPercentage ?? 100_000) : BooksCalculator.whole
            } else {
                refundedAt = nil
                refundedShare = 0
            }
            let spreads = record.productType == .autoRenewable || record.productType == .nonRenewing
            if spreads, let expiresAt = fact.expiresAt, expiresAt > record.startsAt {
                spreadUntil = expiresAt
                var (span, unit) = (expiresAt.nanosecondsSinceEpoch - record.startsAt.nanosecondsSinceEpoch, Int128(1))
                // price × 100,000 × span must stay well within 128 bits.
                while span > 1, price > 0, span > (Int128(1) << 100) / (price * BooksCalculator.whole) {
                    span /= 10
                    unit *= 10
                }
                self.span = max(span, 1)
                self.unit = unit
            } else {
                spreadUntil = nil
                span = 1
                unit = 1
            }
        }

        /// The refund, rounded: its share of the price.
        var refund: Int128 { ExactMoney.rounded(price * refundedShare, over: BooksCalculator.whole) }

        /// The denominator of `recognised(before:)` and `deferred(at:)`.
        var denominator: Int128 { BooksCalculator.whole * span }

        /// What was recognised over all instants before `time`: the price by the share of the
        /// span passed (all of it at the purchase, when it is not spread), less the refunded
        /// share of that once the refund took effect.
        func recognised(before time: Timestamp) -> Int128 {
            guard start < time else { return 0 }
            let passed: Int128
            if let end = spreadUntil {
                passed = min((min(time, end).nanosecondsSinceEpoch - start.nanosecondsSinceEpoch) / unit, span)
            } else {
                passed = span
            }
            return price * kept(before: time, inclusive: false) * passed
        }

        /// What was paid for, bought by `time` and not recognised by it: none for what is not
        /// spread, or once the span ended.
        func deferred(at time: Timestamp) -> Int128 {
            guard let end = spreadUntil, start <= time, time < end else { return 0 }
            let remaining = min((end.nanosecondsSinceEpoch - time.nanosecondsSinceEpoch) / unit, span)
            return price * kept(before: time, inclusive: true) * remaining
        }

        /// The share of the price that stands (in hundred-thousandths): all of it until the
        /// refund takes effect.
        private func kept(before time: Timestamp, inclusive: Bool) -> Int128 {
            guard let refundedAt, inclusive ? refundedAt <= time : refundedAt < time else { return BooksCalculator.whole }
            return BooksCalculator.whole - refundedShare
        }
    }
}

extension LedgerState {
    /// The books as this state knows them (`Books`), under `catalog`'s settings (the catalog in
    /// force at the state's position).
    ///
    /// - Throws: `CancellationError` when its task is cancelled (checked between accounts and
    ///   between sales: a server's reader that left stops it).
    public func books(_ query: BooksQuery, catalog: Catalog) throws(CancellationError) -> Books {
        var calculator = BooksCalculator(query: query, catalog: catalog, position: position)
        let excluded = query.excluded
        for (index, (account, state)) in accounts.keysAndValues.enumerated() {
            if index % 64 == 0, Task.isCancelled { throw CancellationError() }
            calculator.add(AccountView(account: account.string, state: state, excluding: excluded, catalog: nil) { revocations[$0] != nil })
        }
        return try calculator.finish()
    }
}
