import AppStoreServerAPI
import Foundation
import NIOCore
import PurchaseLedger
import PurchaseLedgerAppStore
import PurchaseLedgerLocation

/// What `ledger-server` reads from its configuration file (JSON).
///
/// ```json
/// {
///   "ledger": "/var/lib/store/ledger",
///   "catalog": "/etc/store/Products.storekit",
///   "bind": {"host": "127.0.0.1", "port": 8080},
///   "keys": [
///     {"name": "app-backend", "key": "…at least 32 characters…", "scopes": ["events:write", "accounts:read"]},
///     {"name": "prometheus", "key": "…", "scopes": ["metrics:read"]}
///   ],
///   "limits": {"bodyBytes": 1048576, "eventsPerRequest": 1000, "maxConnections": 512,
///              "idleTimeoutSeconds": 30, "requestTimeoutSeconds": 15},
///   "snapshotEvery": 100000,
///   "appStore": {
///     "bundleId": "com.example.wordgame", "appAppleId": 1234567890, "environment": "Production",
///     "trustedRoots": ["/etc/store/AppleRootCA-G3.cer"],
///     "unattributedNotifications": "/var/lib/store/unattributed-notifications.jsonl",
///     "api": {"keyFile": "/etc/store/SubscriptionKey_ABC123.p8", "keyId": "ABC123",
///             "issuerId": "57246542-96fe-1a63-e053-0824d011072a"},
///     "reconcile": {"everySeconds": 3600},
///     "consumption": {"sampleContentProvided": false, "refundPreference": "DECLINE"}
///   },
///   "webhooks": [{"name": "game-backend", "url": "https://game.example/hooks/purchases",
///                 "secret": "whsec_…", "environments": ["Production"], "maxAttempts": 20}],
///   "checkpoints": {"keyFile": "/etc/store/checkpoint.key", "everySeconds": 60}
/// }
/// ```
public struct ServerConfiguration: Codable, Sendable {
    public struct Bind: Codable, Sendable {
        public var host: String
        public var port: Int

        public init(host: String = "127.0.0.1", port: Int = 8080) {
            self.host = host
            self.port = port
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            let defaults = Bind()
            host = try container.decodeIfPresent(String.self, forKey: .host) ?? defaults.host
            port = try container.decodeIfPresent(Int.self, forKey: .port) ?? defaults.port
        }
    }

    public struct Key: Codable, Sendable {
        /// Names the key in logs (never the key itself).
        public var name: String
        public var key: String
        public var scopes: [Scope]

        public init(name: String, key: String, scopes: [Scope]) {
            self.name = name
            self.key = key
            self.scopes = scopes
        }
    }

    public struct Limits: Codable, Sendable {
        /// Largest request body; larger ones are answered 413.
        public var bodyBytes: Int
        /// Most events in one request; more are answered 413.
        public var eventsPerRequest: Int
        /// Most connections open at once; further clients wait in the listen backlog until one
        /// closes (each open connection may hold a body buffer of up to `bodyBytes`).
        public var maxConnections: Int
        /// A connection that sends no part of a request for this long (and awaits no answer) is
        /// closed.
        public var idleTimeoutSeconds: Double
        /// A request not read whole (head to end) this long after its head arrived closes its
        /// connection: a client cannot hold a connection by trickling or stalling a request.
        public var requestTimeoutSeconds: Double
        /// Most expensive reads at once (a feed reader behind what the server keeps in memory, an
        /// account's timeline), each on the idle class's threads; another is answered 503 `busy`
        /// (a stream waits for its turn).
        public var expensiveReads: Int
        /// Most of the log's events one request of a feed reader behind what the server keeps
        /// derives: past it, the page holds what was found, and its `next` where the derivation
        /// got to (the next request goes on from there).
        public var feedCatchUpEvents: Int
        /// Most reads that hold their connection while they wait for changes (streams of the
        /// feed, long polls) at once; another is answered 503 `busy`. Below `maxConnections`, so
        /// that readers that never read cannot take every connection; nil: a quarter of them.
        public var heldReads: Int?
        /// Most such reads of one API key at once.
        public var heldReadsPerKey: Int

