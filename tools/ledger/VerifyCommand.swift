import ArgumentParser
import Foundation
import PurchaseLedger
import PurchaseLedgerLocation
import PurchaseLedgerAppStore

extension LedgerCommand {
    struct Verify: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Check every record and index of a ledger; exit 0 only if the log is intact.",
            discussion: """
                Checks each record's CRC-32C, format version, position and encoding, that positions run \
                without a gap, that every event obeys the rules against the log before it, and that the \
                indexes agree with the log. Reports the first damaged position and the kind of damage; exits 1.

                With --root (and --bundle-id), also checks the proofs the store's events carry: Apple's \
                signed data each was read from must verify, as of when Apple signed it, for this app, and \
                name the event's transaction, product and signing time. Exits 1 when a proof fails.

                Examples:
                  ledger verify /var/lib/store/ledger
                  ledger verify --root AppleRootCA-G3.cer --bundle-id com.example.app --app-apple-id 1234567890 /var/lib/store/ledger
                """)

        @Option(name: .customLong("root"), help: ArgumentHelp("A trusted root certificate (DER or PEM) for the store's proofs; repeatable.", valueName: "file"))
        var roots: [String] = []

        @Option(help: ArgumentHelp("The app's bundle id, which the proofs must name (with --root).", valueName: "bundle-id"))
        var bundleId: String?

        @Option(help: ArgumentHelp("The app's Apple ID, which production proofs must name.", valueName: "id"))
        var appAppleId: Int64?

        @Option(help: ArgumentHelp("A signed checkpoint (ledger checkpoint) the ledger must extend: its tree at that size has that root.", valueName: "file"))
        var checkpoint: String?

        @Option(help: ArgumentHelp("The key the checkpoint is signed with: its verifier key, or a file holding it (with --checkpoint).", valueName: "key"))
        var verifierKey: String?

        @Option(help: ArgumentHelp("The log the checkpoint must name (with --checkpoint; default: the verifier key's name).", valueName: "origin"))
        var origin: String?

        @OptionGroup var format: OutputFormat
        @OptionGroup var location: LocationArgument

        func validate() throws {
            if (checkpoint == nil) != (verifierKey == nil) { throw ValidationError("--checkpoint and --verifier-key go together") }
            if origin != nil, checkpoint == nil { throw ValidationError("--origin checks a checkpoint: give --checkpoint too") }
            if !roots.isEmpty, bundleId == nil { throw ValidationError("--root needs --bundle-id: the proofs must name the app") }
            if roots.isEmpty, bundleId != nil || appAppleId != nil { throw ValidationError("--bundle-id and --app-apple-id check proofs: give --root too") }
        }

        func run() async throws {
            let (report, proofs, checked, treeProblem) = try await runOrFail { () async throws -> (VerificationReport, StoreProofs.Report?, CheckpointVerification?, String?) in
                let log = try location.openLog()
                defer { log.close() }
                let last = try log.lastPosition()
                let progress = ProgressLine("verifying", unit: "events")
                Interruption.onInterrupt {
                    "verify stopped near position \(grouped(progress.done)) of \(grouped(last)); it changes nothing: run it again to check the whole log"
                }
                let report = log.verify { progress.update($0, of: last) }
                progress.clear()
                var checked: CheckpointVerification?
                // The stored proof tree against its records (a checkpoint's check does it too).
                let treeProblem = report.isIntact && checkpoint == nil ? try log.proofTreeProblem() : nil
                if let checkpoint, let verifierKey {
                    let keyText = FileManager.default.fileExists(atPath: verifierKey) ? try readKeyFile(verifierKey) : verifierKey
                    let verifier: NoteVerifier
                    do {
                        verifier = try NoteVerifier(text: keyText)
                    } catch {
                        throw CommandFailure(message: "--verifier-key: not a verifier key (<name>+<hash>+<base64>): \(error)")
                    }
                    guard let note = FileManager.default.contents(atPath: checkpoint), note.count <= 1 << 20 else {
                        throw CommandFailure(message: "cannot read the checkpoint \(checkpoint) (at most 1 MiB)")
                    }
                    checked = try log.verifyCheckpoint(Array(note), verifier: verifier, origin: origin)
                }
                guard report.isIntact, let bundleId, !roots.isEmpty else { return (report, nil, checked, treeProblem) }
                let checker = StoreProofs(
                    trustedRoots: try AppStoreSignedDataVerifier.loadCertificates(paths: roots), bundleId: bundleId, appAppleId: appAppleId)
                var proofs = StoreProofs.Report()
                let proving = ProgressLine("checking proofs", unit: "events")
                for try await record in log.records() {
                    await checker.check(record, into: &proofs)
                    proving.update(record.position, of: last)
                }
                proving.clear()
                return (report, proofs, checked, treeProblem)
            }
            try await runOrFail {
                try Console.output(format.json ? Self.json(report, proofs, checked, treeProblem) + "\n" : Self.text(report, proofs, checked, treeProblem, style: .output))
            }
            if !report.isIntact || proofs?.disproven.isEmpty == false { throw ExitCode.damaged }
            if case .failed? = checked { throw ExitCode.damaged }
            if treeProblem != nil { throw ExitCode.damaged }
        }

        /// `{"intact": true, "intactRecords": 1000, "proven": 2, "unproven": 0, "disproven": []}`; with
        /// damage, `"damage"` (its kind), `"position"` and `"message"`.
        static func json(_ report: VerificationReport, _ proofs: StoreProofs.Report?, _ checked: CheckpointVerification? = nil, _ treeProblem: String? = nil) -> String {
            var writer = JSONWriter(spaced: true)
            writer.beginObject()
            writer.member("intact", report.isIntact)
            writer.member("intactRecords", Int64(report.intactRecords))
            if let damage = report.damage {
                writer.member("damage", damage.kind.rawValue)
                if let position = damage.position { writer.member("position", Int64(position)) }
                writer.member("message", damage.message)
            }
            if let proofs {
                writer.member("proven", Int64(proofs.proven))
                writer.member("unproven", Int64(proofs.unproven))
                writer.key("disproven")
                writer.beginArray()
                for failure in proofs.disproven {
                    writer.beginObject()
                    writer.member("position", Int64(failure.position))
                    writer.member("id", failure.eventID)
                    writer.member("reason", failure.reason)
                    writer.endObject()
                }
                writer.endArray()
            }
            switch checked {
            case .verified(let checkpoint, let treeSize)?:
                writer.key("checkpoint")
                writer.beginObject()
                writer.member("verified", true)
                writer.member("size", Int64(clamping: checkpoint.size))
                writer.member("root", checkpoint.root.base64)
                writer.member("treeSize", Int64(clamping: treeSize))
                writer.endObject()
            case .failed(let reason)?:
                writer.key("checkpoint")
                writer.beginObject()
                writer.member("verified", false)
                writer.member("reason", reason)
                writer.endObject()
            case nil:
                break
            }
            // The stored proof tree is not the one its records make.
            writer.member("proofTreeProblem", ifPresent: treeProblem)
            writer.endObject()
            return writer.string
        }

        static func text(_ report: VerificationReport, _ proofs: StoreProofs.Report?, _ checked: CheckpointVerification? = nil, _ treeProblem: String? = nil, style: Style) -> String {
            let checkpointLine: String = switch checked {
            case .verified(let checkpoint, let treeSize)?:
                "checkpoint: \(style.green("verified")): \(checkpoint.origin), \(grouped(checkpoint.size)) events, root \(checkpoint.root.base64); the ledger's tree of \(grouped(treeSize)) extends it\n"
            case .failed(let reason)?:
                "checkpoint: \(style.red("does not verify")): \(reason)\n"
            case nil:
                ""
            }
            let treeLine = treeProblem.map { "proof tree: \(style.red("not its records'")): \($0)\n" } ?? ""
            return body(report, proofs, style: style) + checkpointLine + treeLine
        }

        private static func body(_ report: VerificationReport, _ proofs: StoreProofs.Report?, style: Style) -> String {
            guard let damage = report.damage else {
                var out = "\(style.green("intact")): \(grouped(report.intactRecords)) records, indexes and rules check out\n"
                if let proofs {
                    let disproven = "\(grouped(proofs.disproven.count)) disproven"
                    out += "proofs: \(grouped(proofs.proven)) store events proven by Apple's signature, "
                        + "\(grouped(proofs.unproven)) without a proof, \(proofs.disproven.isEmpty ? disproven : style.red(disproven))\n"
                    for failure in proofs.disproven.prefix(20) {
                        out += "  position \(failure.position) [\(failure.eventID)]: \(failure.reason)\n"
                    }
                }
                return out
            }
            return "\(style.red("damaged")): \(damage)\n\(grouped(report.intactRecords)) records intact before it\n"
        }
    }
}
