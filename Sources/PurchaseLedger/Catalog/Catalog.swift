/// The products a store sells, and what a consumable grants.
///
/// The catalog in force is stored in the ledger, so that a replay needs no outside input. A
/// ledger's catalog may grow (new products) but never change or drop a product it has: past
/// outcomes depend on each product's type and grants.
public struct Catalog: Sendable, Hashable {
    public enum ProductType: String, Sendable, Hashable, CaseIterable {
        case consumable, nonConsumable, autoRenewable, nonRenewing

        /// Non-consumables and subscriptions show up in entitlements; consumables in balances.
        public var grantsEntitlement: Bool { self != .consumable }
        /// `restored` is legal only for these (StoreKit never restores consumables or
        /// non-renewing subscriptions).
        public var isRestorable: Bool { self == .nonConsumable || self == .autoRenewable }
        /// `quantity` must be 1 for these.
        public var requiresSingleQuantity: Bool { self == .nonConsumable || self == .autoRenewable }
    }

    public struct Product: Sendable, Hashable {
        public var id: String
        public var type: ProductType
        /// What one unit credits, per balance item. For a consumable without `grants` in its
        /// source, `[id: 1]`; empty for other types.
        public var grants: [String: Int64]
        /// The subscription group, if any (informational).
        public var group: String?
        /// An auto-renewable subscription's period, for the books' MRR; it changes no rule, so a
        /// later catalog may set or change it.
        public var period: SubscriptionPeriod?

        /// Equal, comparing every string byte for byte.
        func isSame(as other: Product) -> Bool {
            sameBytes(id, other.id) && type == other.type && sameBytes(group, other.group)
                && grants.count == other.grants.count
                && grants.allSatisfy { item, amount in other.grants.contains { sameBytes($0.key, item) && $0.value == amount } }
        }

        public init(id: String, type: ProductType, grants: [String: Int64]? = nil, group: String? = nil, period: SubscriptionPeriod? = nil) {
            self.id = id
            self.type = type
            self.grants = grants ?? (type == .consumable ? [id: 1] : [:])
            self.group = group
            self.period = period
        }
    }

    /// A name a server asks about ("does this customer have *pro*?") rather than a product id,
    /// granted by any of its products (a monthly and a yearly subscription, a lifetime purchase).
    public struct Entitlement: Sendable, Hashable {
        public var id: String
        /// The products that grant it, in the catalog's order of preference: of two granting at
        /// once, the one that lasts longer answers, and the one listed first on a tie.
        public var products: [String]

        public init(id: String, products: [String]) {
            self.id = id
            self.products = products
        }
    }

    /// The products, in the order of their source.
    public private(set) var products: [Product]
    /// The named entitlements, in the order of their source.
    public private(set) var entitlements: [Entitlement] = []
    /// The settings of the books (`Accounting`).
    public private(set) var accounting = Accounting()
    private var byID: [UTF8Key: Int]
    /// Product ids and grant items as Swift compares strings (canonical equivalence), to refuse
    /// names that differ in bytes but not to the eye.
    private var canonicalNames: [String: String]

    /// Product ids are 1–256 bytes and unique; grants belong to consumables only, with item names
    /// of 1–256 bytes and amounts from 1 to 1,000,000,000.
    /// Entitlement ids are 1–256 bytes and unique; each names 1–100 distinct products of the
    /// catalog that grant entitlements (not consumables).
    /// Only auto-renewable products have a `period`.
    public init(products: [Product], entitlements: [Entitlement] = [], accounting: Accounting = Accounting()) throws(CatalogError) {
        self.products = []
        byID = [:]
        canonicalNames = [:]
        for product in products {
            try add(product)
        }
        var names: Set<UTF8Key> = []
        for entitlement in entitlements {
            guard (1...256).contains(entitlement.id.utf8.count) else {
                throw CatalogError(.invalid, "entitlement id \"\(entitlement.id)\" must be 1 to 256 bytes")
            }
            guard names.insert(UTF8Key(entitlement.id)).inserted else {
                throw CatalogError(.invalid, "entitlement \"\(entitlement.id)\" is listed twice")
            }
            guard (1...100).contains(entitlement.products.count) else {
                throw CatalogError(.invalid, "entitlement \"\(entitlement.id)\" must name 1 to 100 products")
            }
            var named: Set<UTF8Key> = []
            for id in entitlement.products {
                guard let product = self[id] else {
                    throw CatalogError(.invalid, "entitlement \"\(entitlement.id)\" names \"\(id)\", which is not a product of the catalog")
                }
                guard product.type.grantsEntitlement else {
                    throw CatalogError(.invalid, "entitlement \"\(entitlement.id)\" names \"\(id)\", a consumable: consumables go to balances")
                }
                guard named.insert(UTF8Key(id)).inserted else {
                    throw CatalogError(.invalid, "entitlement \"\(entitlement.id)\" names \"\(id)\" twice")
                }
            }
        }
        self.entitlements = entitlements
        // The books divide by 1 + a tax rate: no rate from a caller may make that zero.
        try accounting.check()
        self.accounting = accounting
    }