        /// `heldReads`, or its default.
        public var heldReadsLimit: Int { heldReads ?? max(1, maxConnections / 4) }

        public init(
            bodyBytes: Int = 1 << 20, eventsPerRequest: Int = 1000,
            maxConnections: Int = 512, idleTimeoutSeconds: Double = 30, requestTimeoutSeconds: Double = 15,
            expensiveReads: Int = 2, feedCatchUpEvents: Int = 100_000, heldReads: Int? = nil, heldReadsPerKey: Int = 32
        ) {
            self.bodyBytes = bodyBytes
            self.eventsPerRequest = eventsPerRequest
            self.maxConnections = maxConnections
            self.idleTimeoutSeconds = idleTimeoutSeconds
            self.requestTimeoutSeconds = requestTimeoutSeconds
            self.expensiveReads = expensiveReads
            self.feedCatchUpEvents = feedCatchUpEvents
            self.heldReads = heldReads
            self.heldReadsPerKey = heldReadsPerKey
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            let defaults = Limits()
            bodyBytes = try container.decodeIfPresent(Int.self, forKey: .bodyBytes) ?? defaults.bodyBytes
            eventsPerRequest = try container.decodeIfPresent(Int.self, forKey: .eventsPerRequest) ?? defaults.eventsPerRequest
            maxConnections = try container.decodeIfPresent(Int.self, forKey: .maxConnections) ?? defaults.maxConnections
            idleTimeoutSeconds = try container.decodeIfPresent(Double.self, forKey: .idleTimeoutSeconds) ?? defaults.idleTimeoutSeconds
            requestTimeoutSeconds = try container.decodeIfPresent(Double.self, forKey: .requestTimeoutSeconds) ?? defaults.requestTimeoutSeconds
            expensiveReads = try container.decodeIfPresent(Int.self, forKey: .expensiveReads) ?? defaults.expensiveReads
            feedCatchUpEvents = try container.decodeIfPresent(Int.self, forKey: .feedCatchUpEvents) ?? defaults.feedCatchUpEvents
            heldReads = try container.decodeIfPresent(Int.self, forKey: .heldReads)
            heldReadsPerKey = try container.decodeIfPresent(Int.self, forKey: .heldReadsPerKey) ?? defaults.heldReadsPerKey
        }

        /// The longest `wait` of `GET /v1/changes`: under the idle timeout's default.
        public static let longestChangeWaitSeconds = 25
        /// How long `minPosition` waits for the projections to reach a position.
        public static let positionWaitSeconds = 5.0

        /// The longest timeout the configuration takes: a day.
        static let maximumTimeoutSeconds: Double = 86_400

        /// `seconds` (checked by `check()`) as NIO's time amount.
        static func timeAmount(_ seconds: Double) -> TimeAmount {
            .nanoseconds(Int64((min(max(seconds, 0), maximumTimeoutSeconds) * 1e9).rounded()))
        }
    }

    public struct AppStore: Codable, Sendable {
        public var bundleId: String
        /// Required in production, where notifications must carry it.
        public var appAppleId: Int64?
        /// The environment this server takes (`"environment"`), or the environments
        /// (`"environments"`, such as `["Production", "Sandbox"]`: App Review and TestFlight
        /// buy in the sandbox against the production app); exactly one of the two is given.
        public var environment: AppStoreEnvironment?
        public var environments: [AppStoreEnvironment]?
        /// DER (or PEM) files of the roots the notification chains must end in: Apple Root CA G3
        /// in production.
        public var trustedRoots: [String]
        /// Where notifications without an `appAccountToken` are recorded (JSON Lines).
        public var unattributedNotifications: String?
        /// The App Store Server API's key, for `reconcile` and `consumption`.
        public var api: API?
        /// Reconciliation with the App Store Server API on a schedule (docs/RECONCILE.md).
        public var reconcile: Reconcile?
        /// Answers to refund requests (`CONSUMPTION_REQUEST`, docs/SERVER.md).
        public var consumption: Consumption?
        /// Calls that close the loop with Apple (Set App Account Token, Finish Transaction);
        /// none without this section.
        public var calls: Calls?

