import Foundation
import PurchaseLedger

/// The `ledger` tool end to end, as a user meets it: the release binary that `tools/bench`
/// builds (`LEDGER_BINARY`), run on a JSON Lines file of generated events; and beside it the
/// physical SQLite peer (`SQLITE_PEER_BINARY`, Benchmarks/peers/sqlite-peer.c), run on the
/// same file.
public enum CommandLineRuns {
    /// The release `ledger` binary, when `tools/bench` named one.
    public static var binary: String? { environmentPath("LEDGER_BINARY") }

    /// The C SQLite peer that `tools/bench` compiles, when it named one.
    public static var sqlitePeerBinary: String? { environmentPath("SQLITE_PEER_BINARY") }

    private static func environmentPath(_ name: String) -> String? {
        ProcessInfo.processInfo.environment[name].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// A JSON Lines file of `events` generated events (built once and kept), and the catalog
    /// file beside it.
    public static func eventsFile(events: Int) throws -> (events: String, catalog: String) {
        let path = "\(Scratch.root)/events-\(events).jsonl"
        let catalog = "\(Scratch.root)/catalog.json"
        try Data(BenchmarkEvents.catalog.json.utf8).write(to: URL(fileURLWithPath: catalog))
        if Scratch.exists(path + ".complete") { return (path, catalog) }
        _ = FileManager.default.createFile(atPath: path, contents: nil)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        var generator = BenchmarkEvents()
        var written = 0
        while written < events {
            let chunk = generator.next(min(10_000, events - written))
            try handle.write(contentsOf: Data(chunk.map { $0.jsonLine + "\n" }.joined().utf8))
            written += chunk.count
        }
        try handle.close()
        Scratch.touch(path + ".complete")
        return (path, catalog)
    }
}

public struct CommandLineRunError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
