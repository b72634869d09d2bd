import ArgumentParser
import Foundation
import Logging
import PurchaseLedger
import PurchaseLedgerLocation

extension LedgerCommand {
    struct Webhooks: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List, resend or drop the webhook deliveries that were parked.",
            discussion: """
                A change an endpoint did not acknowledge in its maxAttempts is parked in the ledger, with its \
                last error (docs/FEEDS.md). retry and skip write to the ledger: on LMDB, stop the server \
                first (it holds the writer lock); on PostgreSQL, the server delivering for the endpoint \
                sends the retried changes within a second.
                """,
            subcommands: [Parked.self, Retry.self, Skip.self])
    }
}

/// A parked change of one of `ledger-server`'s endpoints, as `ledger webhooks` lists and moves
/// it (`WebhookState`: `webhooks/<endpoint>/parked/<id>`, and `…/retry/<id>` to send again).
struct ParkedChange {
    var key: String
    var endpoint: String
    var parked: WebhookState.Parked
    /// The stored bytes, moved as they are to `…/retry/<id>`.
    var value: [UInt8]

    var id: String { parked.id }

    /// Nil for a key that is not a parked change's; a value that does not decode is damage.
    init?(key: String, value: [UInt8]) throws {
        guard let endpoint = WebhookState.parkedEndpoint(ofKey: key),
              let parked = try WebhookState.decode(WebhookState.Parked.self, value, key: key) else { return nil }
        self.key = key
        self.endpoint = endpoint
        self.parked = parked
        self.value = value
    }

    static func all(in states: [(key: String, value: [UInt8])], endpoint: String?) throws -> [ParkedChange] {
        try states.compactMap { try ParkedChange(key: $0.key, value: $0.value) }.filter { endpoint == nil || $0.endpoint == endpoint }
    }
}

/// Which parked changes a command acts on.
struct ParkedSelection: ParsableArguments {
    @Option(name: .shortAndLong, help: ArgumentHelp("The endpoint's name.", valueName: "name"))
    var endpoint: String

    @Option(help: ArgumentHelp("A parked change's id (repeatable).", valueName: "id"))
    var id: [String] = []

    @Flag(help: "Every change parked for the endpoint.")
    var all = false

    func validate() throws {
        guard all != !id.isEmpty else { throw ValidationError("give --id (one or more) or --all") }
    }

    func selected(_ parked: [ParkedChange]) -> [ParkedChange] {
        all ? parked : parked.filter { id.contains($0.id) }
    }

    /// Opens the ledger for writing and runs `body` on the selected changes in one transaction.
    func update(_ location: LocationArgument, _ body: @escaping @Sendable (FeedStateTransaction, ParkedChange) throws -> Void) async throws -> Int {
        var configuration = Ledger.Configuration()
        configuration.logger.logLevel = .warning
        configuration.snapshotOnClose = false
        let ledger = try location.openLedger(configuration: configuration)
        do {
            let endpoint = self.endpoint
            let chosen = selected(try ParkedChange.all(in: try ledger.feedStates(prefix: WebhookState.parkedPrefix(endpoint)), endpoint: endpoint))
            let keys = chosen.map(\.key)
            let count = try await ledger.updateFeedState { state in
                var done = 0
                for key in keys {
                    guard let value = try state.value(key), let parked = try ParkedChange(key: key, value: value) else { continue }
                    try body(state, parked)
                    done += 1
                }
                return done
            }
            await ledger.close()
            return count
        } catch {
            await ledger.close()
            throw error
        }
    }
}

extension LedgerCommand.Webhooks {
    struct Parked: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the parked deliveries.",
            discussion: """
                Examples:
                  ledger webhooks parked ./ledger
                  ledger webhooks parked --endpoint game-backend --json postgres://ledger@db/store
                """)

        @Option(name: .shortAndLong, help: ArgumentHelp("Only this endpoint's.", valueName: "name"))
        var endpoint: String?

        @OptionGroup var format: OutputFormat
        @OptionGroup var location: LocationArgument

        func run() async throws {
            try await runOrFail {
                let log = try location.openLog()
                defer { log.close() }
                let parked = try ParkedChange.all(in: try log.feedStates(prefix: WebhookState.prefix), endpoint: endpoint)
                if format.json {
                    var writer = JSONWriter(spaced: false)
                    for change in parked {
                        writer.beginObject()
                        writer.member("endpoint", change.endpoint)
                        writer.member("id", change.id)
                        writer.member("account", change.parked.account)
                        writer.member("attempts", Int64(change.parked.attempts))
                        writer.member("error", change.parked.error)
                        writer.member("parkedAt", change.parked.parkedAt)
                        writer.endObject()
                        writer.newline()
                    }
                    try Console.output(writer.string)
                } else if parked.isEmpty {
                    try Console.output("no parked deliveries\n")
                } else {
                    for change in parked {
                        let parked = change.parked
                        try Console.output("\(change.endpoint)  \(change.id)  \(parked.account)  \(parked.attempts) attempts  \(parked.error)  parked \(parked.parkedAt)\n")
                    }
                }
            }
        }
    }

    struct Retry: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Send parked deliveries again (the server sends them, with the endpoint's attempts).",
            discussion: """
                Examples:
                  ledger webhooks retry --endpoint game-backend --all ./ledger
                  ledger webhooks retry --endpoint game-backend --id 42.dTE postgres://ledger@db/store
                """)

        @OptionGroup var selection: ParkedSelection
        @OptionGroup var location: LocationArgument

        func run() async throws {
            try await runOrFail {
                let endpoint = selection.endpoint
                let count = try await selection.update(location) { state, parked in
                    try state.set(WebhookState.retryPrefix(endpoint) + parked.id, parked.value)
                    try state.set(parked.key, nil)
                }
                try Console.output("\(count) parked \(count == 1 ? "delivery" : "deliveries") to send again\n")
            }
        }
    }

    struct Skip: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Drop parked deliveries: they are not sent again.",
            discussion: """
                Examples:
                  ledger webhooks skip --endpoint game-backend --id 42.dTE ./ledger
                """)

        @OptionGroup var selection: ParkedSelection
        @OptionGroup var location: LocationArgument

        func run() async throws {
            try await runOrFail {
                let count = try await selection.update(location) { state, parked in try state.set(parked.key, nil) }
                try Console.output("\(count) parked \(count == 1 ? "delivery" : "deliveries") dropped\n")
            }
        }
    }
}