        public init(
            bundleId: String, appAppleId: Int64?, environments: [AppStoreEnvironment], trustedRoots: [String],
            unattributedNotifications: String? = nil, api: API? = nil, reconcile: Reconcile? = nil, consumption: Consumption? = nil
        ) {
            self.bundleId = bundleId
            self.appAppleId = appAppleId
            self.environments = environments
            self.trustedRoots = trustedRoots
            self.unattributedNotifications = unattributedNotifications
            self.api = api
            self.reconcile = reconcile
            self.consumption = consumption
        }
    }

    /// `appStore.api`: the in-app purchase key (App Store Connect › Users and Access ›
    /// Integrations › In-App Purchase) the server calls the App Store Server API with.
    public struct API: Codable, Sendable {
        /// The `.p8` file.
        public var keyFile: String
        public var keyId: String
        public var issuerId: String
        /// Another base URL for the API (a test server); else the environment's.
        public var apiBase: String?

        public init(keyFile: String, keyId: String, issuerId: String, apiBase: String? = nil) {
            self.keyFile = keyFile
            self.keyId = keyId
            self.issuerId = issuerId
            self.apiBase = apiBase
        }
    }

    /// `appStore.reconcile`: how often to reconcile, and how far back.
    public struct Reconcile: Codable, Sendable {
        /// Seconds between runs; default 3600.
        public var everySeconds: Int?
        /// How far back each run reads Apple's notification history, in seconds; default three
        /// days (Apple's retries).
        public var lookBackSeconds: Int?

        public init(everySeconds: Int? = nil, lookBackSeconds: Int? = nil) {
            self.everySeconds = everySeconds
            self.lookBackSeconds = lookBackSeconds
        }
    }

    /// `appStore.calls`: which calls the server makes to close the loop with Apple.
    public struct Calls: Codable, Sendable {
        /// Set the account as the `appAccountToken` of what the ledger attributed late; default true.
        public var setAppAccountTokens: Bool?
        /// Finish Transaction for StoreKit 2 transactions the ledger shows delivered; default false.
        public var finishTransactions: Bool?
        /// Get App Transaction Info for each customer an account has, kept for it; default true.
        public var readAppTransactions: Bool?

        public init(setAppAccountTokens: Bool? = nil, finishTransactions: Bool? = nil, readAppTransactions: Bool? = nil) {
            self.setAppAccountTokens = setAppAccountTokens
            self.finishTransactions = finishTransactions
            self.readAppTransactions = readAppTransactions
        }
    }

    /// `appStore.consumption`: what every answer to a refund request says beyond the ledger's facts.
    public struct Consumption: Codable, Sendable {
        /// Whether a free sample, trial or description of the content was provided before
        /// purchase; default false.
        public var sampleContentProvided: Bool?
        /// `DECLINE`, `GRANT_FULL` or `GRANT_PRORATED`; absent: no preference stated.
        public var refundPreference: String?

        public init(sampleContentProvided: Bool? = nil, refundPreference: String? = nil) {
            self.sampleContentProvided = sampleContentProvided
            self.refundPreference = refundPreference
        }
    }

