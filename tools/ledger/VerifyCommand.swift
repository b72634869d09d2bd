import ArgumentParser
import PurchaseLedger
import PurchaseLedgerLocation
import PurchaseLedgerServer

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

        @Option(name: .customLong("root"), help: ArgumentHelp("A trusted root certificate (DER or PEM) for the store's proofs; repeatable.", valueName: "certificate"))
        var roots: [String] = []

        @Option(help: ArgumentHelp("The app's bundle id, which the proofs must name (with --root).", valueName: "bundle-id"))
        var bundleId: String?

        @Option(help: ArgumentHelp("The app's Apple ID, which production proofs must name.", valueName: "number"))
        var appAppleId: Int64?

        @OptionGroup var format: OutputFormat
        @OptionGroup var location: LocationArgument

        func validate() throws {
            if !roots.isEmpty, bundleId == nil { throw ValidationError("--root needs --bundle-id: the proofs must name the app") }
            if roots.isEmpty, bundleId != nil || appAppleId != nil { throw ValidationError("--bundle-id and --app-apple-id check proofs: give --root too") }
        }

        func run() async throws {
            let (report, proofs) = try await runOrFail { () async throws -> (VerificationReport, StoreProofs.Report?) in
                let log = try location.openLog()
                defer { log.close() }
                let report = log.verify()
                guard report.isIntact, let bundleId, !roots.isEmpty else { return (report, nil) }
                let checker = StoreProofs(
                    trustedRoots: try AppStoreSignedDataVerifier.loadCertificates(paths: roots), bundleId: bundleId, appAppleId: appAppleId)
                var proofs = StoreProofs.Report()
                for try await record in log.records() {
                    await checker.check(record, into: &proofs)
                }
                return (report, proofs)
            }
            try await runOrFail {
                if format.json {
                    var fields = ["\"intact\": \(report.isIntact)", "\"intactRecords\": \(report.intactRecords)"]
                    if let damage = report.damage {
                        fields.append("\"damage\": \"\(damage.kind.rawValue)\"")
                        if let position = damage.position { fields.append("\"position\": \(position)") }
                    }
                    if let proofs {
                        fields.append("\"proven\": \(proofs.proven)")
                        fields.append("\"unproven\": \(proofs.unproven)")
                        let disproven = proofs.disproven.map {
                            "{\"position\": \($0.position), \"id\": \(JSONString.quoted($0.eventID)), \"reason\": \(JSONString.quoted($0.reason))}"
                        }
                        fields.append("\"disproven\": [" + disproven.joined(separator: ", ") + "]")
                    }
                    try Console.output("{" + fields.joined(separator: ", ") + "}\n")
                } else if let damage = report.damage {
                    try Console.output("damaged: \(damage)\n")
                    try Console.output("\(grouped(report.intactRecords)) records intact before it\n")
                } else {
                    try Console.output("intact: \(grouped(report.intactRecords)) records, indexes and rules check out\n")
                    if let proofs {
                        try Console.output("proofs: \(grouped(proofs.proven)) store events proven by Apple's signature, "
                            + "\(grouped(proofs.unproven)) without a proof, \(grouped(proofs.disproven.count)) disproven\n")
                        for failure in proofs.disproven.prefix(20) {
                            try Console.output("  position \(failure.position) [\(failure.eventID)]: \(failure.reason)\n")
                        }
                    }
                }
            }
            if !report.isIntact || proofs?.disproven.isEmpty == false { throw ExitCode.damaged }
        }
    }
}
