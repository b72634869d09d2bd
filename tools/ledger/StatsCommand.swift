import ArgumentParser
import PurchaseLedgerLocation

extension LedgerCommand {
    struct Stats: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show a ledger's size: events, accounts, positions, catalog and data file.",
            discussion: """
                Counters only: no scan of the log.

                Example:
                  ledger stats --json ./ledger
                """)

        @OptionGroup var format: OutputFormat
        @OptionGroup var location: LocationArgument

        func run() async throws {
            try await runOrFail {
                let log = try location.openLog()
                defer { log.close() }
                let events = try log.lastPosition()
                let accounts = try log.accountCount()
                let products = try log.catalog().products.count
                let size = log.fileSize()
                let snapshot = try log.snapshots().last { $0.problem == nil }
                let age = snapshot?.createdAt.map { Timestamp.now().seconds - $0.seconds }
                if format.json {
                    var writer = JSONWriter(spaced: true)
                    writer.beginObject()
                    writer.member("events", Int64(events))
                    writer.member("accounts", Int64(accounts))
                    writer.member("firstPosition", Int64(events > 0 ? 1 : 0))
                    writer.member("lastPosition", Int64(events))
                    writer.member("products", Int64(products))
                    writer.member("fileSize", Int64(size))
                    if let snapshot {
                        writer.member("snapshotPosition", Int64(snapshot.position))
                        writer.member("snapshotAgeSeconds", ifPresent: age)
                    }
                    writer.endObject()
                    try Console.output(writer.string + "\n")
                } else {
                    let snapshotText = snapshot.map { snapshot in
                        "position \(grouped(snapshot.position)) (\(grouped(events - snapshot.position)) events after it)"
                            + (age.map { ", written \(Self.duration($0)) ago" } ?? "")
                    } ?? "none"
                    let style = Style.output
                    let rows = [
                        ("events", grouped(events)),
                        ("accounts", grouped(accounts)),
                        ("positions", events > 0 ? "1 … \(grouped(events))" : "none"),
                        ("products", "\(products)"),
                        ("file size", "\(grouped(size)) bytes (\(megabytes(size)))"),
                        ("snapshot", snapshotText),
                    ]
                    try Console.output(rows.map { style.dim($0.0.padding(to: 11)) + $0.1 + "\n" }.joined())
                }
            }
        }

        static func duration(_ seconds: Int64) -> String {
            switch seconds {
            case ..<120: "\(seconds) s"
            case ..<7200: "\(seconds / 60) min"
            case ..<172_800: "\(seconds / 3600) h"
            default: "\(seconds / 86_400) days"
            }
        }

        private func megabytes(_ bytes: Int) -> String {
            let tenths = (bytes * 10 + (1 << 19)) >> 20
            return "\(tenths / 10).\(tenths % 10) MiB"
        }
    }
}

