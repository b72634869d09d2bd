import AppStoreServerAPI
import ArgumentParser
import Foundation
import Logging
import PurchaseLedger
import PurchaseLedgerLocation
import PurchaseLedgerAppStore

extension LedgerCommand {
    struct Reconcile: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Compare the ledger with Apple's transaction histories, and with --apply append what it lacks.",
            discussion: """
                For every original transaction the ledger holds, reads Apple's current history (App Store Server \
                API, Get Transaction History), verifies each signed transaction against the trusted roots, and \
                reports each difference: a purchase or renewal Apple has and the ledger lacks, a refund, expiry \
                or upgrade that differs, a transaction Apple does not know, a purchase under another account; \
                with --since, also every notification Apple sent since then that the ledger never received. \
                With --apply the missing facts are appended as a notification would append them (ids derived \
                from Apple's: a second run appends nothing).

                The key is an in-app purchase key from App Store Connect (Users and Access › Integrations › \
                In-App Purchase): the .p8 file, its key id, and the issuer id shown on that page.

                Exit status: 0 the ledger agrees with Apple, 1 differences were found (and, with --apply, \
                mended), 2 the reconciliation could not be done.

                Example:
                  ledger reconcile --key-file SubscriptionKey_ABC123.p8 --key-id ABC123 \\
                    --issuer-id 57246542-96fe-1a63-e053-0824d011072a --bundle-id com.example.app \\
                    --root AppleRootCA-G3.cer --environment Sandbox --since 2026-11-01T00:00:00Z --json /var/lib/ledger
                """)

        @Option(help: ArgumentHelp("The in-app purchase key (.p8).", valueName: "file"))
        var keyFile: String

        @Option(help: ArgumentHelp("The key's id.", valueName: "id"))
        var keyId: String

        @Option(help: ArgumentHelp("The issuer id of the key's team.", valueName: "id"))
        var issuerId: String

        @Option(help: ArgumentHelp("The app's bundle id.", valueName: "id"))
        var bundleId: String

        @Option(
            name: [.customShort("e"), .long],
            help: ArgumentHelp(
                "Production or Sandbox; repeatable, in the order asked (a transaction only the device reported is asked of each in turn until one knows it).",
                valueName: "environment"))
        var environment: [String] = []

        /// The environments asked, in order: Production when none is named.
        var environments: [StoreEnvironment] {
            let named = environment.compactMap(StoreEnvironment.init(rawValue:))
            return named.isEmpty ? [.production] : named
        }

        @Option(help: ArgumentHelp("The app's Apple id (required to verify production data).", valueName: "id"))
        var appAppleId: Int64?

        @Option(help: ArgumentHelp("A trusted root certificate, DER or PEM (Apple Root CA G3); repeatable.", valueName: "file"))
        var root: [String] = []

        @Option(help: ArgumentHelp("Another base URL for the API (a test server).", valueName: "url"))
        var apiBase: String?

        @Option(help: ArgumentHelp("Seconds one API request may take, head and body (1 to 300).", valueName: "seconds"))
        var timeout = 30

        @Option(help: ArgumentHelp("Also look for notifications Apple sent since this time that the ledger never received (RFC 3339; Apple keeps 180 days).", valueName: "time"))
        var since: String?

        @Flag(help: "Append what the ledger lacks.")
        var apply = false

        @Flag(help: "Also report (and with --apply, make) Set App Account Token calls owed for what the ledger attributed late.")
        var setAppAccountTokens = false

        @Flag(help: "Also report (and with --apply, make) Finish Transaction calls owed for delivered StoreKit 2 transactions.")
        var finishTransactions = false

        @Flag(help: "Also report (and with --apply, read and keep) the app transaction of each customer whose Apple has not been read.")
        var readAppTransactions = false

        @Flag(name: .shortAndLong, help: "One JSON object per difference, then a summary object.")
        var json = false

        @OptionGroup var location: LocationArgument

        func validate() throws {
            if let since { _ = try parseTimestamp(since) }
            for name in environment where name != "Production" && name != "Sandbox" {
                throw ValidationError("--environment must be Production or Sandbox, not \"\(name)\"")
            }
            guard Set(environment).count == environment.count else { throw ValidationError("--environment names an environment twice") }
            guard (1...300).contains(timeout) else { throw ValidationError("--timeout must be from 1 to 300 seconds") }
            guard !root.isEmpty else { throw ValidationError("give at least one --root certificate to verify Apple's signed data") }
            if environments.contains(.production), appAppleId == nil {
                throw ValidationError("--app-apple-id is required in Production")
            }
        }

        func run() async throws {
            let report = try await runOrFail { () async throws -> Reconciliation.Report in
                let pem: String
                do {
                    pem = try String(contentsOfFile: keyFile, encoding: .utf8)
                } catch {
                    throw CommandFailure(message: "cannot read the key file \(keyFile)")
                }
                let credentials = AppStoreServerAPICredentials(privateKeyPEM: pem, keyID: keyId, issuerID: issuerId, bundleID: bundleId)
                var logger = Logger(label: "ledger.reconcile")
                logger.logLevel = .warning
                let verifier = AppStoreSignedDataVerifier(
                    trustedRoots: try AppStoreSignedDataVerifier.loadCertificates(paths: root), bundleId: bundleId,
                    appAppleId: appAppleId, environments: environments)
                var sides: [Reconciliation.Side] = []
                for environment in environments {
                    let api: AppStoreServerAPIEnvironment = apiBase.map { .custom(baseURL: $0) } ?? (environment == .production ? .production : .sandbox)
                    let client = try await AppStoreServerAPIClient(
                        credentials: credentials, environment: api, limits: .init(requestTimeout: .seconds(timeout)), logger: logger)
                    sides.append(Reconciliation.Side(environment: environment, client: client, verifier: verifier))
                }
                var configuration = Ledger.Configuration()
                configuration.logger.logLevel = .warning
                let ledger = try location.openLedger(configuration: configuration)
                var reconciliation = Reconciliation(sides: sides, ledger: ledger, logger: logger)
                if setAppAccountTokens || finishTransactions || readAppTransactions {
                    reconciliation.calls = AppStoreCallSettings(
                        setAppAccountTokens: setAppAccountTokens, finishTransactions: finishTransactions, readAppTransactions: readAppTransactions)
                }
                do {
                    let sinceMilliseconds = try since.map(parseTimestamp).map { $0.seconds * 1000 + Int64($0.nanoseconds / 1_000_000) }
                    let report = try await reconciliation.run(apply: apply, since: sinceMilliseconds)
                    await ledger.close()
                    try output(report, requests: reconciliation.requestCount)
                    return report
                } catch {
                    await ledger.close()
                    throw error
                }
            }
            if !report.failures.isEmpty { throw ExitCode(2) }
            if !report.differences.isEmpty { throw ExitCode(1) }
        }

        private func output(_ report: Reconciliation.Report, requests: Int) throws {
            var text = ""
            if json {
                for difference in report.differences { text += difference.json + "\n" }
                var writer = JSONWriter(spaced: true)
                for failure in report.failures {
                    writer.beginObject()
                    writer.member("kind", "failure")
                    writer.member("originalTransaction", failure.originalTransaction)
                    writer.member("detail", failure.reason)
                    writer.endObject()
                    writer.newline()
                }
                writer.beginObject()
                writer.key("summary")
                writer.beginObject()
                writer.member("originalTransactions", Int64(report.originalTransactions))
                writer.member("differences", Int64(report.differences.count))
                writer.member("failures", Int64(report.failures.count))
                writer.member("appended", Int64(report.appended))
                writer.member("requests", Int64(requests))
                writer.endObject()
                writer.endObject()
                writer.newline()
                text += writer.string
            } else {
                for difference in report.differences {
                    text += "\(difference.kind.rawValue)  \(difference.account)  \(difference.originalTransaction)/\(difference.transaction)  \(difference.detail)\n"
                }
                for failure in report.failures { text += "failed  \(failure.originalTransaction)  \(failure.reason)\n" }
                text += "\(report.originalTransactions) original transactions, \(report.differences.count) differences, "
                    + "\(report.failures.count) failures, \(report.appended) events appended, \(requests) API requests\n"
            }
            try Console.output(text)
        }
    }
}