    /// The ledger: a directory (LMDB, one server), or a `postgres://USER@HOST[:PORT]/DATABASE`
    /// URL (any number of servers sharing it; the password from the URL or `PGPASSWORD`).
    public var ledger: String
    /// The catalog (interchange JSON or `.storekit`); needed to create the ledger.
    public var catalog: String?
    public var bind: Bind
    public var keys: [Key]
    public var limits: Limits
    /// Events between snapshots (0: only when the server stops). A snapshot pauses appends
    /// while it writes the accounts changed since the last one (about 2.5–7 µs each), and
    /// bounds how much log a restart replays.
    public var snapshotEvery: UInt64
    public var appStore: AppStore?
    /// Where the change feed is delivered (docs/FEEDS.md).
    public var webhooks: [Webhook]?
    /// The first retry of a webhook delivery, in seconds (default 2; later ones double, up to
    /// four hours, with jitter).
    public var webhookFirstRetrySeconds: Double?
    /// How long an endpoint may take to answer an attempt's head, and then its body, in
    /// seconds (default 10).
    public var webhookTimeoutSeconds: Double?
    /// How long the lease of a server delivering for an endpoint lasts unless renewed (every
    /// third of it), in seconds (default 30): how soon another server takes over from one that died.
    public var webhookLeaseSeconds: Int?
    /// What a restore does when another account owns the purchase: `keep`, `transfer` or
    /// `share` (docs/SERVER.md, "Restores across accounts"). Unset: StoreKit 2 transactions
    /// are kept, StoreKit 1 restores follow the interchange format's rules.
    public var restoresAcrossAccounts: RestorePolicy?
    /// The scheduling of the change feed's derivation and webhook delivery (default
    /// `background`: below the appends, docs/FEEDS.md).
    public var feedPriority: FeedPriority?
    /// Signing the log's checkpoints (docs/SERVER.md, "Checkpoints and proofs").
    public var checkpoints: Checkpoints?

    /// `"checkpoints": {"keyFile", "origin"?, "everySeconds"?}`: the server signs a checkpoint
    /// of the log's Merkle tree every `everySeconds` (1 to 86,400; default 60) when the log has
    /// grown since its last one, and once more on shutdown.
    public struct Checkpoints: Codable, Sendable {
        /// The signer key (`ledger checkpoint-key generate`).
        public var keyFile: String
        /// The checkpoints' origin line; the key's name when absent.
        public var origin: String?
        public var everySeconds: Int?

        public static let defaultEverySeconds = 60

        public init(keyFile: String, origin: String? = nil, everySeconds: Int? = nil) {
            (self.keyFile, self.origin, self.everySeconds) = (keyFile, origin, everySeconds)
        }

        /// The signer the key file holds, or why it cannot be read.
        public func signer() throws -> NoteSigner {
            let text: String
            do {
                text = try String(contentsOfFile: keyFile, encoding: .utf8)
            } catch {
                throw ServerConfigurationError("\"checkpoints.keyFile\": cannot read \(keyFile)")
            }
            do {
                return try NoteSigner(text: text.hasSuffix("\n") ? String(text.dropLast()) : text)
            } catch {
                throw ServerConfigurationError("\"checkpoints.keyFile\": \(keyFile) holds no signer key (ledger checkpoint-key generate writes one)")
            }
        }
    }

    /// Events between snapshots unless the file says otherwise.
    public static let defaultSnapshotEvery: UInt64 = 100_000

    public init(
        ledger: String, catalog: String? = nil, bind: Bind = .init(), keys: [Key], limits: Limits = .init(),
        snapshotEvery: UInt64 = defaultSnapshotEvery, appStore: AppStore? = nil, webhooks: [Webhook]? = nil,
        webhookFirstRetrySeconds: Double? = nil, webhookTimeoutSeconds: Double? = nil, webhookLeaseSeconds: Int? = nil,
        feedPriority: FeedPriority? = nil
    ) {
        self.feedPriority = feedPriority
        self.webhooks = webhooks
        self.webhookFirstRetrySeconds = webhookFirstRetrySeconds
        self.webhookTimeoutSeconds = webhookTimeoutSeconds
        self.webhookLeaseSeconds = webhookLeaseSeconds
        self.ledger = ledger
        self.catalog = catalog
        self.bind = bind
        self.keys = keys
        self.limits = limits
        self.snapshotEvery = snapshotEvery
        self.appStore = appStore
    }

