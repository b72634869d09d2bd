import Foundation
import Testing
import LedgerTestSupport

/// The short runs of the reliability tools that CI does on every change (the long ones are
/// `tools/torture` and `tools/fuzz`), and hostile input through the command line.
struct ReliabilityToolTests {
    let tool = LedgerToolTests()

    @Test func twentyKillsLoseNothingAcknowledged() throws {
        let run = try tool.run("ledger-torture", ["crash", "--kills", "20", "--seed", "7", "--maximum-milliseconds", "400"])
        #expect(run.status == 0, "\(run.text)\n\(run.error)")
        #expect(run.text.contains("survived 20 kills"))
        #expect(run.text.contains("events lost: 0"))
    }

    @Test func fuzzedInputIsAlwaysAnswered() throws {
        let run = try tool.run("ledger-torture", ["fuzz", "--inputs", "20000", "--seed", "3"])
        #expect(run.status == 0, "\(run.text)\n\(run.error)")
        #expect(run.text.contains("fuzzed 20000 event inputs"))
    }

    @Test func hostileLinesThroughTheCommandLine() throws {
        try tool.withDirectory { directory in
            let valid = #"{"id":"e1","type":"paymentAdded","account":"u","at":"2026-01-01T00:00:00Z","payment":"p1","product":"com.example.tenhints"}"#
            var lines: [Data] = [
                Data(),                                                          // empty line
                Data([0xFF, 0xFE, 0x00, 0x01]),                                  // binary
                Data(valid.utf8.prefix(40)),                                     // truncated
                Data(valid.replacingOccurrences(of: "\"u\"", with: "\"\u{0}\"").utf8).map { $0 == 0 ? 0xC3 : $0 }.data, // invalid UTF-8
                Data(("{\"id\":\"deep\",\"x\":" + String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000) + "}").utf8),
                Data(#"{"id":"big","type":"consumed","account":"u","at":"2026-01-01T00:00:00Z","item":"hints","amount":1e999999}"#.utf8),
                Data(#"{"id":"q","type":"paymentAdded","account":"u","at":"2026-01-01T00:00:00Z","payment":"p","product":"x","quantity":123456789012345678901234567890}"#.utf8),
                Data(("{\"id\":\"huge\",\"pad\":\"" + String(repeating: "x", count: 10 << 20) + "\"}").utf8),
            ]
            lines.append(Data(valid.utf8))
            var file = Data()
            for line in lines { file.append(line); file.append(0x0A) }
            let events = directory.appendingPathComponent("hostile.jsonl")
            try file.write(to: events)
            let catalog = LedgerToolTests.fixtures.appendingPathComponent("spec-cases/catalog.json").path
            let ledgerDir = directory.appendingPathComponent("ledger").path
            let run = try tool.ledger("import", "--catalog", catalog, "--report", "-", ledgerDir, events.path)
            #expect(run.status == 0, "\(run.error)")
            let report = run.text.split(separator: "\n")
            #expect(report.count == lines.count, "one answer per line")
            #expect(report.dropLast().allSatisfy { $0.contains("\"invalidEvent\"") || $0.contains("\"insufficientBalance\"") })
            #expect(report.last == #"{"line": 9, "outcome": "appended", "position": 1}"#)
        }
    }
}

private extension Array where Element == UInt8 {
    var data: Data { Data(self) }
}
