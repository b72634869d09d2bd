import Foundation
import Logging
@testable import PurchaseLedgerAppStore
@testable import PurchaseLedgerServer
import Synchronization
import Testing

/// What strangers' input can do to the log: nothing forged, nothing unbounded, no flood.
struct LogSafetyTests {
    /// Keeps every line logged through it.
    final class CapturingHandler: LogHandler, @unchecked Sendable {
        let lines = Mutex<[(message: String, metadata: Logger.Metadata)]>([])
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            lines.withLock { $0.append((event.message.description, event.metadata ?? [:])) }
        }
    }

    @Test func textIsEscapedAndBounded() {
        #expect(LogSafe.text("plain id-42") == "plain id-42")
        #expect(LogSafe.text("a\nlevel=critical msg=forged") == "a\\u{a}level=critical msg=forged")
        #expect(LogSafe.text("\"quoted\" \\ \u{1B}[31m é") == "\\u{22}quoted\\u{22} \\u{5c} \\u{1b}[31m \\u{e9}")
        let long = LogSafe.text(String(repeating: "x", count: 10_000), limit: 200)
        #expect(long == String(repeating: "x", count: 200) + "…(9800 more)")
    }

    @Test func refusalsAreLoggedAtABoundedRateAndTheRestCounted() async throws {
        let handler = CapturingHandler()
        let logger = Logger(label: "test") { _ in handler }
        let refusals = RefusalLog(burst: 5, interval: .seconds(2))
        for index in 0..<100 {
            refusals.warning("refused", metadata: ["n": "\(index)"], logger: logger)
        }
        #expect(handler.lines.withLock { $0.count } == 5)
        try await Task.sleep(for: .milliseconds(2_200))
        refusals.warning("refused", metadata: ["n": "100"], logger: logger)
        let lines = handler.lines.withLock { $0 }
        #expect(lines.count == 7)
        #expect(lines[5].message == "more refusals were not logged")
        #expect(lines[5].metadata["count"] == "95")
        #expect(lines[6].metadata["n"] == "100")
    }
}
