import ArgumentParser
import PurchaseLedgerLocation

extension LedgerCommand {
    struct Export: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write the log as JSON Lines to standard output.",
            discussion: """
                One canonical line per event, in log order: fields in the format's order, timestamps in UTC. \
                The output re-imports to the same log, and exporting that gives the same bytes.

                Writing to a file from a terminal, a progress line shows how far the export is.

                Example:
                  ledger export ./ledger > events.jsonl
                """)

        @Flag(help: "Write each position's leaf of the Merkle tree instead: every name as its pseudonym, with the account's commitment and its previous event (opens the ledger for writing, to extend its tree first).")
        var asForgotten = false

        @OptionGroup var location: LocationArgument

        func run() async throws {
            try await runOrFail {
                if asForgotten { _ = try await location.withProofTree { try $0.proofTreeSize() } }
                let log = try location.openLog()
                defer { log.close() }
                let last = try log.lastPosition()
                // Only when the events go to a file or a pipe: on the terminal they are the output.
                let progress = ProgressLine("exporting", unit: "events", shown: Console.errorIsTerminal && !Console.outputIsTerminal)
                Interruption.onInterrupt {
                    "the export stopped near position \(grouped(progress.done)) of \(grouped(last)): the output is incomplete"
                }
                if asForgotten {
                    try log.exportAsForgotten(progress: { progress.update($0, of: last) }) { try Console.output(bytes: $0) }
                } else {
                    try log.exportJSONLines(progress: { progress.update($0, of: last) }) { try Console.output(bytes: $0) }
                }
                progress.clear()
            }
        }
    }
}
