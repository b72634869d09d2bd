/// The catalog's JSON form (`{"products": [...]}`), as the interchange format defines it.
extension Catalog {
    /// Reads a catalog from the spec's JSON. Unknown fields are ignored.
    public init(json bytes: [UInt8]) throws(CatalogError) {
        let root: JSONValue
        do {
            root = try JSONParser.parse(bytes)
        } catch {
            throw CatalogError(.invalid, "the catalog is not valid JSON: \(error.described(in: bytes))")
        }
        guard case .object(let fields) = root, case .array(let entries)? = fields["products"] else {
            throw CatalogError(.invalid, "a catalog is an object with a \"products\" array")
        }
        var products: [Product] = []
        for (index, entry) in entries.enumerated() {
            guard case .object(let product) = entry else {
                throw CatalogError(.invalid, "products[\(index)] must be an object")
            }
            guard case .string(let id)? = product["id"] else {
                throw CatalogError(.invalid, "products[\(index)] needs a string \"id\"")
            }
            guard case .string(let typeName)? = product["type"], let type = ProductType(rawValue: typeName) else {
                let known = ProductType.allCases.map(\.rawValue).joined(separator: ", ")
                throw CatalogError(.invalid, "product \"\(id)\" needs a \"type\", one of \(known)")
            }
            var grants: [String: Int64]?
            switch product["grants"] {
            case nil, .null?:
                break
            case .object(let items)?:
                grants = [:]
                for (item, amount) in items {
                    guard case .number(let number) = amount, let value = number.integer else {
                        throw CatalogError(.invalid, "product \"\(id)\": the grant of \"\(item.string)\" must be an integer")
                    }
                    guard grants?[item.string] == nil else {
                        throw CatalogError(.invalid, "product \"\(id)\": grant items \"\(item.string)\" differ only in their Unicode encoding")
                    }
                    grants?[item.string] = value
                }
            case let other?:
                throw CatalogError(.invalid, "product \"\(id)\": \"grants\" must be an object, not \(other.typeName)")
            }
            var group: String?
            switch product["group"] {
            case nil, .null?: break
            case .string(let name)?: group = name
            case let other?: throw CatalogError(.invalid, "product \"\(id)\": \"group\" must be a string, not \(other.typeName)")
            }
            var period: SubscriptionPeriod?
            switch product["period"] {
            case nil, .null?: break
            case .string(let text)?:
                guard let known = SubscriptionPeriod(iso8601: text) else {
                    let periods = SubscriptionPeriod.allCases.map(\.rawValue).joined(separator: ", ")
                    throw CatalogError(.invalid, "product \"\(id)\": \"period\" must be one of \(periods), not \"\(text)\"")
                }
                period = known
            case let other?: throw CatalogError(.invalid, "product \"\(id)\": \"period\" must be a string, not \(other.typeName)")
            }
            products.append(Product(id: id, type: type, grants: grants, group: group, period: period))
        }
        try self.init(products: products, entitlements: try Self.entitlements(in: fields), accounting: try Accounting.read(from: fields))
    }

    /// The `"entitlements"` member of a catalog (or of a `.storekit` file's side file):
    /// `[{"id": "pro", "products": ["…monthly", "…yearly"]}]`; none when absent.
    static func entitlements(in fields: [UTF8Key: JSONValue]) throws(CatalogError) -> [Entitlement] {
        switch fields["entitlements"] {
        case nil, .null?:
            return []
        case .array(let entries)?:
            var entitlements: [Entitlement] = []
            for (index, entry) in entries.enumerated() {
                guard case .object(let object) = entry, case .string(let id)? = object["id"] else {
                    throw CatalogError(.invalid, "entitlements[\(index)] must be an object with a string \"id\"")
                }
                guard case .array(let names)? = object["products"] else {
                    throw CatalogError(.invalid, "entitlement \"\(id)\" needs a \"products\" array")
                }
                var products: [String] = []
                for name in names {
                    guard case .string(let product) = name else {
                        throw CatalogError(.invalid, "entitlement \"\(id)\": \"products\" must hold product ids")
                    }
                    products.append(product)
                }
                entitlements.append(Entitlement(id: id, products: products))
            }
            return entitlements
        case let other?:
            throw CatalogError(.invalid, "\"entitlements\" must be an array, not \(other.typeName)")
        }
    }

    /// The catalog as canonical JSON: products in order, grants sorted, consumables' grants
    /// always written out.
    public var json: String {
        var writer = JSONWriter(spaced: true)
        writer.beginObject()
        writer.key("products")
        writer.beginArray()
        for product in products {
            writer.beginObject()
            writer.member("id", product.id)
            writer.member("type", product.type.rawValue)
            if product.type == .consumable {
                writer.key("grants")
                writer.beginObject()
                for item in product.grants.keys.sorted(by: { $0.utf8.lexicographicallyPrecedes($1.utf8) }) {
                    writer.member(item, product.grants[item]!)
                }
                writer.endObject()
            }
            writer.member("group", ifPresent: product.group)
            writer.member("period", ifPresent: product.period?.rawValue)
            writer.endObject()
        }
        writer.endArray()
        if !entitlements.isEmpty {
            writer.key("entitlements")
            writer.beginArray()
            for entitlement in entitlements {
                writer.beginObject()
                writer.member("id", entitlement.id)
                writer.key("products")
                writer.beginArray()
                for product in entitlement.products { writer.string(product) }
                writer.endArray()
                writer.endObject()
            }
            writer.endArray()
        }
        accounting.write(to: &writer)
        writer.endObject()
        return writer.string
    }
}
