import ArgumentParser
import PurchaseLedger

extension LedgerCommand {
    /// `ledger prove`: inclusion and consistency proofs (RFC 9162) of the ledger's tree.
    struct Prove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print an inclusion or consistency proof of the ledger's Merkle tree.",
            discussion: """
                --position P: the inclusion proof of position P in the tree of --size N leaves, \
                {"leafIndex": P-1, "treeSize": N, "hashes": [...]} (RFC 9162 §2.1.3, leaf to root). \
                --from M: the consistency proof from the tree of M leaves to that of N, \
                {"fromSize": M, "treeSize": N, "hashes": [...]} (RFC 9162 §2.1.4). N defaults to the newest \
                checkpoint's size, else the whole tree's. Hashes are standard padded base64. Opens the ledger for \
                writing, to extend its tree over every event first. Out of range: exit 2, saying the range.

                Examples:
                  ledger prove --position 42 ./ledger
                  ledger prove --from 1000 --size 2000 ./ledger
                """)

        @Option(help: "The position whose inclusion to prove.")
        var position: UInt64?

        @Option(help: "The size of the older tree, for a consistency proof.")
        var from: UInt64?

        @Option(help: "The size of the tree the proof is in (default: the newest checkpoint's, else the tree's).")
        var size: UInt64?

        @OptionGroup var location: LocationArgument

        func validate() throws {
            guard (position == nil) != (from == nil) else { throw ValidationError("give either --position or --from") }
        }

        func run() async throws {
            try await runOrFail {
                let (position, from, size) = (self.position, self.from, self.size)
                let json = try await location.withProofTree { ledger in
                    if let position {
                        try ledger.inclusionProof(position: position, size: size).json
                    } else {
                        try ledger.consistencyProof(from: from ?? 0, size: size).json
                    }
                }
                try Console.output(json + "\n")
            }
        }
    }
}
