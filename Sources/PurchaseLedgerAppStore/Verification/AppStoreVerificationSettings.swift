import PurchaseLedger

/// What verifying Apple's signed data needs of a configuration's `appStore` section: the app,
/// its environment and the roots its chains end in, and where notifications without an account
/// wait. `ledger-server` reads it from its configuration file, and `ledger attribute` reads the
/// same section of the same file.
public struct AppStoreVerificationSettings: Decodable, Sendable, Hashable {
    public var bundleId: String
    /// Required in production, where payloads must carry it.
    public var appAppleId: Int64?
    /// The one environment taken (`"environment"`), or several (`"environments"`): one of the
    /// two is given (`acceptedEnvironments`).
    public var environment: AppStoreEnvironment?
    public var environments: [AppStoreEnvironment]?
    /// DER (or PEM) files of the roots chains must end in: Apple Root CA G3 in production.
    public var trustedRoots: [String]
    /// The audit file of notifications without an account (JSON Lines); by default beside a
    /// ledger that is a directory.
    public var unattributedNotifications: String?

    public init(
        bundleId: String, appAppleId: Int64?, environments: [AppStoreEnvironment], trustedRoots: [String], unattributedNotifications: String? = nil
    ) {
        self.bundleId = bundleId
        self.appAppleId = appAppleId
        self.environments = environments
        self.trustedRoots = trustedRoots
        self.unattributedNotifications = unattributedNotifications
    }
}

extension AppStoreVerificationSettings {
    /// The environments taken, in order: `environments`, else `environment`, else none (which
    /// the configuration's check refuses).
    public var acceptedEnvironments: [AppStoreEnvironment] {
        environments ?? environment.map { [$0] } ?? []
    }
}

/// The App Store environments, as notifications spell them: the domain's `StoreEnvironment`,
/// one type for the events and the configuration.
public typealias AppStoreEnvironment = StoreEnvironment

extension StoreEnvironment {
    /// Xcode and local testing data is not signed by the App Store (as Apple's library, the
    /// verification is skipped: never configure these on a server open to the world).
    public var isSigned: Bool { self == .production || self == .sandbox }
}

/// A setting of the App Store that cannot be used: a root certificate that cannot be read, a
/// file that must be named.
public struct AppStoreConfigurationError: Error, CustomStringConvertible, Sendable {
    public var description: String
    public init(_ description: String) { self.description = description }
}
