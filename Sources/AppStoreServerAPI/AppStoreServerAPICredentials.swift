/// What a token for the App Store Server API is made of: an in-app purchase key from App Store
/// Connect (Users and Access › Integrations › In-App Purchase), its key id, the issuer id shown
/// on that page, and the app's bundle id. The key never appears in a description or a log.
public struct AppStoreServerAPICredentials: Sendable, CustomStringConvertible {
    /// The `.p8` file's contents (a PKCS#8 P-256 private key in PEM).
    public var privateKeyPEM: String
    public var keyID: String
    public var issuerID: String
    public var bundleID: String

    public init(privateKeyPEM: String, keyID: String, issuerID: String, bundleID: String) {
        self.privateKeyPEM = privateKeyPEM
        self.keyID = keyID
        self.issuerID = issuerID
        self.bundleID = bundleID
    }

    public var description: String {
        "AppStoreServerAPICredentials(keyID: \(keyID), issuerID: \(issuerID), bundleID: \(bundleID), key: redacted)"
    }
}

/// Apple's two servers, and a base URL of one's own (a fake App Store in tests).
public enum AppStoreServerAPIEnvironment: Sendable, Hashable {
    case production
    case sandbox
    case custom(baseURL: String)

    /// The domains Apple recommends since its server update of 2026-05-05 (the `itunes` ones
    /// it used before still answer).
    public var baseURL: String {
        switch self {
        case .production: "https://api.storekit.apple.com"
        case .sandbox: "https://api.storekit-sandbox.apple.com"
        case .custom(let baseURL): baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
        }
    }
}
