/// What one account's projection did at one place in the feed: an event changed it, or time
/// passed an instant where it changes (an expiry, a grace period's end). It carries the whole
/// projection after it, so a consumer that keeps, per account, the change with the greatest
/// cursor is right even when deliveries repeat or cross.
public struct LedgerChange: Sendable, Hashable {
    public enum Cause: Sendable, Hashable {
        /// The event appended at the change's position.
        case event(id: String, type: EventType)
        /// Time passed this instant with nothing appended.
        case time(Timestamp)
    }

    public var cursor: FeedCursor
    public var account: String
    /// The log position the projection reflects.
    public var position: UInt64
    public var cause: Cause
    /// The instant the projection is judged at: the commit's time by the ledger's clock, or the
    /// instant time passed.
    public var asOf: Timestamp
    public var differences: [ChangeDifference]
    /// The account's projection after the change (as `GET /v1/accounts/{account}` answers it).
    public var projection: AccountProjection

    /// The change's id: its cursor's text. The same on every delivery and every derivation.
    public var id: String { cursor.description }
}

/// One way a projection differs from the one before it.
public enum ChangeDifference: Sendable, Hashable {
    /// Why an entitlement was taken away before its time.
    public enum Revocation: String, Sendable, Hashable, CaseIterable {
        /// Apple refunded it (`REFUND_FULL`, `REFUND_PRORATED` or no type).
        case refund
        /// Family Sharing stopped sharing it (`FAMILY_REVOKE`).
        case familyRevoke
        /// A `revoked` event of the device's queue.
        case revokedEvent
        /// A `transferred` event moved the purchase to another account.
        case transferred
    }

    case entitlementGranted(product: String)
    case entitlementRevoked(product: String, reason: Revocation)
    case entitlementExpired(product: String)
    /// A named entitlement of the catalog changed the product granting it: it became active
    /// (`from` nil), ended (`to` nil), or passed to another of its products (an upgrade from
    /// monthly to yearly inside "pro").
    case namedEntitlement(name: String, from: String?, to: String?)
    /// A subscription group's status moved (nil: the group was not listed).
    case subscriptionStatus(group: String, from: SubscriptionStatus.Status?, to: SubscriptionStatus.Status?)
    case balance(item: String, delta: Int64)
    /// An entry of the queue now awaits `finishTransaction` (new, or newly purchased).
    case transactionUnfinished(payment: String)
    case transactionFinished(payment: String)
}

extension ChangeDifference {
    /// How `after` differs from `before` (nil: the account had no projection), with `cause`
    /// telling a revocation's kind where the reports do not.
    static func between(_ before: AccountProjection?, _ after: AccountProjection, cause: LedgerChange.Cause) -> [ChangeDifference] {
        var differences: [ChangeDifference] = []
        // Each part compared whole first: most changes leave most parts as they were.
        let entitled = before?.entitlements ?? []
        // Ids compare by bytes, as everywhere in the ledger (not by Unicode equivalence).
        if !entitled.elementsEqual(after.entitlements, by: sameBytes) {
            let had = Set(entitled.map { UTF8Key($0) })
            let has = Set(after.entitlements.map { UTF8Key($0) })
            for product in has.subtracting(had).sorted() {
                differences.append(.entitlementGranted(product: product.string))
            }
            for product in had.subtracting(has).sorted() {
                if let reason = revocation(of: product.string, before: before, after: after, cause: cause) {
                    differences.append(.entitlementRevoked(product: product.string, reason: reason))
                } else {
                    differences.append(.entitlementExpired(product: product.string))
                }
            }
        }
        let named = before?.namedEntitlements ?? []
        if !named.elementsEqual(after.namedEntitlements, by: { sameBytes($0.name, $1.name) && sameBytes($0.product, $1.product) }) {
            // A catalog never drops an entitlement: every name before is still there after.
            for entitlement in after.namedEntitlements {
                let was = named.first { sameBytes($0.name, entitlement.name) }?.product
                if !sameBytes(was, entitlement.product) {
                    differences.append(.namedEntitlement(name: entitlement.name, from: was, to: entitlement.product))
                }
            }
        }
        let subscriptions = before?.subscriptions ?? []
        let sameStatuses = subscriptions.elementsEqual(after.subscriptions) { $0.status == $1.status && sameBytes($0.group, $1.group) }
        if !sameStatuses {
            var statuses: [String: (from: SubscriptionStatus.Status?, to: SubscriptionStatus.Status?)] = [:]
            for subscription in subscriptions { statuses[subscription.group, default: (nil, nil)].from = subscription.status }
            for subscription in after.subscriptions { statuses[subscription.group, default: (nil, nil)].to = subscription.status }
            for group in statuses.keys.sorted(by: utf8Order) where statuses[group]!.from != statuses[group]!.to {
                differences.append(.subscriptionStatus(group: group, from: statuses[group]!.from, to: statuses[group]!.to))
            }
        }
        let balances = before?.balances ?? [:]
        if balances != after.balances {
            for item in Set(balances.keys).union(after.balances.keys).sorted(by: utf8Order) {
                let delta = (after.balances[item] ?? 0) &- (balances[item] ?? 0)
                if delta != 0 { differences.append(.balance(item: item, delta: delta)) }
            }
        }
        let terminal = (before?.unfinished ?? []).lazy.filter { $0.state.isTerminal }.map(\.payment)
        let stillTerminal = after.unfinished.lazy.filter { $0.state.isTerminal }.map(\.payment)
        if terminal.elementsEqual(stillTerminal, by: sameBytes) { return differences }
        let wasUnfinished = Set((before?.unfinished ?? []).filter { $0.state.isTerminal }.map { UTF8Key($0.payment) })
        let isUnfinished = Set(after.unfinished.filter { $0.state.isTerminal }.map { UTF8Key($0.payment) })
        let stillOpen = Set(after.unfinished.map { UTF8Key($0.payment) })
        for payment in isUnfinished.subtracting(wasUnfinished).sorted() {
            differences.append(.transactionUnfinished(payment: payment.string))
        }
        for payment in wasUnfinished.subtracting(stillOpen).sorted() {
            differences.append(.transactionFinished(payment: payment.string))
        }
        return differences
    }