    enum CodingKeys: String, CodingKey {
        case ledger, catalog, bind, keys, limits, snapshotEvery, appStore, webhooks, webhookFirstRetrySeconds, webhookTimeoutSeconds, webhookLeaseSeconds,
            feedPriority, restoresAcrossAccounts, checkpoints
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        ledger = try container.decode(String.self, forKey: .ledger)
        catalog = try container.decodeIfPresent(String.self, forKey: .catalog)
        bind = try container.decodeIfPresent(Bind.self, forKey: .bind) ?? .init()
        keys = try container.decodeIfPresent([Key].self, forKey: .keys) ?? []
        limits = try container.decodeIfPresent(Limits.self, forKey: .limits) ?? .init()
        snapshotEvery = try container.decodeIfPresent(UInt64.self, forKey: .snapshotEvery) ?? Self.defaultSnapshotEvery
        appStore = try container.decodeIfPresent(AppStore.self, forKey: .appStore)
        webhooks = try container.decodeIfPresent([Webhook].self, forKey: .webhooks)
        webhookFirstRetrySeconds = try container.decodeIfPresent(Double.self, forKey: .webhookFirstRetrySeconds)
        webhookTimeoutSeconds = try container.decodeIfPresent(Double.self, forKey: .webhookTimeoutSeconds)
        webhookLeaseSeconds = try container.decodeIfPresent(Int.self, forKey: .webhookLeaseSeconds)
        feedPriority = try container.decodeIfPresent(FeedPriority.self, forKey: .feedPriority)
        restoresAcrossAccounts = try container.decodeIfPresent(RestorePolicy.self, forKey: .restoresAcrossAccounts)
        checkpoints = try container.decodeIfPresent(Checkpoints.self, forKey: .checkpoints)
    }

