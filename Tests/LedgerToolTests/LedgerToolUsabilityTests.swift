import Foundation
import Testing
import LedgerTestSupport

/// The `ledger` tool as a person meets it (progress, colour, Ctrl-C, columns, messages) and as a
/// script does (`--json` everywhere, nothing but results on a pipe): the built binary, on a
/// terminal (a pseudo-terminal from util-linux's `script`) and on pipes.
struct LedgerToolUsabilityTests {
    static let catalog = LedgerToolTests.fixtures.appendingPathComponent("spec-cases/catalog.json").path

    func ledger(_ arguments: String..., input: Data? = nil) throws -> CommandRun {
        try runCommand(LedgerToolTests.binary("ledger"), arguments, input: input)
    }

    /// `count` valid consumable purchases over 50 accounts, one JSON line each.
    static func purchases(_ count: Int, from first: Int = 1) -> String {
        (first..<first + count).map { index in
            #"{"id":"e\#(index)","type":"paymentAdded","account":"u\#(index % 50)","at":"2026-01-01T00:00:00Z","payment":"p\#(index)","product":"com.example.gem"}"#
        }.joined(separator: "\n") + "\n"
    }

    /// Runs the binary on a pseudo-terminal (standard output and error both), as a person at a
    /// terminal would: what the terminal received, and the exit status.
    /// `redirect` is shell text after the command (`> file`: standard output to a file while
    /// standard error stays on the terminal).
    func onTerminal(_ arguments: [String], redirect: String = "", environment: [String: String] = [:]) throws -> (status: Int32, screen: String) {
        let quoted = ([LedgerToolTests.binary("ledger").path] + arguments).map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }
        var variables = ProcessInfo.processInfo.environment
        variables.removeValue(forKey: "NO_COLOR")
        variables["TERM"] = "xterm-256color"
        for (name, value) in environment { variables[name] = value }
        let terminal = try ChildProcess(
            "/usr/bin/script", ["-qec", quoted.joined(separator: " ") + " " + redirect, "/dev/null"], environment: variables, output: .pipe)
        let screen = terminal.output?.readDataToEndOfFile() ?? Data()
        return (terminal.waitUntilExit().status, String(decoding: screen, as: UTF8.self))
    }

    /// A new directory for one test, removed afterwards.
    func withTemporaryDirectory<R>(_ body: (String) throws -> R) throws -> R {
        let path = try makeTemporaryDirectory()
        defer { removeTree(path) }
        return try body(path)
    }

    func withLedger<R>(events: Int, _ body: (URL, String) throws -> R) throws -> R {
        try withTemporaryDirectory { directory in
            let url = URL(fileURLWithPath: directory)
            let input = url.appendingPathComponent("events.jsonl")
            try Data(Self.purchases(events).utf8).write(to: input)
            let path = url.appendingPathComponent("ledger").path
            let imported = try ledger("import", "--catalog", Self.catalog, path, input.path)
            try #require(imported.status == 0, "\(imported.error)")
            return try body(url, path)
        }
    }

    // MARK: Progress

    @Test func longWorkShowsProgressOnATerminalAndNothingOnAPipe() throws {
        try withTemporaryDirectory { directory in
            let url = URL(fileURLWithPath: directory)
            let input = url.appendingPathComponent("events.jsonl")
            try Data(Self.purchases(10_000).utf8).write(to: input)
            let path = url.appendingPathComponent("ledger").path

            let imported = try onTerminal(["import", "--batch-size", "500", "--catalog", Self.catalog, path, input.path])
            #expect(imported.status == 0, "\(imported.screen)")
            // The first batch is drawn at once: the file's size gives a percentage.
            #expect(imported.screen.contains("\r\u{1B}[Kimporting"), "\(imported.screen)")
            #expect(imported.screen.range(of: #"importing +\d+% · [\d,]+ lines"#, options: .regularExpression) != nil, "\(imported.screen)")
            #expect(imported.screen.contains("imported 10,000 lines"))

            let verified = try onTerminal(["verify", path])
            #expect(verified.status == 0, "\(verified.screen)")
            #expect(verified.screen.range(of: #"verifying +\d+% · [\d,]+ of 10,000 events"#, options: .regularExpression) != nil, "\(verified.screen)")

            let replayed = try onTerminal(["replay", "--no-snapshot", path])
            #expect(replayed.screen.range(of: #"replaying +\d+% · [\d,]+ of 10,000 events"#, options: .regularExpression) != nil, "\(replayed.screen)")

            let copied = try onTerminal(["copy", path, url.appendingPathComponent("copy").path])
            #expect(copied.status == 0, "\(copied.screen)")
            #expect(copied.screen.range(of: #"copying +\d+% · [\d,]+ of 10,000 events"#, options: .regularExpression) != nil, "\(copied.screen)")
            #expect(copied.screen.range(of: #"verifying the copy +\d+%"#, options: .regularExpression) != nil, "\(copied.screen)")

            // An export to a file shows progress on the terminal, and the file holds only events.
            let file = url.appendingPathComponent("export.jsonl")
            let exported = try onTerminal(["export", path], redirect: "> '\(file.path)'")
            #expect(exported.status == 0, "\(exported.screen)")
            #expect(exported.screen.range(of: #"exporting +\d+% · [\d,]+ of 10,000 events"#, options: .regularExpression) != nil, "\(exported.screen)")
            let lines = try String(contentsOf: file, encoding: .utf8).split(separator: "\n")
            #expect(lines.count == 10_000 && lines.allSatisfy { $0.hasPrefix("{") && !$0.contains("\r") })
            // On the terminal itself, the events are the output: no progress line among them.
            let onScreen = try onTerminal(["export", path])
            #expect(!onScreen.screen.contains("exporting"))

            // On pipes: results only, no carriage return.
            for run in [try ledger("verify", path), try ledger("replay", "--no-snapshot", path), try ledger("export", path)] {
                #expect(run.status == 0)
                #expect(!run.error.contains("\r") && !run.text.contains("\r"))
            }
        }
    }

    /// Ctrl-C in an import says how far it is durable and that running it again continues; it does.
    @Test func ctrlCInAnImportSaysWhereItStoppedAndARunAgainContinues() throws {
        try withTemporaryDirectory { directory in
            let url = URL(fileURLWithPath: directory)
            let path = url.appendingPathComponent("ledger").path
            let report = url.appendingPathComponent("report.jsonl")
            let process = try ChildProcess(
                LedgerToolTests.binary("ledger"), ["import", "--batch-size", "10", "--catalog", Self.catalog, "--report", report.path, path, "-"],
                input: .pipe, error: .pipe)
            // Thirty lines, and the input left open: the import answers them, then waits for more.
            try process.input?.write(contentsOf: Data(Self.purchases(30).utf8))
            let deadline = Date().addingTimeInterval(30)
            while (try? String(contentsOf: report, encoding: .utf8))?.split(separator: "\n").count ?? 0 < 30, Date() < deadline {
                Thread.sleep(forTimeInterval: 0.02)
            }
            process.send(SIGINT)
            let message = String(decoding: process.error?.readDataToEndOfFile() ?? Data(), as: UTF8.self)
            #expect(process.waitUntilExit() == .exited(130))
            #expect(message.contains("ledger: interrupted: lines 1–30 of this import are durable in \(path)"), "\(message)")
            #expect(message.contains("run the same import again to continue"), "\(message)")

            // Run again with all fifty lines: the thirty durable ones answer duplicate.
            let again = try ledger("import", "--json", path, "-", input: Data(Self.purchases(50).utf8))
            #expect(again.status == 0, "\(again.error)")
            let summary = try #require(try JSONSerialization.jsonObject(with: again.output) as? [String: Any])
            #expect(summary["duplicates"] as? Int == 30)
            #expect(summary["appended"] as? Int == 20)
            #expect(summary["position"] as? Int == 50)
        }
    }

    // MARK: JSON everywhere

    @Test func everyCommandAnswersJSON() throws {
        try withLedger(events: 120) { directory, path in
            func object(_ run: CommandRun) throws -> [String: Any] {
                #expect(run.status == 0, "\(run.error)")
                return try #require(try JSONSerialization.jsonObject(with: run.output) as? [String: Any], "\(run.text)")
            }
            let more = directory.appendingPathComponent("more.jsonl")
            try Data((Self.purchases(2, from: 120) + "not json\n").utf8).write(to: more)
            let imported = try object(try ledger("import", "--json", path, more.path))
            #expect(imported["lines"] as? Int == 3)
            #expect(imported["appended"] as? Int == 1)
            #expect(imported["duplicates"] as? Int == 1)
            #expect(imported["rejected"] as? Int == 1)
            #expect((imported["rejections"] as? [String: Int]) == ["invalidEvent": 1])
            let first = try #require((imported["firstRejections"] as? [[String: Any]])?.first)
            #expect(first["line"] as? Int == 3)
            #expect((first["message"] as? String)?.isEmpty == false)

            let stats = try object(try ledger("stats", "-j", path))
            #expect(stats["events"] as? Int == 121)
            #expect(stats["accounts"] as? Int == 50)

            // The import wrote a snapshot as it closed: none is needed.
            let snapshot = try object(try ledger("snapshot", "--json", path))
            #expect(snapshot["position"] as? Int == 121)
            #expect(snapshot["written"] as? Bool == false)

            let verified = try object(try ledger("verify", "--json", path))
            #expect(verified["intact"] as? Bool == true)
            #expect(verified["intactRecords"] as? Int == 121)

            let copied = try object(try ledger("copy", "--json", path, directory.appendingPathComponent("copy").path))
            #expect(copied["copied"] as? Int == 121)
            #expect(copied["verified"] as? Bool == true)

            let replay = try object(try ledger("replay", "--json", path))
            #expect(replay["position"] as? Int == 121)

            // A report on standard output and a JSON summary there too would mix: refused.
            #expect(try ledger("import", "--json", "--report", "-", path, more.path).status == 64)
        }
    }

    // MARK: For people: colour, columns, summaries, messages

    @Test func colourOnATerminalOnlyAndNeverWithNoColor() throws {
        try withLedger(events: 10) { _, path in
            let coloured = try onTerminal(["replay", path])
            #expect(coloured.status == 0)
            #expect(coloured.screen.contains("\u{1B}[1m"), "\(coloured.screen)")
            let history = try onTerminal(["history", "--account", "u1", path])
            #expect(history.screen.contains("\u{1B}[36mpaymentAdded"), "\(history.screen)")

            let plain = try onTerminal(["replay", path], environment: ["NO_COLOR": "1"])
            #expect(plain.status == 0)
            #expect(!plain.screen.contains("\u{1B}["), "\(plain.screen)")
            let piped = try ledger("replay", path)
            #expect(!piped.text.contains("\u{1B}") && !piped.error.contains("\u{1B}"))
        }
    }

    @Test func replayBeginsWithASummaryAndHistoryColumnsLineUp() throws {
        try withTemporaryDirectory { directory in
            let url = URL(fileURLWithPath: directory)
            let input = url.appendingPathComponent("events.jsonl")
            let lines = [
                #"{"id":"a1","type":"paymentAdded","account":"u","at":"2026-01-01T00:00:00Z","payment":"p1","product":"com.example.hardwords"}"#,
                #"{"id":"a2","type":"transactionUpdated","account":"u","at":"2026-01-01T00:00:01Z","payment":"p1","state":"purchased","transaction":"t1"}"#,
                #"{"id":"a3","type":"transactionFinished","account":"u","at":"2026-01-01T00:00:02Z","payment":"p1"}"#,
                #"{"id":"b1","type":"paymentAdded","account":"v","at":"2026-01-01T00:00:03Z","payment":"p2","product":"com.example.gem"}"#,
            ]
            try Data((lines.joined(separator: "\n") + "\n").utf8).write(to: input)
            let path = url.appendingPathComponent("ledger").path
            #expect(try ledger("import", "--catalog", Self.catalog, path, input.path).status == 0)

            let replay = try ledger("replay", path).text.split(separator: "\n").map(String.init)
            #expect(replay.first?.hasPrefix("position 4, as of ") == true, "\(replay)")
            #expect(replay.dropFirst().first == "2 accounts · 1 with entitlements (1 in all) · 1 unfinished transaction", "\(replay)")

            let history = try ledger("history", "--account", "u", path).text.split(separator: "\n").map(String.init)
            #expect(history.count == 4, "\(history)")
            #expect(history.first?.hasPrefix("position  at") == true, "\(history)")
            // Each column starts at the same place on every line.
            let types = history.dropFirst().map { $0.range(of: "transaction") ?? $0.range(of: "payment") }
            let offsets = Set(zip(history.dropFirst(), types).compactMap { line, range in range.map { line.distance(from: line.startIndex, to: $0.lowerBound) } })
            #expect(offsets.count == 1, "\(history)")
            let details = history.dropFirst().compactMap { line in line.range(of: "p1").map { line.distance(from: line.startIndex, to: $0.lowerBound) } }
            #expect(Set(details).count == 1, "\(history)")
        }
    }

    /// `replay --account A --timeline`: the support engineer's one command, on a terminal and
    /// with `--json`, on the valid-time spec case's upgrade (basic renewed, then upgraded to pro).
    @Test func aTimelineSaysWhenEachProductWasOwnedAndWhy() throws {
        try withTemporaryDirectory { directory in
            let path = URL(fileURLWithPath: directory).appendingPathComponent("ledger").path
            let stream = LedgerToolTests.fixtures.appendingPathComponent("spec-cases/07_valid_time.jsonl").path
            #expect(try ledger("import", "--catalog", Self.catalog, path, stream).status == 0)

            let json = try ledger("replay", "--json", "--account", "uc", "--timeline", path)
            #expect(json.status == 0, "\(json.error)")
            let document = try #require(try JSONSerialization.jsonObject(with: json.output) as? [String: Any])
            let account = try #require((document["accounts"] as? [String: Any])?["uc"] as? [String: Any])
            let timeline = try #require(account["timeline"] as? [[String: Any]])
            #expect(timeline.map { $0["product"] as? String } == ["com.example.plus.basic", "com.example.plus.pro"])
            let intervals = timeline.map { ($0["intervals"] as? [[String: Any]] ?? []).map {
                "\($0["from"] as? String ?? "-") \($0["fromCause"] as? String ?? "-") \($0["until"] as? String ?? "-") \($0["untilCause"] as? String ?? "-") \($0["transaction"] as? String ?? "-")"
            } }
            #expect(intervals == [
                ["2025-06-02T10:05:00Z purchase 2025-06-02T10:10:00Z renewal C1",
                 "2025-06-02T10:10:00Z renewal 2025-06-02T10:15:00Z upgrade C2"],
                ["2025-06-02T10:15:00Z upgrade 2025-06-02T11:15:00Z expiry C3"],
            ])

            let text = try ledger("replay", "--account", "uc", "--timeline", path).text.split(separator: "\n").map(String.init)
            let bars = text.filter { $0.contains("|") }
            #expect(bars.count == 2, "\(text)")
            // The bars line up, and the renewal and the upgrade are each on a line of their own.
            #expect(Set(bars.compactMap { line in line.firstIndex(of: "|").map { line.distance(from: line.startIndex, to: $0) } }).count == 1, "\(bars)")
            #expect(text.contains { $0.contains("renewal → upgrade") && $0.contains("C2") }, "\(text)")
            #expect(text.contains { $0.contains("upgrade → expiry") && $0.contains("C3") }, "\(text)")

            let alone = try ledger("replay", "--timeline", path)
            #expect(alone.status == 64, "--timeline needs --account")
        }
    }

    @Test func aBadCatalogIsNamedWithItsLineAndColumn() throws {
        try withTemporaryDirectory { directory in
            let url = URL(fileURLWithPath: directory)
            let catalog = url.appendingPathComponent("Products.json")
            try Data("{\"products\": [\n  {\"id\": }\n]}\n".utf8).write(to: catalog)
            let input = url.appendingPathComponent("events.jsonl")
            try Data(Self.purchases(1).utf8).write(to: input)
            let run = try ledger("import", "--catalog", catalog.path, url.appendingPathComponent("ledger").path, input.path)
            #expect(run.status == 2)
            #expect(run.error.contains("\(catalog.path): the catalog is not valid JSON"), "\(run.error)")
            #expect(run.error.contains("at line 2, column 10"), "\(run.error)")
        }
    }

    /// swift-argument-parser's conventions: lowercase placeholders, short flags for the common options.
    @Test(arguments: ["import", "replay", "export", "verify", "history", "changes", "webhooks", "stats", "snapshot", "copy", "attribute", "transfer", "reconcile"])
    func helpUsesOnePlaceholderStyle(_ command: String) throws {
        let help = try ledger(command, "--help").text
        #expect(help.range(of: #"<[A-Z_]+>"#, options: .regularExpression) == nil, "\(help)")
    }

    @Test func commonOptionsHaveShortFlags() throws {
        let importHelp = try ledger("import", "--help").text
        #expect(importHelp.contains("-c, --catalog <file>"), "\(importHelp)")
        #expect(importHelp.contains("-r, --report <file>"), "\(importHelp)")
        #expect(importHelp.contains("-b, --batch-size <count>"), "\(importHelp)")
        let replayHelp = try ledger("replay", "--help").text
        #expect(replayHelp.contains("-a, --account <account>"), "\(replayHelp)")
        #expect(replayHelp.contains("-p, --position <position>"), "\(replayHelp)")
        #expect(replayHelp.contains("-j, --json"), "\(replayHelp)")
    }
}
