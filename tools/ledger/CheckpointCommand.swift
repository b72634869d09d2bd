import ArgumentParser
import PurchaseLedger

extension LedgerCommand {
    /// `ledger checkpoint`: signs the ledger's head (issue 44, docs/FORMAT.md "The proof tree").
    struct Checkpoint: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Sign a checkpoint of the ledger's head and keep it beside the log.",
            discussion: """
                Extends the ledger's Merkle tree over every event, signs a C2SP tlog-checkpoint of it (origin, \
                size, root) as a signed note with the key, keeps it beside the log (every one signed is kept) and \
                writes the note's bytes to standard output. Opens the ledger for writing.

                Examples:
                  ledger checkpoint --key checkpoint.key ./ledger > head.note
                  ledger checkpoint --json --key checkpoint.key --origin ledger.example.com/purchases ./ledger
                """)

        @Option(help: ArgumentHelp("The signer key (ledger checkpoint-key generate).", valueName: "file"))
        var key: String

        @Option(help: "The checkpoint's origin line (default: the key's name).")
        var origin: String?

        @OptionGroup var format: OutputFormat
        @OptionGroup var location: LocationArgument

        func run() async throws {
            try await runOrFail {
                let signer = try NoteSigner(text: try readKeyFile(key))
                let stored = try await location.withProofTree { try await $0.signCheckpoint(with: signer, origin: origin) }
                if format.json {
                    var writer = JSONWriter(spaced: true)
                    writer.beginObject()
                    writer.member("note", stored.note)
                    writer.member("size", Int64(clamping: stored.size))
                    writer.member("root", stored.checkpoint?.root.base64 ?? "")
                    writer.endObject()
                    try Console.output(writer.string + "\n")
                } else {
                    try Console.output(stored.note)
                }
            }
        }
    }

    /// `ledger checkpoints`: the checkpoints signed so far.
    struct Checkpoints: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the checkpoints signed so far, oldest first.",
            discussion: """
                Text: a line each (size, when it was signed, its root). --json: [{"size", "signedAt", "note"}, ...].

                Examples:
                  ledger checkpoints ./ledger
                  ledger checkpoints --json ./ledger
                """)

        @OptionGroup var format: OutputFormat
        @OptionGroup var location: LocationArgument

        func run() async throws {
            try await runOrFail {
                let log = try location.openLog()
                defer { log.close() }
                let checkpoints = try log.checkpoints()
                if format.json {
                    try Console.output(StoredCheckpoint.json(checkpoints) + "\n")
                } else {
                    var text = ""
                    for stored in checkpoints {
                        text += "\(grouped(stored.size).padding(left: 12))  \(stored.signedAt)  \(stored.checkpoint?.root.base64 ?? "?")\n"
                    }
                    try Console.output(text)
                }
            }
        }
    }
}