    /// The product with exactly this id (compared byte for byte).
    public subscript(productID: String) -> Product? {
        byID[UTF8Key(productID)].map { products[$0] }
    }

    private mutating func add(_ product: Product) throws(CatalogError) {
        guard (1...256).contains(product.id.utf8.count) else {
            throw CatalogError(.invalid, "product id \"\(product.id)\" must be 1 to 256 bytes")
        }
        guard byID[UTF8Key(product.id)] == nil else {
            throw CatalogError(.invalid, "product \"\(product.id)\" is listed twice")
        }
        try checkDistinct(product.id, "product id")
        if product.type != .consumable, !product.grants.isEmpty {
            throw CatalogError(.invalid, "product \"\(product.id)\" is \(product.type.rawValue): only consumables have grants")
        }
        if product.period != nil, product.type != .autoRenewable {
            throw CatalogError(.invalid, "product \"\(product.id)\" is \(product.type.rawValue): only auto-renewable products have a period")
        }
        if product.type == .consumable, product.grants.isEmpty {
            throw CatalogError(.invalid, "product \"\(product.id)\": grants must name at least one item (or be left out)")
        }
        for (item, amount) in product.grants {
            try checkDistinct(item, "grant item")
            guard (1...256).contains(item.utf8.count) else {
                throw CatalogError(.invalid, "product \"\(product.id)\": grant item names must be 1 to 256 bytes")
            }
            guard (1...1_000_000_000).contains(amount) else {
                throw CatalogError(.invalid, "product \"\(product.id)\": grant of \"\(item)\" must be from 1 to 1000000000 (got \(amount))")
            }
        }
        byID[UTF8Key(product.id)] = products.count
        products.append(product)
    }

    /// Refuses a name that equals another one as a Swift string but not in bytes ("é" written
    /// precomposed and decomposed): projections key balances by item, and people read ids.
    private mutating func checkDistinct(_ name: String, _ kind: String) throws(CatalogError) {
        if let existing = canonicalNames[name], !sameBytes(existing, name) {
            throw CatalogError(.invalid, "\(kind) \"\(name)\" differs from \"\(existing)\" only in its Unicode encoding")
        }
        canonicalNames[name] = name
    }

    /// Two catalogs are equal when they hold the same products and entitlements, whatever their
    /// order (an entitlement's products are compared in order: it is a preference).
    public static func == (lhs: Catalog, rhs: Catalog) -> Bool {
        lhs.products.count == rhs.products.count && lhs.products.allSatisfy { rhs[$0.id]?.isSame(as: $0) == true }
            && lhs.entitlements.count == rhs.entitlements.count
            && lhs.entitlements.allSatisfy { entitlement in rhs.entitlement(entitlement.id).map { $0.isSame(as: entitlement) } == true }
            && lhs.products.allSatisfy { rhs[$0.id]?.period == $0.period } && lhs.accounting == rhs.accounting
    }

    public func hash(into hasher: inout Hasher) {
        for product in products.sorted(by: { $0.id.utf8.lexicographicallyPrecedes($1.id.utf8) }) {
            hasher.combine(product)
        }
        hasher.combine(entitlements.count)
        hasher.combine(accounting)
    }

    /// The entitlement with exactly this id (compared byte for byte).
    public func entitlement(_ id: String) -> Entitlement? {
        entitlements.first { sameBytes($0.id, id) }
    }

    /// Checks that `newer` keeps every product of this catalog unchanged (it may add some).
    /// Products are compared byte for byte.
    func checkSuccessor(_ newer: Catalog) throws(CatalogError) {
        // An entitlement may gain products, never lose one: the answers it gave stay true.
        for entitlement in entitlements {
            guard let replacement = newer.entitlement(entitlement.id) else {
                throw CatalogError(.conflict, "the new catalog drops entitlement \"\(entitlement.id)\"; a catalog may only add entitlements")
            }
            for product in entitlement.products where !replacement.products.contains(where: { sameBytes($0, product) }) {
                throw CatalogError(.conflict, "the new catalog drops \"\(product)\" from entitlement \"\(entitlement.id)\"; an entitlement may only gain products")
            }
        }
        for product in products {
            guard let replacement = newer[product.id] else {
                throw CatalogError(.conflict, "the new catalog drops product \"\(product.id)\", which this ledger already has; a catalog may only add products")
            }
            guard replacement.isSame(as: product) else {
                throw CatalogError(.conflict, "the new catalog changes product \"\(product.id)\"; a catalog may only add products (give the changed product a new id)")
            }
        }
    }
}

extension Catalog.Entitlement {
    /// Equal, comparing every string byte for byte, products in order.
    func isSame(as other: Catalog.Entitlement) -> Bool {
        sameBytes(id, other.id) && products.elementsEqual(other.products, by: sameBytes)
    }
}
