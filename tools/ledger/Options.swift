import ArgumentParser
import PurchaseLedgerLocation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The ledger every subcommand works on: a directory (LMDB), or a PostgreSQL database URL.
struct LocationArgument: ParsableArguments {
    @Argument(help: ArgumentHelp(
        "The ledger: a directory, or a postgres://USER@HOST[:PORT]/DATABASE URL (password from PGPASSWORD).",
        valueName: "ledger"))
    var directory: String

    var location: LedgerLocation { LedgerLocation(directory) }

    /// How messages name it: a URL without its password.
    var display: String { location.description }

    func openLedger(catalog: Catalog? = nil, configuration: Ledger.Configuration) throws -> Ledger {
        try location.openLedger(catalog: catalog, configuration: configuration)
    }

    func openLog() throws -> LedgerLog {
        try location.openLog()
    }
}

/// Output format shared by the commands that can print JSON.
struct OutputFormat: ParsableArguments {
    @Flag(name: .shortAndLong, help: "Print JSON instead of text.")
    var json = false
}

extension ExitCode {
    /// `verify` found damage.
    static let damaged = ExitCode(1)
    /// `import --strict`: some lines were rejected.
    static let rejectedLines = ExitCode(1)
    /// The command could not do its job.
    static let couldNotRun = ExitCode(2)
}

/// Runs `body`; on failure prints `ledger: <message>` to stderr and exits with status 2.
func runOrFail<T>(_ body: () async throws -> T) async throws -> T {
    do {
        return try await body()
    } catch let exit as ExitCode {
        throw exit
    } catch {
        Console.error("ledger: \(describe(error))")
        throw ExitCode.couldNotRun
    }
}

/// A message for an error, without Swift type decoration.
func describe(_ error: any Error) -> String {
    switch error {
    case let error as StorageError: error.message + (error.cause.map { " (\($0))" } ?? "")
    case let error as CatalogError where error.code == .missing: "catalog: " + error.message + " (give it with --catalog)"
    case let error as CatalogError: "catalog: " + error.message
    case let error as LedgerError: error.description
    default: "\(error)"
    }
}

extension String {
    /// Pads with spaces on the right to `width` characters (columns of text for people).
    func padding(to width: Int) -> String {
        count >= width ? self : self + String(repeating: " ", count: width - count)
    }

    /// Pads with spaces on the left to `width` characters (numbers in a column).
    func padding(left width: Int) -> String {
        count >= width ? self : String(repeating: " ", count: width - count) + self
    }
}

/// Parses `--as-of`.
func parseTimestamp(_ text: String) throws -> Timestamp {
    guard let time = Timestamp(rfc3339: text), time.isRepresentable else {
        throw ValidationError("'\(text)' is not an RFC 3339 timestamp such as 2026-01-31T12:00:00Z")
    }
    return time
}
