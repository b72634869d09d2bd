import Dispatch
import Foundation
import LedgerTestSupport
import Testing

/// `ledger copy` killed part-way (SIGKILL: no handler runs) left a destination that verified
/// "intact" with part of the source's records, and that a second run refused. The destination
/// is now marked an incomplete copy until it is verified: nothing else opens it, and the same
/// command resumes it. (Async, the commands awaited on Dispatch threads: a test that blocks one of
/// Swift concurrency's few threads for seconds starves the in-process servers of other suites.)
struct InterruptedCopyTests {
    let tool = LedgerToolTests()

    func ledger(_ arguments: String...) async throws -> CommandRun {
        try await awaitCommand(LedgerToolTests.binary("ledger"), arguments)
    }

    @Test(arguments: LedgerToolTests.backends)
    func aKilledCopyIsRefusedEverywhereAndResumed(to destination: String) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ledger-copy-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let catalog = directory.appendingPathComponent("catalog.json")
        try Data(#"{"products": [{"id": "coins", "type": "consumable", "grants": {"coins": 10}}]}"#.utf8).write(to: catalog)
        var lines = ""
        for index in 0..<30_000 {
            lines += #"{"id":"e\#(index)","type":"paymentAdded","account":"u\#(index % 500)","at":"2026-01-01T00:00:00Z","payment":"p\#(index)","product":"coins"}"# + "\n"
        }
        let events = directory.appendingPathComponent("events.jsonl")
        try Data(lines.utf8).write(to: events)
        let source = directory.appendingPathComponent("source").path
        #expect(try await ledger("import", "--catalog", catalog.path, source, events.path).status == 0)

        let copy = try tool.makeLedgerLocation(destination, in: directory, name: "copy")
        defer { tool.dropLedgerLocation(copy) }
        // One event a commit, so that the copy is still running when it is killed (30,000 of
        // them take this debug build about 28 s on a disk; the kill comes at 1.5 s). The kill
        // is sent from a Dispatch timer, not after a task's sleep: on a machine running every
        // suite at once, Swift concurrency's threads may all be busy long past 1.5 s, and the
        // copy had finished when a task woke to kill it.
        let process = try ChildProcess(LedgerToolTests.binary("ledger"), ["copy", "--batch-size", "1", source, copy])
        DispatchQueue.global().asyncAfter(deadline: .now() + 1.5) { process.send(SIGKILL) }
        #expect(await process.exit() == .signalled(SIGKILL))

        for command in [["verify"], ["replay", "--json"], ["export"]] {
            let refused = try await awaitCommand(LedgerToolTests.binary("ledger"), command + [copy])
            #expect(refused.status == 2, "\(command): \(refused.error)")
            #expect(refused.error.contains("incomplete copy"), "\(command): \(refused.error)")
        }

        let resumed = try await ledger("copy", source, copy)
        #expect(resumed.status == 0, "\(resumed.error)")
        #expect(resumed.error.contains("resuming"))
        #expect(try await ledger("verify", copy).status == 0)
        #expect(try await ledger("export", copy).output == ledger("export", source).output)
        let again = try await ledger("copy", source, copy)
        #expect(again.error.contains("already holds a ledger"))
    }
}
