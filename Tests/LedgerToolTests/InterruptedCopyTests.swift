import Foundation
import LedgerTestSupport
import Testing

/// `ledger copy` killed part-way (SIGKILL: no handler runs) left a destination that verified
/// "intact" with part of the source's records, and that a second run refused. The destination
/// is now marked an incomplete copy until it is verified: nothing else opens it, and the same
/// command resumes it.
struct InterruptedCopyTests {
    let tool = LedgerToolTests()

    @Test(arguments: LedgerToolTests.backends)
    func aKilledCopyIsRefusedEverywhereAndResumed(to destination: String) throws {
        try tool.withDirectory { directory in
            let catalog = directory.appendingPathComponent("catalog.json")
            try Data(#"{"products": [{"id": "coins", "type": "consumable", "grants": {"coins": 10}}]}"#.utf8).write(to: catalog)
            let count = 60_000
            var lines = ""
            for index in 0..<count {
                lines += #"{"id":"e\#(index)","type":"paymentAdded","account":"u\#(index % 500)","at":"2026-01-01T00:00:00Z","payment":"p\#(index)","product":"coins"}"# + "\n"
            }
            let events = directory.appendingPathComponent("events.jsonl")
            try Data(lines.utf8).write(to: events)
            let source = directory.appendingPathComponent("source").path
            #expect(try tool.ledger("import", "--catalog", catalog.path, source, events.path).status == 0)

            try tool.withLedgerLocation(destination, in: directory, name: "copy") { copy in
                // One event a commit, so that the copy is still running when it is killed.
                let process = Process()
                process.executableURL = LedgerToolTests.binary("ledger")
                process.arguments = ["copy", "--batch-size", "1", source, copy]
                process.standardOutput = FileHandle.nullDevice
                process.standardError = FileHandle.nullDevice
                try process.run()
                Thread.sleep(forTimeInterval: 1.5)
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
                #expect(process.terminationReason == .uncaughtSignal)

                for command in [["verify"], ["replay", "--json"], ["export"]] {
                    let refused = try tool.run("ledger", command + [copy])
                    #expect(refused.status == 2, "\(command): \(refused.error)")
                    #expect(refused.error.contains("incomplete copy"), "\(command): \(refused.error)")
                }

                let resumed = try tool.ledger("copy", source, copy)
                #expect(resumed.status == 0, "\(resumed.error)")
                #expect(resumed.error.contains("resuming"))
                #expect(try tool.ledger("verify", copy).status == 0)
                #expect(try tool.ledger("export", copy).output == tool.ledger("export", source).output)
                let again = try tool.ledger("copy", source, copy)
                #expect(again.error.contains("already holds a ledger"))
            }
        }
    }
}
