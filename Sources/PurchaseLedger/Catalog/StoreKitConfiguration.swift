/// Reading a catalog from an Xcode StoreKit configuration file (`.storekit`).
///
/// Mapping: `products` of type `Consumable` and `NonConsumable` become `consumable` and
/// `nonConsumable`; `nonRenewingSubscriptions` become `nonRenewing`; the subscriptions of each
/// of `subscriptionGroups` become `autoRenewable`, with the group's name as `group`. A
/// consumable grants one unit of its own product id (the file has no notion of grants).
extension Catalog {
    public init(storeKitConfiguration bytes: [UInt8]) throws(CatalogError) {
        let root: JSONValue
        do {
            root = try JSONParser.parse(bytes)
        } catch {
            throw CatalogError(.invalid, "the StoreKit configuration is not valid JSON: \(error.described(in: bytes))")
        }
        guard case .object(let file) = root else {
            throw CatalogError(.invalid, "a StoreKit configuration is a JSON object")
        }
        var products: [Product] = []

        func entries(_ value: JSONValue?, _ section: String) throws(CatalogError) -> [[UTF8Key: JSONValue]] {
            switch value {
            case nil, .null?: return []
            case .array(let items)?:
                var objects: [[UTF8Key: JSONValue]] = []
                for item in items {
                    guard case .object(let object) = item else {
                        throw CatalogError(.invalid, "\(section) must hold objects")
                    }
                    objects.append(object)
                }
                return objects
            case let other?:
                throw CatalogError(.invalid, "\(section) must be an array, not \(other.typeName)")
            }
        }

        func productID(_ object: [UTF8Key: JSONValue], _ section: String) throws(CatalogError) -> String {
            guard case .string(let id)? = object["productID"] else {
                throw CatalogError(.invalid, "an entry of \(section) has no \"productID\"")
            }
            return id
        }

        for object in try entries(file["products"], "products") {
            let id = try productID(object, "products")
            switch object["type"] {
            case .string("Consumable")?: products.append(Product(id: id, type: .consumable))
            case .string("NonConsumable")?: products.append(Product(id: id, type: .nonConsumable))
            default: throw CatalogError(.invalid, "product \"\(id)\": unknown StoreKit product type")
            }
        }
        for object in try entries(file["nonRenewingSubscriptions"], "nonRenewingSubscriptions") {
            products.append(Product(id: try productID(object, "nonRenewingSubscriptions"), type: .nonRenewing))
        }
        for group in try entries(file["subscriptionGroups"], "subscriptionGroups") {
            var groupName: String?
            if case .string(let name)? = group["name"] { groupName = name }
            for object in try entries(group["subscriptions"], "subscriptionGroups.subscriptions") {
                let id = try productID(object, "subscriptions")
                // Xcode writes the periods it offers; another (none the books know) is left out.
                var period: SubscriptionPeriod?
                if case .string(let text)? = object["recurringSubscriptionPeriod"] { period = SubscriptionPeriod(iso8601: text) }
                products.append(Product(id: id, type: .autoRenewable, group: groupName, period: period))
            }
        }
        try self.init(products: products)
    }

    /// The catalog of a StoreKit configuration, with the entitlements and the books' settings
    /// of a side file (the interchange catalog's `{"entitlements": […], "smallBusinessProgram":
    /// […], "taxRates": {…}}`): Xcode's file has no place for them.
    public init(storeKitConfiguration bytes: [UInt8], entitlements sideFile: [UInt8]) throws(CatalogError) {
        let products = try Catalog(storeKitConfiguration: bytes).products
        let root: JSONValue
        do {
            root = try JSONParser.parse(sideFile)
        } catch {
            throw CatalogError(.invalid, "the entitlements file is not valid JSON: \(error.described(in: sideFile))")
        }
        guard case .object(let fields) = root else { throw CatalogError(.invalid, "an entitlements file is a JSON object") }
        try self.init(products: products, entitlements: try Self.entitlements(in: fields), accounting: try Accounting.read(from: fields))
    }

    /// Reads a catalog file: a StoreKit configuration when the name ends in `.storekit` (with
    /// the entitlements of `NAME.entitlements.json` beside it, when there is one), the
    /// interchange JSON otherwise. An error names the file (and, for malformed JSON, the line
    /// and column), since a person will open it to mend it.
    public init(contentsOfFile path: String) throws {
        let bytes = try FileBytes.contents(of: path)
        do throws(CatalogError) {
            if path.hasSuffix(".storekit") {
                let sidePath = String(path.dropLast(".storekit".count)) + ".entitlements.json"
                if let side = try? FileBytes.contents(of: sidePath) {
                    do throws(CatalogError) {
                        try self.init(storeKitConfiguration: bytes, entitlements: side)
                    } catch {
                        throw CatalogError(error.code, "\(sidePath): \(error.message)")
                    }
                    return
                }
                try self.init(storeKitConfiguration: bytes)
            } else {
                try self.init(json: bytes)
            }
        } catch {
            throw CatalogError(error.code, "\(path): \(error.message)")
        }
    }
}
