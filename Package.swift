// swift-tools-version: 6.1
import PackageDescription

/// Every target of this package compiles in the Swift 6 language mode (strict concurrency)
/// with the upcoming features that keep APIs honest. Warnings fail CI: `tools/test` passes
/// `-warnings-as-errors`, so users who depend on the package are never broken by a new warning.
let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "PurchaseLedger",
    platforms: [.macOS(.v15)],
    products: [
        // The domain and its embedded backend (LMDB): `import PurchaseLedgerLMDB` is all an app
        // on one server needs.
        .library(name: "PurchaseLedger", targets: ["PurchaseLedger", "PurchaseLedgerLMDB"]),
        .executable(name: "ledger", targets: ["LedgerTool"]),
        .executable(name: "ledger-torture", targets: ["TortureTool"]),
        // The ledger over HTTP (Hummingbird 2): a separate product, so that apps linking only
        // `PurchaseLedger` never build Hummingbird.
        .library(name: "PurchaseLedgerServer", targets: ["PurchaseLedgerServer"]),
        // What the App Store says, recorded (verification, notifications, reconciliation): for a
        // server of one's own without Hummingbird.
        .library(name: "PurchaseLedgerAppStore", targets: ["PurchaseLedgerAppStore"]),
        .executable(name: "ledger-server", targets: ["LedgerServerTool"]),
        // The PostgreSQL backend (postgres-nio): a separate product, so that apps on LMDB alone
        // never build it.
        .library(name: "PurchaseLedgerPostgres", targets: ["PurchaseLedgerPostgres", "PurchaseLedgerLocation"]),
        // For the benchmarks' raw-LMDB floor; apps need only `PurchaseLedger`.
        .library(name: "CLMDB", targets: ["CLMDB"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.5.0"),
        .package(url: "https://github.com/apple/swift-crypto", "3.0.0"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-certificates", from: "1.21.0"),
        .package(url: "https://github.com/apple/swift-asn1", from: "1.1.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.5.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.0.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.3.0"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.21.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.65.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.27.0"),
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.20.0"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.21.0"),
        .package(url: "https://github.com/vapor/jwt-kit", from: "5.7.1"),
        // `swift package generate-documentation`: the DocC catalogs, built by tools/test so that
        // a renamed symbol breaks the docs' build rather than their links.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
    ],
    targets: [
        // Debian: apt-get install liblmdb-dev. The only target where C is visible.
        .systemLibrary(
            name: "CLMDB",
            pkgConfig: "lmdb",
            providers: [.apt(["liblmdb-dev"]), .brew(["lmdb"])]
        ),
        // A small safe layer over LMDB: environment, transactions, typed tables, cursors.
        .target(
            name: "LMDB",
            dependencies: ["CLMDB"],
            swiftSettings: strictSettings
        ),
        // Events, codec, rules, projections and the `Ledger` facade, over the storage protocol:
        // no backend of its own.
        .target(
            name: "PurchaseLedger",
            dependencies: [
                .product(name: "Logging", package: "swift-log"),
                // SHA-256 and Ed25519 for the log's Merkle tree and its signed checkpoints.
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: strictSettings
        ),
        // The embedded backend: the storage protocol on LMDB, a ledger in a directory.
        .target(
            name: "PurchaseLedgerLMDB",
            dependencies: [
                "PurchaseLedger", "LMDB",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSettings
        ),
        // The same ledger on PostgreSQL: several processes append to one database.
        .target(
            name: "PurchaseLedgerPostgres",
            dependencies: [
                "PurchaseLedger",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSettings
        ),
        // A ledger by location (a directory or a postgres:// URL): the one place that picks
        // the backend, for tools and servers.
        .target(
            name: "PurchaseLedgerLocation",
            dependencies: [
                "PurchaseLedgerLMDB", "PurchaseLedgerPostgres",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSettings
        ),
        // A client of Apple's App Store Server API (ES256 tokens from an in-app purchase key):
        // knows nothing of the ledger.
        .target(
            name: "AppStoreServerAPI",
            dependencies: [
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSettings
        ),
        // Everything Apple says, recorded once: verification of the App Store's signed data,
        // notifications, StoreKit 2 transactions from devices, reconciliation against the App
        // Store Server API, answers to refund requests and the store proofs `verify` checks.
        // Never Hummingbird: the server and the `ledger` tool both link it.
        .target(
            name: "PurchaseLedgerAppStore",
            dependencies: [
                "PurchaseLedger", "AppStoreServerAPI",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSettings
        ),
        // The `ledger` audit tool.
        .executableTarget(
            name: "LedgerTool",
            dependencies: [
                "PurchaseLedgerLocation", "PurchaseLedgerAppStore", "AppStoreServerAPI",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "tools/ledger",
            swiftSettings: strictSettings
        ),
        // Crash torture and fuzzing (tools/torture, tools/fuzz, and a short run in tools/test).
        .executableTarget(
            name: "TortureTool",
            dependencies: [
                "PurchaseLedgerLMDB",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "tools/ledger-torture",
            swiftSettings: strictSettings
        ),
        // The ledger over HTTP: routes, API keys, its configuration and services.
        .target(
            name: "PurchaseLedgerServer",
            dependencies: [
                "PurchaseLedger", "PurchaseLedgerLocation", "PurchaseLedgerAppStore", "AppStoreServerAPI",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
            ],
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "LedgerServerTool",
            dependencies: [
                "PurchaseLedgerServer",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "tools/ledger-server",
            swiftSettings: strictSettings
        ),
        // What the test targets share (test support, not tests).
        .target(
            name: "LedgerTestSupport",
            path: "Tests/LedgerTestSupport",
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "PurchaseLedgerServerTests",
            dependencies: [
                "LedgerTestSupport", "PurchaseLedgerServer", "PurchaseLedgerAppStore", "PurchaseLedger", "PurchaseLedgerLMDB",
                "PurchaseLedgerLocation", "LedgerServerTool",
                "AppStoreServerAPI", .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Logging", package: "swift-log"),
            ],
            exclude: ["Fixtures", "Scripts"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "LMDBTests",
            dependencies: ["LMDB", "LedgerTestSupport"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "PurchaseLedgerTests",
            dependencies: [
                "LedgerTestSupport", "PurchaseLedger", "PurchaseLedgerLMDB", "PurchaseLedgerPostgres", "PurchaseLedgerLocation", "LMDB",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            exclude: ["Fixtures", "Scripts"],
            swiftSettings: strictSettings
        ),
        // Runs the built `ledger` binary, as scripts do.
        .testTarget(
            name: "LedgerToolTests",
            dependencies: ["LedgerTestSupport", "LedgerTool", "TortureTool"],
            exclude: ["Fixtures"],
            swiftSettings: strictSettings
        ),
    ],
    swiftLanguageModes: [.v6]
)
