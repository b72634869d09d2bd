import Foundation
import PurchaseLedger

extension ServerConfiguration {
    /// `webhooks[]`: where the change feed is POSTed (docs/FEEDS.md).
    ///
    /// ```json
    /// {"name": "game-backend", "url": "https://game.example/hooks/purchases",
    ///  "secret": "whsec_<base64 of 24–64 random bytes>", "environments": ["Production"], "maxAttempts": 20}
    /// ```
    public struct Webhook: Codable, Sendable, CustomStringConvertible {
        /// Names the endpoint in logs, metrics and the stored progress: 1–64 of `A-Z a-z 0-9 . _ -`.
        public var name: String
        public var url: String
        /// `whsec_` and the base64 of 24 to 64 bytes (Standard Webhooks). Never logged.
        public var secret: String
        /// Only these environments' store reports count for this endpoint (default: all).
        public var environments: [String]?
        /// Attempts of one change before it is parked (1–1000, default 20).
        public var maxAttempts: Int?

        public init(name: String, url: String, secret: String, environments: [String]? = nil, maxAttempts: Int? = nil) {
            self.name = name
            self.url = url
            self.secret = secret
            self.environments = environments
            self.maxAttempts = maxAttempts
        }

        public static let defaultMaxAttempts = 20

        public var description: String { "webhook \(name) → \(url)" }

        /// The secret's key bytes; nil when it is not `whsec_` and base64 of 24–64 bytes.
        var key: [UInt8]? {
            guard secret.hasPrefix("whsec_"), let bytes = Data(base64Encoded: String(secret.dropFirst(6))),
                  (24...64).contains(bytes.count) else { return nil }
            return Array(bytes)
        }

        /// Checks what decoding cannot; errors name the endpoint, never its secret.
        func check() throws {
            let allowed = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
            guard (1...64).contains(name.count), name.allSatisfy(allowed.contains) else {
                throw ServerConfigurationError("webhook names are 1 to 64 of A-Z a-z 0-9 . _ - (got \"\(name.prefix(64))\")")
            }
            guard let target = URL(string: url), let scheme = target.scheme?.lowercased(), let host = target.host, !host.isEmpty,
                  target.user == nil, target.password == nil else {
                throw ServerConfigurationError("webhook \"\(name)\": \"url\" must be an absolute http(s) URL without credentials")
            }
            let loopback = ["127.0.0.1", "::1", "[::1]", "localhost"].contains(host.lowercased())
            guard scheme == "https" || (scheme == "http" && loopback) else {
                throw ServerConfigurationError("webhook \"\(name)\": \"url\" must be https (http only on loopback)")
            }
            guard key != nil else {
                throw ServerConfigurationError("webhook \"\(name)\": \"secret\" must be whsec_ and the base64 of 24 to 64 random bytes")
            }
            guard (1...1000).contains(maxAttempts ?? Self.defaultMaxAttempts) else {
                throw ServerConfigurationError("webhook \"\(name)\": \"maxAttempts\" must be from 1 to 1000")
            }
            do {
                _ = try StoreEnvironment.excluded(keeping: environments ?? [])
            } catch {
                throw ServerConfigurationError("webhook \"\(name)\": \"environments\": \(error.description)")
            }
        }

        /// The environments whose store reports this endpoint's feed leaves out.
        var excluded: Set<StoreEnvironment> {
            (try? StoreEnvironment.excluded(keeping: environments ?? [])) ?? []
        }
    }
}
