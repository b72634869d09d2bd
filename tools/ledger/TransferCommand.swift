import ArgumentParser
import Foundation
import Logging
import PurchaseLedgerLocation

extension LedgerCommand {
    struct Transfer: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Move a subscription or non-consumable purchase from one account to another, or share it.",
            discussion: """
                Appends a transferred pair (or, with --share, a shared event) for the purchase's original \
                transaction, dated now (docs/FORMAT.md, "Transfers"), and, in the same commit, what grants the \
                purchase to the account it goes to: a copy of the store's reports of it (or, when the store \
                reported none, a restore of its latest transaction). All of it or nothing. The account it leaves \
                no longer owns it (with --share, both do), the other is entitled at once, and Apple's later \
                reports of it go there; running it again the other way moves it back. What the server does by \
                itself under restoresAcrossAccounts, for a support agent or a back office. Run it with the server \
                stopped (an LMDB ledger has one writer), or at any time on PostgreSQL.

                Prints each event's outcome, as import does; exits 1 when the ledger refused it (the account \
                does not hold it, a consumable), 2 when it could not run.

                Example:
                  ledger transfer ./ledger --original-transaction 2000000123 --from alice --to bob
                """)

        @OptionGroup var ledger: LocationArgument

        @Option(name: .customLong("original-transaction"), help: ArgumentHelp("The purchase's original transaction id.", valueName: "id"))
        var originalTransaction: String

        @Option(help: ArgumentHelp("The account that owns it.", valueName: "account"))
        var from: String

        @Option(help: ArgumentHelp("The account it goes to.", valueName: "account"))
        var to: String

        @Flag(help: "Share it instead: both accounts keep it.")
        var share = false

        @OptionGroup var format: OutputFormat

        func run() async throws {
            let results = try await runOrFail { () -> [(Event, AppendResult)] in
                var configuration = Ledger.Configuration()
                configuration.logger.logLevel = .warning
                let opened = try ledger.openLedger(configuration: configuration)
                let events: [Event]
                let outcomes: [AppendResult]
                do {
                    events = try opened.transferFact(originalTransaction: originalTransaction, from: from, to: to, share: share)
                    outcomes = try await opened.append(facts: [events], duplicates: .sameFact)[0]
                } catch {
                    await opened.close()
                    throw error
                }
                await opened.close()
                return Array(zip(events, outcomes))
            }
            if format.json {
                try Console.output(AppendResult.reportArray(results.map(\.1)) + "\n")
            } else {
                for (event, result) in results {
                    try Console.output("\(event.account): \(describe(result))\n")
                }
            }
            if results.contains(where: { if case .failure = $0.1 { true } else { false } }) { throw ExitCode.rejectedLines }
        }

        private func describe(_ result: AppendResult) -> String {
            switch result {
            case .success(.appended(let position)): "appended at position \(position)"
            case .success(.duplicate(let position)): "already recorded at position \(position)"
            case .failure(let error): "refused, \(error.code.rawValue): \(error.message)"
            }
        }
    }
}
