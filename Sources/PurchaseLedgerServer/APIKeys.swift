import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore

/// The configured API keys. A presented key is compared with every configured key by their
/// SHA-256 digests, in constant time, and all keys are always compared: timing tells nothing
/// about which key, or how much of one, matched.
public struct APIKeys: Sendable {
    public struct Identity: Sendable, Hashable {
        public var name: String
        public var scopes: Set<Scope>
    }

    private let keys: [(digest: [UInt8], identity: Identity)]

    public init(_ keys: [ServerConfiguration.Key]) {
        self.keys = keys.map { (Array(SHA256.hash(data: Array($0.key.utf8))), Identity(name: $0.name, scopes: Set($0.scopes))) }
    }

    /// The identity of `presented`, or nil for an unknown key.
    public func identify(_ presented: String) -> Identity? {
        let digest = Array(SHA256.hash(data: Array(presented.utf8)))
        var found: Identity?
        for (candidate, identity) in keys {
            var difference: UInt8 = 0
            for index in 0..<digest.count { difference |= digest[index] ^ candidate[index] }
            if difference == 0 { found = identity }
        }
        return found
    }

    /// The key of a request: `Authorization: Bearer <key>`, else `X-API-Key: <key>` (an
    /// `Authorization` of another scheme, a proxy's say, does not hide it).
    static func presented(in request: Request) -> String? {
        if let authorization = request.headers[.authorization] {
            let parts = authorization.split(separator: " ", maxSplits: 1)
            if parts.count == 2, parts[0].lowercased() == "bearer" { return String(parts[1]) }
        }
        return request.headers[HTTPField.Name("X-API-Key")!]
    }
}

/// A request context that carries the identity of the API key that authenticated it.
public protocol LedgerRequestContextProtocol: RequestContext {
    var identity: APIKeys.Identity? { get set }
    /// The request presented a key that is not configured (routes that need a key answer 401;
    /// the open ones ignore it).
    var presentedUnknownKey: Bool { get set }
    /// Whether the client is gone (its connection closed): an expensive read then stops.
    var clientLeft: @Sendable () -> Bool { get }
}

extension LedgerRequestContextProtocol {
    /// A context that cannot tell: the read runs to its end.
    public var clientLeft: @Sendable () -> Bool { { false } }

    /// The name of the request's API key, which bounded slots are counted by (`KeyedSlots`);
    /// empty without one.
    var keyName: String { identity?.name ?? "" }
}

/// The request context `ledger-server` uses; mount `LedgerRoutes` with your own context type
/// by conforming it to `LedgerRequestContextProtocol`.
public struct LedgerRequestContext: LedgerRequestContextProtocol {
    public var coreContext: CoreRequestContextStorage
    public var identity: APIKeys.Identity?
    public var presentedUnknownKey = false
    /// The request's connection: an expensive read stops once it is closed (the client left).
    let channel: (any Channel)?
    /// Whether the connection was active when the request came: one never active (a test's
    /// embedded channel) cannot tell whether its client left.
    let channelCanTell: Bool

    public init(source: Source) {
        coreContext = .init(source: source)
        channel = source.channel
        channelCanTell = source.channel.isActive
    }

    public var clientLeft: @Sendable () -> Bool {
        // Asked after the client left, too: the connection was active once, and is not now.
        guard let channel, channelCanTell else { return { false } }
        return { !channel.isActive }
    }
}

/// Identifies the API key a request carries. Every request passes through; each route then
/// demands the scope it needs (401 without a valid key, 403 with a key that lacks the scope),
/// and the open routes (health, Apple's notifications) ignore keys, valid or not.
public struct APIKeyMiddleware<Context: LedgerRequestContextProtocol>: RouterMiddleware {
    let keys: APIKeys

    public init(keys: APIKeys) {
        self.keys = keys
    }

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        if let presented = APIKeys.presented(in: request) {
            if let identity = keys.identify(presented) {
                context.identity = identity
                context.logger[metadataKey: "api_key"] = .string(identity.name)
            } else {
                context.presentedUnknownKey = true
            }
        }
        return try await next(request, context)
    }
}

extension LedgerRequestContextProtocol {
    /// Throws 401 without an API key, 403 when the key lacks `scope`.
    func require(_ scope: Scope) throws {
        guard let identity else {
            throw LedgerHTTPError.unauthorized(presentedUnknownKey
                ? "the API key is not valid"
                : "this route needs an API key (Authorization: Bearer <key>)")
        }
        guard identity.scopes.contains(scope) else {
            throw LedgerHTTPError.forbidden("the API key \"\(identity.name)\" lacks the scope \(scope.rawValue)")
        }
    }
}