    /// Why `product` was taken away, when a revocation took it: the cause was a `revoked`
    /// event, or the transaction that granted it before now stands revoked (an older refund of
    /// the same product is no reason). Nil: it expired.
    private static func revocation(
        of product: String, before: AccountProjection?, after: AccountProjection, cause: LedgerChange.Cause
    ) -> Revocation? {
        if case .event(_, .revoked) = cause { return .revokedEvent }
        if case .event(_, .transferred) = cause { return .transferred }
        guard let before else { return nil }
        var granting = Set(before.subscriptions.filter { $0.status.grantsAccess && sameBytes($0.product, product) }.map { UTF8Key($0.transaction) })
        for purchase in before.storeTransactions where !purchase.isRevoked && sameBytes(purchase.report.product, product) {
            granting.insert(UTF8Key(purchase.report.transaction))
        }
        for purchase in after.storeTransactions where purchase.isRevoked && granting.contains(UTF8Key(purchase.report.transaction)) {
            return purchase.report.revocationType == .familyRevoke ? .familyRevoke : .refund
        }
        return nil
    }
}

extension LedgerChange {
    /// `{"id", "cursor", "account", "position", "cause", "asOf", "differences", "projection"}`
    /// (docs/FEEDS.md): one line, the same bytes on every delivery.
    public var json: String {
        var writer = JSONWriter(spaced: false)
        write(to: &writer)
        return writer.string
    }

    /// Appends `json` and a newline to `bytes`, without a `String` between: a feed printed
    /// whole writes a line a change.
    package func appendJSONLine(to bytes: inout [UInt8]) {
        // Into the caller's buffer: not a buffer of its own per change, then copied.
        var writer = JSONWriter(spaced: false, appendingTo: bytes)
        bytes = []
        write(to: &writer)
        writer.newline()
        bytes = writer.takeBytes()
    }

    func write(to writer: inout JSONWriter) {
        writer.beginObject()
        // The id is the cursor's text, written in place for both.
        writer.member("id") { cursor.appendText(to: &$0) }
        writer.member("cursor") { cursor.appendText(to: &$0) }
        writer.member("account", account)
        writer.member("position", Int64(position))
        writer.key("cause")
        writer.beginObject()
        switch cause {
        case .event(let id, let type):
            writer.member("kind", "event")
            writer.member("event", id)
            writer.member("type", type.rawValue)
        case .time(let instant):
            writer.member("kind", "time")
            writer.member("instant", instant)
        }
        writer.endObject()
        writer.member("asOf", asOf)
        writer.key("differences")
        writer.beginArray()
        for difference in differences { difference.write(to: &writer) }
        writer.endArray()
        writer.key("projection")
        projection.write(to: &writer, position: position)
        writer.endObject()
    }
}

extension ChangeDifference {
    func write(to writer: inout JSONWriter) {
        writer.beginObject()
        switch self {
        case .entitlementGranted(let product):
            writer.member("kind", "entitlementGranted")
            writer.member("product", product)
        case .entitlementRevoked(let product, let reason):
            writer.member("kind", "entitlementRevoked")
            writer.member("product", product)
            writer.member("reason", reason.rawValue)
        case .entitlementExpired(let product):
            writer.member("kind", "entitlementExpired")
            writer.member("product", product)
        case .namedEntitlement(let name, let from, let to):
            writer.member("kind", "namedEntitlement")
            writer.member("entitlement", name)
            writer.member("from", ifPresent: from)
            writer.member("to", ifPresent: to)
        case .subscriptionStatus(let group, let from, let to):
            writer.member("kind", "subscriptionStatus")
            writer.member("group", group)
            writer.member("from", ifPresent: from.map { Int64($0.rawValue) })
            writer.member("to", ifPresent: to.map { Int64($0.rawValue) })
        case .balance(let item, let delta):
            writer.member("kind", "balance")
            writer.member("item", item)
            writer.member("delta", delta)
        case .transactionUnfinished(let payment):
            writer.member("kind", "transactionUnfinished")
            writer.member("payment", payment)
        case .transactionFinished(let payment):
            writer.member("kind", "transactionFinished")
            writer.member("payment", payment)
        }
        writer.endObject()
    }
}
