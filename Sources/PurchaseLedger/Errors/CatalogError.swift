/// A catalog could not be read, or does not fit the ledger it was given to.
public struct CatalogError: Error, Sendable, Hashable, CustomStringConvertible {
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Base: String { case invalid, missing, conflict }
        private let base: Base
        private init(_ base: Base) { self.base = base }
        public var description: String { base.rawValue }

        /// The catalog file is not a valid catalog (JSON or StoreKit configuration).
        public static let invalid = Code(.invalid)
        /// A new ledger needs a catalog.
        public static let missing = Code(.missing)
        /// The catalog changes or removes a product the ledger already has. Past outcomes
        /// depend on a product's type and grants, so a catalog may only add products.
        public static let conflict = Code(.conflict)
    }

    public var code: Code
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code): \(message)" }
}
