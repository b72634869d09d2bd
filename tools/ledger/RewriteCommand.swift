import ArgumentParser
import PurchaseLedgerLocation

extension LedgerCommand {
    struct Rewrite: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Rewrite an LMDB ledger's data file, so that it holds only what its tables hold.",
            discussion: """
                Copies every entry, in key order, into a new data file put in place of the old one \
                (docs/FORMAT.md, "Forgetting a customer"): no freed page, and no stale bytes in a page written \
                again, keeps what a forget removed. ledger forget does it by itself; after a forget through the \
                server, the server's next start does, or run this with the server stopped. It refuses while \
                another process has the ledger open (exit 2). The file \
                also shrinks to what the ledger holds. A PostgreSQL ledger has no file of its own: VACUUM it \
                (docs/POSTGRES.md).

                Example:
                  ledger rewrite ./ledger
                """)

        @OptionGroup var ledger: LocationArgument
        @OptionGroup var format: OutputFormat

        func run() async throws {
            let sizes = try await runOrFail { () -> (before: Int, after: Int) in
                guard let sizes = try ledger.location.rewriteDataFile() else {
                    throw CommandFailure(message: "\(ledger.display) is a PostgreSQL ledger: VACUUM it instead (docs/POSTGRES.md)")
                }
                return sizes
            }
            if format.json {
                try Console.output("{\"before\": \(sizes.before), \"after\": \(sizes.after)}\n")
            } else {
                try Console.output("rewrote the data file: \(grouped(UInt64(sizes.before))) bytes before, \(grouped(UInt64(sizes.after))) after\n")
            }
        }
    }
}
