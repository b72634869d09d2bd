/// A named entitlement of the catalog ("pro"), as an account has it at the as-of time: active or
/// not, and when active, through which product and transaction, until when, and whether it
/// renews (docs/FORMAT.md, "Named entitlements").
public struct NamedEntitlementStatus: Sendable, Hashable {
    /// The catalog's entitlement id.
    public var name: String
    /// The product that grants it: of every grant of its products at the as-of time (a product
    /// may be granted more than once), the one that ends last (one that never ends first), the
    /// catalog's first listed product on a tie. Nil when none is granted: the entitlement is not
    /// active.
    public var product: String?
    /// The store transaction that grants it (an entry's, for the device's queue), when known.
    public var transaction: String?
    /// When the grant ends, if it does: the subscription's or entry's `expiresAt`, or the grace
    /// period's end while in one.
    public var expiresAt: Timestamp?
    /// For an auto-renewable subscription: Apple's status then (active or in its grace period).
    public var status: SubscriptionStatus.Status?
    /// For an auto-renewable subscription: whether the renewal info in force says it renews.
    public var willRenew: Bool?

    public var isActive: Bool { product != nil }
}

extension AccountView {
    /// Each of `definitions` at `time`, in their order: of every grant of its products at
    /// `time` (`allGrants(at:)`, not one per product), the one that ends last.
    func namedEntitlements(_ definitions: [Catalog.Entitlement], at time: Timestamp) -> [NamedEntitlementStatus] {
        guard !definitions.isEmpty else { return [] }
        var grants: [UTF8Key: [Grant]] = [:]
        for (product, grant) in allGrants(at: time) { grants[product, default: []].append(grant) }
        return definitions.map { definition in
            var best: (product: String, grant: Grant, end: Timestamp?)?
            for product in definition.products {
                for grant in grants[UTF8Key(product)] ?? [] {
                    let end = Self.end(of: grant)
                    if let current = best {
                        // Strictly longer, or as long and of the same product and answering for it
                        // first: the catalog's first listed keeps a tie.
                        let longer = Self.lastsLonger(end, than: current.end)
                        let preferred = end == current.end && sameBytes(product, current.product) && grant.precedes(current.grant)
                        if !longer, !preferred { continue }
                    }
                    best = (product, grant, end)
                }
            }
            guard let (product, grant, end) = best else { return NamedEntitlementStatus(name: definition.id) }
            let renews = grant.record.flatMap { $0.productType == .autoRenewable ? renewal(of: $0)?.willRenew : nil }
            return NamedEntitlementStatus(
                name: definition.id, product: product, transaction: grant.transaction, expiresAt: end, status: grant.status,
                willRenew: renews)
        }
    }

    /// When a grant ends: its grace period's end while in one, else its report's or entry's expiry.
    private static func end(of grant: Grant) -> Timestamp? {
        if grant.status == .gracePeriod { return grant.gracePeriodEndsAt }
        if let record = grant.record { return record.fact.expiresAt }
        return grant.entryExpiresAt
    }

    /// Whether an end is later than another; none (it never ends) is the latest.
    private static func lastsLonger(_ end: Timestamp?, than other: Timestamp?) -> Bool {
        guard let other else { return false }
        guard let end else { return true }
        return end > other
    }
}

extension NamedEntitlementStatus {
    init(name: String) {
        self.name = name
    }
}