    /// Reads and checks a configuration file; errors name the file and the field.
    public static func load(path: String) throws -> ServerConfiguration {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw ServerConfigurationError("cannot read \(path): \(error.localizedDescription)")
        }
        let configuration: ServerConfiguration
        do {
            configuration = try JSONDecoder().decode(ServerConfiguration.self, from: data)
        } catch let DecodingError.keyNotFound(key, context) {
            throw ServerConfigurationError("\(path): missing \"\(Self.dotted(context.codingPath + [key]))\"")
        } catch let DecodingError.typeMismatch(_, context), let DecodingError.valueNotFound(_, context) {
            throw ServerConfigurationError("\(path): \"\(Self.dotted(context.codingPath))\": \(context.debugDescription)")
        } catch let DecodingError.dataCorrupted(context) {
            let field = context.codingPath.isEmpty ? "" : "\"\(Self.dotted(context.codingPath))\": "
            throw ServerConfigurationError("\(path): \(field)\(context.debugDescription)")
        } catch {
            throw ServerConfigurationError("\(path): \(error)")
        }
        try configuration.check()
        return configuration
    }

    /// `keys.0.scopes.1`: where in the file a decoding error is.
    private static func dotted(_ path: [any CodingKey]) -> String {
        path.map { $0.intValue.map(String.init) ?? $0.stringValue }.joined(separator: ".")
    }

    /// Checks what JSON decoding cannot: key lengths and uniqueness, limits, ports.
    public func check() throws {
        guard !ledger.isEmpty else { throw ServerConfigurationError("\"ledger\" must name a directory or a postgres:// URL") }
        let location = LedgerLocation(ledger)
        do {
            try location.validate()
        } catch let error as StorageError {
            throw ServerConfigurationError("\"ledger\": \(error.message)")
        }
        if location.directory == nil {
            guard appStore == nil || appStore?.unattributedNotifications != nil else {
                throw ServerConfigurationError("\"appStore.unattributedNotifications\" must name a file when the ledger is in PostgreSQL")
            }
        }
        guard (0...65_535).contains(bind.port) else { throw ServerConfigurationError("\"bind.port\" must be from 0 to 65535") }
        guard limits.bodyBytes > 0, limits.eventsPerRequest > 0, limits.maxConnections > 0, (1...64).contains(limits.expensiveReads),
              (1_000...100_000_000).contains(limits.feedCatchUpEvents) else {
            throw ServerConfigurationError("\"limits\" must be positive (expensiveReads 1 to 64, feedCatchUpEvents 1,000 to 100,000,000)")
        }
        guard limits.heldReadsLimit >= 1, limits.heldReadsLimit < max(2, limits.maxConnections), limits.heldReadsPerKey >= 1 else {
            throw ServerConfigurationError("\"limits.heldReads\" must be from 1 to one less than maxConnections (1 with one connection), and heldReadsPerKey at least 1")
        }
        for (name, seconds) in [("idleTimeoutSeconds", limits.idleTimeoutSeconds), ("requestTimeoutSeconds", limits.requestTimeoutSeconds)] {
            guard seconds.isFinite, seconds >= 0.001, seconds <= Limits.maximumTimeoutSeconds else {
                throw ServerConfigurationError("\"limits.\(name)\" must be from 0.001 to \(Int(Limits.maximumTimeoutSeconds)) seconds")
            }
        }
        if appStore?.api == nil, appStore?.reconcile != nil || appStore?.consumption != nil || appStore?.calls != nil {
            throw ServerConfigurationError("\"appStore.reconcile\", \"appStore.consumption\" and \"appStore.calls\" call the App Store Server API: add \"appStore.api\" (keyFile, keyId, issuerId)")
        }
        if let preference = appStore?.consumption?.refundPreference {
            let known = ConsumptionInformation.RefundPreference.allCases.map(\.rawValue)
            guard known.contains(preference) else {
                throw ServerConfigurationError("\"appStore.consumption.refundPreference\" must be one of \(known.joined(separator: ", "))")
            }
        }
        if let reconcile = appStore?.reconcile {
            guard (60...604_800).contains(reconcile.everySeconds ?? 3600) else {
                throw ServerConfigurationError("\"appStore.reconcile.everySeconds\" must be from 60 to 604800")
            }
            guard (0...15_552_000).contains(reconcile.lookBackSeconds ?? 259_200) else {
                throw ServerConfigurationError("\"appStore.reconcile.lookBackSeconds\" must be from 0 to 15552000 (Apple keeps 180 days)")
            }
        }
        var endpoints: Set<String> = []
        for webhook in webhooks ?? [] {
            try webhook.check()
            guard endpoints.insert(webhook.name).inserted else {
                throw ServerConfigurationError("webhook \"\(webhook.name)\" is listed twice")
            }
        }
        if let seconds = webhookFirstRetrySeconds, !(seconds.isFinite && (0.01...600).contains(seconds)) {
            throw ServerConfigurationError("\"webhookFirstRetrySeconds\" must be from 0.01 to 600")
        }
        if let seconds = webhookTimeoutSeconds, !(seconds.isFinite && (0.1...60).contains(seconds)) {
            throw ServerConfigurationError("\"webhookTimeoutSeconds\" must be from 0.1 to 60")
        }
        if let seconds = webhookLeaseSeconds, !(3...600).contains(seconds) {
            throw ServerConfigurationError("\"webhookLeaseSeconds\" must be from 3 to 600")
        }
        if let checkpoints {
            guard (1...86_400).contains(checkpoints.everySeconds ?? Checkpoints.defaultEverySeconds) else {
                throw ServerConfigurationError("\"checkpoints.everySeconds\" must be from 1 to 86400")
            }
            let signer = try checkpoints.signer()
            do {
                _ = try Checkpoint(origin: checkpoints.origin ?? signer.name, size: 0, root: .empty)
            } catch {
                throw ServerConfigurationError("\"checkpoints.origin\" must be one line")
            }
        }
        var seen: Set<String> = []
        for key in keys {
            guard key.key.utf8.count >= 32 else {
                throw ServerConfigurationError("key \"\(key.name)\" must be at least 32 characters long")
            }
            guard seen.insert(key.key).inserted else {
                throw ServerConfigurationError("key \"\(key.name)\" is listed twice")
            }
            guard !key.scopes.isEmpty else { throw ServerConfigurationError("key \"\(key.name)\" has no scopes") }
        }
        if let appStore {
            let environments = appStore.acceptedEnvironments
            guard (appStore.environment == nil) != (appStore.environments == nil) else {
                throw ServerConfigurationError("\"appStore\" must give \"environment\" or \"environments\", not both")
            }
            guard !environments.isEmpty, Set(environments).count == environments.count else {
                throw ServerConfigurationError("\"appStore.environments\" must name at least one environment, each once")
            }
            guard !appStore.trustedRoots.isEmpty || !environments.contains(where: \.isSigned) else {
                throw ServerConfigurationError("\"appStore.trustedRoots\" must name at least one root certificate")
            }
            guard !environments.contains(.production) || appStore.appAppleId != nil else {
                throw ServerConfigurationError("\"appStore.appAppleId\" is required in production")
            }
            // Xcode and local-testing payloads are not signed: anyone who can reach the server
            // could credit any account.
            if let unsigned = environments.first(where: { !$0.isSigned }), !["127.0.0.1", "::1", "localhost"].contains(bind.host) {
                throw ServerConfigurationError("\"appStore.environment\" \(unsigned.rawValue) is unsigned: bind to 127.0.0.1 only")
            }
        }
    }
}

