import ArgumentParser
import PurchaseLedger

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension LedgerCommand {
    /// `ledger checkpoint-key`: the key that signs a ledger's checkpoints (issue 44).
    struct CheckpointKey: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "checkpoint-key",
            abstract: "Make the key that signs a ledger's checkpoints.",
            subcommands: [Generate.self])

        struct Generate: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Write a new Ed25519 signer key and print its verifier key.",
                discussion: """
                    The signer key goes to --out, readable by its owner only (mode 0600); an existing file is \
                    never overwritten. The verifier key, one line on standard output, is what auditors hold: \
                    anyone with it checks a checkpoint without trusting the server. Both are in the text form of \
                    Go's golang.org/x/mod/sumdb/note (PRIVATE+KEY+<name>+<hash>+<key>, <name>+<hash>+<key>), \
                    so note.Open and any C2SP signed-note verifier read what it signs. The name is the \
                    checkpoints' origin unless they are given another: a log's name, such as a host and path.

                    Examples:
                      ledger checkpoint-key generate --name ledger.example.com/purchases --out checkpoint.key
                      ledger checkpoint-key generate --json --name ledger.example.com/purchases --out checkpoint.key
                    """)

            @OptionGroup var format: OutputFormat

            @Option(help: "The key's name (no spaces, no \"+\"): by default, the checkpoints' origin.")
            var name: String

            @Option(help: "Where to write the signer key (a new file).")
            var out: String

            func validate() throws {
                guard (try? NoteSigner.generate(name: name)) != nil else {
                    throw ValidationError("--name: a key's name is non-empty, without spaces or \"+\"")
                }
            }

            func run() async throws {
                try await runOrFail {
                    let signer = try NoteSigner.generate(name: name)
                    try Self.writeNew(out, Array((signer.text + "\n").utf8))
                    if format.json {
                        // {"name": "…", "verifierKey": "…", "keyFile": "…"}
                        var writer = JSONWriter(spaced: true)
                        writer.beginObject()
                        writer.member("name", signer.name)
                        writer.member("verifierKey", signer.verifierKey)
                        writer.member("keyFile", out)
                        writer.endObject()
                        try Console.output(writer.string + "\n")
                    } else {
                        try Console.output(signer.verifierKey + "\n")
                    }
                }
            }

            /// Creates `path` for its owner alone and writes `bytes` to disk (fsync), or fails
            /// without touching a file that was there.
            static func writeNew(_ path: String, _ bytes: [UInt8]) throws {
                let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
                guard fd >= 0 else {
                    let reason = errno == EEXIST ? "it exists (a signer key is never overwritten)" : String(cString: strerror(errno))
                    throw CommandFailure(message: "cannot create \(path): \(reason)")
                }
                var written = 0
                var failed: Int32 = 0
                while written < bytes.count, failed == 0 {
                    let count = bytes[written...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
                    if count < 0 {
                        if errno != EINTR { failed = errno }
                    } else {
                        written += count
                    }
                }
                if failed == 0, fsync(fd) != 0 { failed = errno }
                close(fd)
                guard failed == 0 else {
                    unlink(path)
                    throw CommandFailure(message: "cannot write \(path): \(String(cString: strerror(failed)))")
                }
            }
        }
    }
}
