// swift-tools-version: 6.1
import Foundation
import PackageDescription

/// SwiftPM names a path dependency after its directory, whatever the clone is called.
let ledgerPackage = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().lastPathComponent

// A package of its own, so that apps linking PurchaseLedger never pull in benchmark tooling.
// Run with `tools/bench` from the repository root (or `swift package benchmark` here).
let package = Package(
    name: "PurchaseLedgerBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(path: "../"),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.21.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.65.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.5.0"),
    ],
    targets: [
        // The workloads, shared by the benchmarks: event generation, ledger fixtures, the raw
        // LMDB floor and the SQLite peer.
        .target(
            name: "Workloads",
            dependencies: [
                .product(name: "PurchaseLedger", package: ledgerPackage),
                .product(name: "CLMDB", package: ledgerPackage),
                .product(name: "PurchaseLedgerPostgres", package: ledgerPackage),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Sources/Workloads"
        ),
        .executableTarget(
            name: "LedgerBenchmarks",
            dependencies: [
                "Workloads",
                .product(name: "PurchaseLedger", package: ledgerPackage),
                .product(name: "PurchaseLedgerPostgres", package: ledgerPackage),
                .product(name: "Benchmark", package: "benchmark"),
            ],
            path: "Benchmarks/LedgerBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        // Times what takes seconds an iteration, in child processes (the release `ledger` binary
        // end to end; the C SQLite peer it is compared with, peers/sqlite-peer.c, which
        // tools/bench compiles; the library's full replay) and writes JMH JSON.
        .executableTarget(
            name: "command-line-bench",
            dependencies: ["Workloads", .product(name: "PurchaseLedger", package: ledgerPackage)],
            path: "Sources/CommandLineBench"
        ),
        // The change feed and webhooks: commit to a receiver's 2xx, the feed against a replay,
        // group commit with endpoints delivering; writes a Markdown section for RESULTS.md.
        .executableTarget(
            name: "feed-bench",
            dependencies: [
                "Workloads",
                .product(name: "PurchaseLedger", package: ledgerPackage),
                .product(name: "PurchaseLedgerServer", package: ledgerPackage),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            path: "Sources/FeedBench"
        ),
        // Turns the benchmark results (JMH JSON) into RESULTS.md and the concurrency chart.
        .executableTarget(
            name: "bench-report",
            path: "Sources/BenchReport"
        ),
    ],
    swiftLanguageModes: [.v6]
)
