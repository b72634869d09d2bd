import ArgumentParser
import Logging
import PurchaseLedgerAppStore
import PurchaseLedgerLocation

extension LedgerCommand {
    struct Forget: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Forget a customer: the account's id leaves the ledger, its books stay under a pseudonym.",
            discussion: """
                Appends a forgotten event for the account (docs/FORMAT.md, "Forgetting a customer"), in a commit \
                that renames the account to its pseudonym, forgotten/<handle>, wherever the ledger stores it, and \
                removes the proofs that carried its token. Its transactions, refunds and counts stay, as the \
                pseudonym's; a later event of the same id starts a new account.

                A directory's data file is then rewritten, so that no freed or stale page keeps the id: run it with \
                the server stopped and no other process reading the ledger. On PostgreSQL it runs at any time; \
                docs/POSTGRES.md says what VACUUM, the WAL and backups keep, and for how long.

                The server's audit file of notifications it could not attribute loses every line that names the \
                customer (her id, token or app transaction id, in its fields or inside Apple's signed payloads): \
                the ledger directory's own, or the file --unattributed-notifications names.

                Exits 1 when the ledger has no event of the account, 2 when it could not run.

                Example:
                  ledger forget ./ledger --account alice --requested-by "ticket 4711"
                """)

        @OptionGroup var ledger: LocationArgument

        @Option(help: ArgumentHelp("The account to forget.", valueName: "account"))
        var account: String

        @Option(name: .customLong("requested-by"), help: ArgumentHelp(
            "Who asked (an operator, a ticket): recorded in the event; nothing about the person.", valueName: "who"))
        var requestedBy: String

        @Option(name: .customLong("unattributed-notifications"), help: ArgumentHelp(
            "The server's audit file of unattributed notifications (default: the ledger directory's).", valueName: "file"))
        var unattributedNotifications: String?

        @OptionGroup var format: OutputFormat

        func run() async throws {
            let outcome = try await runOrFail { () -> Result<(AppendOutcome, String, [String]), LedgerError> in
                var configuration = Ledger.Configuration()
                configuration.logger.logLevel = .warning
                let opened = try ledger.openLedger(configuration: configuration)
                let forgotten: (outcome: AppendOutcome, pseudonym: String)
                do {
                    guard let answer = try await opened.forget(account, requestedBy: requestedBy) else {
                        await opened.close()
                        return .failure(LedgerError(.invalidEvent, "the ledger has no event of this account"))
                    }
                    forgotten = answer
                } catch let error as LedgerError {
                    await opened.close()
                    return .failure(error)
                } catch {
                    await opened.close()
                    throw error
                }
                let position = switch forgotten.outcome {
                case .appended(let position), .duplicate(let position): position
                }
                let names: [String]
                do {
                    names = try opened.renames(ofForgetAt: position).map(\.old)
                } catch {
                    await opened.close()
                    throw error
                }
                await opened.close()
                return .success((forgotten.outcome, forgotten.pseudonym, names))
            }
            let (appended, pseudonym): (AppendOutcome, String)
            switch outcome {
            case .success(let forgotten):
                (appended, pseudonym) = (forgotten.0, forgotten.1)
                if let audit = unattributedNotifications ?? ledger.location.directory.map({ $0 + "/unattributed-notifications.jsonl" }) {
                    _ = try await runOrFail { try UnattributedNotificationLog(path: audit).forget(forgotten.2) }
                }
            case .failure(let error):
                if format.json {
                    try Console.output(AppendResult.reportArray([.failure(error)]) + "\n")
                } else {
                    Console.error("refused, \(error.code.rawValue): \(error.message)")
                }
                throw ExitCode.rejectedLines
            }
            let sizes = try await runOrFail { try ledger.location.rewriteDataFile() }
            if format.json {
                // {"position": 12, "pseudonym": "forgotten/3", "rewrote": {"before": …, "after": …}}
                var writer = JSONWriter(spaced: true)
                writer.beginObject()
                switch appended {
                case .appended(let position): writer.member("position", Int64(position))
                case .duplicate(let position): writer.member("duplicateOf", Int64(position))
                }
                writer.member("pseudonym", pseudonym)
                if let sizes {
                    writer.key("rewrote")
                    writer.beginObject()
                    writer.member("before", Int64(sizes.before))
                    writer.member("after", Int64(sizes.after))
                    writer.endObject()
                }
                writer.endObject()
                try Console.output(writer.string + "\n")
            } else {
                switch appended {
                case .appended(let position): try Console.output("forgotten at position \(grouped(position)); the account is now \(pseudonym)\n")
                case .duplicate(let position): try Console.output("already forgotten at position \(grouped(position)), as \(pseudonym)\n")
                }
                if let sizes {
                    try Console.output("rewrote the data file: \(grouped(UInt64(sizes.before))) bytes before, \(grouped(UInt64(sizes.after))) after\n")
                }
            }
        }
    }
}
