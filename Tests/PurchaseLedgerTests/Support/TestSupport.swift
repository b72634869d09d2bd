import Logging
import Testing
@testable import PurchaseLedger
@testable import PurchaseLedgerLMDB
import LedgerTestSupport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Whole-file bytes, for byte-for-byte comparisons.
func fileBytes(_ path: String) throws -> [UInt8] {
    try FileBytes.contents(of: path)
}

func writeFile(_ path: String, _ bytes: [UInt8]) throws {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    guard fd >= 0 else { throw TestFailure("cannot write \(path)") }
    defer { close(fd) }
    let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    guard written == bytes.count else { throw TestFailure("short write to \(path)") }
}

/// The store of the examples: a word game selling hints (consumables), word packs
/// (non-consumables), a subscription and a season pass.
let wordGameCatalog = try! Catalog(products: [
    .init(id: "com.example.tenhints", type: .consumable, grants: ["hints": 10]),
    .init(id: "com.example.hundredhints", type: .consumable, grants: ["hints": 100]),
    .init(id: "com.example.hardwords", type: .nonConsumable),
    .init(id: "com.example.ioswords", type: .nonConsumable),
    .init(id: "com.example.pro.month", type: .autoRenewable, group: "pro"),
    .init(id: "com.example.season", type: .nonRenewing),
    .init(id: "com.example.gem", type: .consumable),
])

/// 2026-01-01T00:00:00Z.
let newYear = Timestamp(seconds: 1_767_225_600)

/// Writes events for one account the way an app's payment-queue observer would, with ids
/// `<account>-1`, `<account>-2`, … and a clock one minute apart.
struct Script {
    var account: String
    var count = 0
    var clock = newYear

    init(_ account: String = "u1") {
        self.account = account
    }

    private mutating func next() -> (String, Timestamp) {
        count += 1
        clock = Timestamp(seconds: clock.seconds + 60)
        return ("\(account)-\(count)", clock)
    }

    /// The App Store's report of `transaction`, signed at this script's next minute.
    mutating func store(_ transaction: String, _ product: String, quantity: Int? = nil, revoked: Bool = false) -> Event {
        let (id, at) = next()
        return .storeTransaction(id: id, account: account, signedAt: at, StoreTransaction(
            transaction: transaction, product: product, quantity: quantity, purchasedAt: newYear, revokedAt: revoked ? at : nil))
    }

    mutating func add(_ payment: String, _ product: String, quantity: Int? = nil) -> Event {
        let (id, at) = next()
        return .paymentAdded(id: id, account: account, at: at, payment: payment, product: product, quantity: quantity)
    }

    mutating func update(
        _ payment: String, _ state: TransactionState, transaction: String? = nil, original: String? = nil,
        error: String? = nil, expires: Timestamp? = nil, product: String? = nil, quantity: Int? = nil
    ) -> Event {
        let (id, at) = next()
        return .transactionUpdated(id: id, account: account, at: at, TransactionUpdated(
            payment: payment, state: state, transaction: transaction, originalTransaction: original,
            error: error, expiresAt: expires, product: product, quantity: quantity))
    }

    mutating func purchased(_ payment: String, _ transaction: String, product: String? = nil, original: String? = nil, expires: Timestamp? = nil) -> Event {
        update(payment, .purchased, transaction: transaction, original: original, expires: expires, product: product)
    }

    mutating func download(_ payment: String, _ download: String, _ state: DownloadState, progress: Double? = nil, remaining: Double? = nil) -> Event {
        let (id, at) = next()
        return .downloadUpdated(id: id, account: account, at: at, DownloadUpdated(
            payment: payment, download: download, state: state, progress: progress, timeRemaining: remaining))
    }

    mutating func finish(_ payment: String) -> Event {
        let (id, at) = next()
        return .transactionFinished(id: id, account: account, at: at, payment: payment)
    }

    mutating func consume(_ item: String, _ amount: Int64) -> Event {
        let (id, at) = next()
        return .consumed(id: id, account: account, at: at, item: item, amount: amount)
    }

    mutating func revoke(_ transaction: String, reason: String? = nil) -> Event {
        let (id, at) = next()
        return .revoked(id: id, account: account, at: at, transaction: transaction, reason: reason)
    }

    /// The same event under a new id: what StoreKit's redelivery looks like.
    mutating func again(_ event: Event) -> Event {
        var copy = event
        (copy.id, copy.at) = next()
        return copy
    }
}

/// Opens a ledger in a new temporary directory, runs `body`, closes it.
func withLedger<R>(
    catalog: Catalog = wordGameCatalog, configuration: Ledger.Configuration = .testing, options: LMDBOptions = .init(),
    _ body: (Ledger, String) async throws -> R
) async throws -> R {
    try await withTemporaryDirectory { directory in
        let path = directory + "/ledger"
        let ledger = try Ledger.open(at: path, catalog: catalog, configuration: configuration, options: options)
        do {
            let result = try await body(ledger, path)
            await ledger.close()
            return result
        } catch {
            await ledger.close()
            throw error
        }
    }
}

extension Ledger.Configuration {
    /// The default configuration (durable commits, growing map), logging only warnings.
    static var testing: Ledger.Configuration {
        var configuration = Ledger.Configuration()
        configuration.logger.logLevel = .warning
        return configuration
    }
}

extension Ledger {
    /// Appends events that must all be appended; returns their positions.
    @discardableResult
    func appendAll(_ events: [Event], sourceLocation: SourceLocation = #_sourceLocation) async throws -> [UInt64] {
        let results = try await append(contentsOf: events)
        var positions: [UInt64] = []
        for (event, result) in zip(events, results) {
            guard case .success(.appended(let position)) = result else {
                Issue.record("expected \(event.id) to be appended, got \(result)", sourceLocation: sourceLocation)
                continue
            }
            positions.append(position)
        }
        return positions
    }
}

extension AppendResult {
    var code: LedgerError.Code? {
        if case .failure(let error) = self { error.code } else { nil }
    }

    /// `appended 3`, `duplicate 2`, `rejected illegalTransition`: outcomes without messages.
    var summary: String {
        switch self {
        case .success(.appended(let position)): "appended \(position)"
        case .success(.duplicate(let position)): "duplicate \(position)"
        case .failure(let error): "rejected \(error.code)"
        }
    }
}