public struct ServerConfigurationError: Error, CustomStringConvertible, Sendable {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// What an API key may do.
public enum Scope: String, Codable, Sendable, Hashable, CaseIterable {
    /// Post events (`POST /v1/events`), except `revoked`.
    case eventsWrite = "events:write"
    /// Post `revoked` events too. Refunds normally come from App Store notifications; a client
    /// that may revoke can take back purchases of any account that shares a transaction id.
    case eventsRevoke = "events:revoke"
    /// Post the store's events too (`storeTransaction`, `renewalInfo`, and the refund requests'
    /// `consumptionRequest`, `consumptionAnswer`): what the App Store says, which grants, revokes
    /// and restores. Verified notifications write them; give this only to
    /// a trusted back office (one that replays Apple's signed data, for example).
    case eventsStore = "events:store"
    /// Read accounts and their history.
    case accountsRead = "accounts:read"
    /// Scrape `/metrics`.
    case metricsRead = "metrics:read"
    /// Read the change feed (`GET /v1/changes`, its stream): every account's changes.
    case changesRead = "changes:read"
    /// Forget a customer (`DELETE /v1/accounts/{account}`, or a posted `forgotten` event):
    /// the account's id leaves the ledger, its books stay under a pseudonym.
    case accountsForget = "accounts:forget"
    /// Read the log's signed checkpoints and the proofs of its Merkle tree (`GET
    /// /v1/checkpoint`, `/v1/checkpoints`, `/v1/proofs/…`): they name no customer.
    case proofsRead = "proofs:read"
    /// Read the books (`GET /v1/books`): sales, refunds, revenue, subscriptions, MRR; totals
    /// that name no customer.
    case booksRead = "books:read"

    /// The event types a key needs more than `events:write` for, and the scope each needs.
    static let beyondWriting: [(types: Set<EventType>, scope: Scope)] = [
        ([.revoked], .eventsRevoke),
        // A transfer moves another account's purchase, and the calls to Apple and their
        // answers are Apple's word: none is a device's to send.
        ([.storeTransaction, .renewalInfo, .consumptionRequest, .consumptionAnswer, .appStoreCall, .appTransaction, .transferred, .shared], .eventsStore),
        ([.forgotten], .accountsForget),
    ]
}
