import Foundation
import Testing
import LedgerTestSupport

/// The `ledger` command line, run as a script would: the built binary, its exit status, its
/// standard output and error, files in a temporary directory.
struct LedgerToolTests {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures")
    static let asOf = "2026-01-01T00:00:00Z"

    /// A report line without its `"message"` (the format's fields), and the message.
    static func splitMessage(_ line: String) -> (fields: String, message: String?) {
        guard let range = line.range(of: #", "message": "#, options: .backwards), line.hasSuffix("}") else { return (line, nil) }
        let quoted = Data(line[range.upperBound..<line.index(before: line.endIndex)].utf8)
        let message = (try? JSONSerialization.jsonObject(with: quoted, options: [.fragmentsAllowed])) as? String
        return (String(line[..<range.lowerBound]) + "}", message)
    }

    typealias Run = CommandRun

    /// An executable of this package, next to the test bundle in the build folder.
    static func binary(_ name: String) -> URL {
        builtExecutable(name)
    }

    @discardableResult
    func ledger(_ arguments: String..., input: Data? = nil) throws -> Run {
        try run("ledger", arguments, input: input)
    }

    func run(_ executable: String, _ arguments: [String], input: Data? = nil) throws -> Run {
        try runCommand(Self.binary(executable), arguments, input: input)
    }

    func withDirectory<R>(_ body: (URL) throws -> R) throws -> R {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ledger-tool-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        return try body(directory)
    }

    /// A JSON document as Foundation objects, for comparisons that ignore key order and number spelling.
    func json(_ data: Data) throws -> NSObject {
        try JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed]) as! NSObject
    }

    // MARK: The interchange format's contract, on streams this code did not answer itself

    static var cases: [String] {
        let caseNames = (try? FileManager.default.contentsOfDirectory(atPath: fixtures.appendingPathComponent("spec-cases").path)) ?? []
        let generatedNames = (try? FileManager.default.contentsOfDirectory(atPath: fixtures.appendingPathComponent("generated").path)) ?? []
        let specCases = caseNames.filter { $0.hasSuffix(".report.jsonl") }.map { "spec-cases/" + $0.dropLast(".report.jsonl".count) }
        let generated = generatedNames.filter { $0.hasSuffix(".report.jsonl") }.map { "generated/" + $0.dropLast(".report.jsonl".count) }
        return (specCases + generated).sorted()
    }

    // MARK: Backends

    /// PostgreSQL's test cluster (tools/test starts one), when there is one.
    static let postgresURL: String? = ProcessInfo.processInfo.environment["PURCHASE_LEDGER_TEST_POSTGRES"].flatMap { $0.isEmpty ? nil : $0 }

    /// "lmdb", and "postgres" when a test cluster is at hand.
    static var backends: [String] {
        postgresURL == nil ? ["lmdb"] : ["lmdb", "postgres"]
    }

    /// A place for a new ledger on `backend`: a path in `directory`, or a new database (made
    /// and dropped with psql, as an operator would).
    func withLedgerLocation<R>(_ backend: String, in directory: URL, name: String = "ledger", _ body: (String) throws -> R) throws -> R {
        let location = try makeLedgerLocation(backend, in: directory, name: name)
        defer { dropLedgerLocation(location) }
        return try body(location)
    }

    /// `withLedgerLocation`'s place, made; `dropLedgerLocation` drops a database made so.
    func makeLedgerLocation(_ backend: String, in directory: URL, name: String = "ledger") throws -> String {
        guard backend == "postgres", let admin = Self.postgresURL else {
            return directory.appendingPathComponent(name).path
        }
        let database = "ledger_tool_\(UInt64.random(in: 0...UInt64.max))"
        let created = try run("/usr/bin/env", ["psql", admin, "-qc", "CREATE DATABASE \(database)"])
        try #require(created.status == 0, "psql: \(created.error)")
        let base = admin[..<admin.lastIndex(of: "/")!]
        return "\(base)/\(database)"
    }

    func dropLedgerLocation(_ location: String) {
        guard let admin = Self.postgresURL, location.hasPrefix("postgres"), let database = location.split(separator: "/").last else { return }
        _ = try? run("/usr/bin/env", ["psql", admin, "-qc", "DROP DATABASE \(database) WITH (FORCE)"])
    }

    // MARK: The interchange format's contract, on streams this code did not answer itself

    @Test(arguments: backends, cases)
    func answersLikeTheSpec(on backend: String, _ name: String) throws {
        let base = Self.fixtures.appendingPathComponent(name)
        let folder = base.deletingLastPathComponent()
        let catalog = name.hasPrefix("generated/") ? base.path + ".catalog.json" : folder.appendingPathComponent("catalog.json").path
        try withDirectory { directory in try withLedgerLocation(backend, in: directory) { ledgerDir in
            let report = directory.appendingPathComponent("report.jsonl").path
            let imported = try ledger("import", "--catalog", catalog, "--report", report, ledgerDir, base.path + ".jsonl")
            #expect(imported.status == 0, "\(imported.error)")
            let expectedReport = try String(contentsOfFile: base.path + ".report.jsonl", encoding: .utf8)
            let actualReport = try String(contentsOfFile: report, encoding: .utf8)
            for (index, (expected, actual)) in zip(expectedReport.split(separator: "\n"), actualReport.split(separator: "\n")).enumerated() {
                // The format's fields byte for byte; a rejection adds what was wrong, last.
                let (fields, message) = Self.splitMessage(String(actual))
                #expect(fields == expected, "line \(index + 1)")
                #expect(actual.contains(#""outcome": "rejected""#) == (message?.isEmpty == false), "line \(index + 1): \(actual)")
            }
            #expect(actualReport.split(separator: "\n").count == expectedReport.split(separator: "\n").count)

            var positions: [String?] = [nil]
            if let listed = try? String(contentsOfFile: base.path + ".positions", encoding: .utf8) {
                positions += listed.split(whereSeparator: { $0 == "," || $0.isWhitespace }).map(String.init)
            }
            for position in positions {
                let expected = try json(Data(contentsOf: URL(fileURLWithPath: base.path + ".replay.json" + (position.map { ".\($0)" } ?? ""))))
                let replay = position.map { try? ledger("replay", "--json", "--as-of", Self.asOf, "--position", $0, ledgerDir) }
                    ?? (try? ledger("replay", "--json", "--as-of", Self.asOf, ledgerDir))
                let run = try #require(replay)
                #expect(run.status == 0, "\(run.error)")
                #expect(try json(run.output) == expected, "replay at \(position ?? "the end")")
                // One account, read from its own history, is the full replay's account.
                let accounts = (expected as? [String: Any])?["accounts"] as? [String: Any] ?? [:]
                for account in accounts.keys.sorted().prefix(3) + ["nobody"] {
                    let one = try self.run("ledger", ["replay", "--json", "--as-of", Self.asOf, "--account", account]
                        + (position.map { ["--position", $0] } ?? []) + [ledgerDir])
                    #expect(one.status == 0, "\(one.error)")
                    let wanted: [String: Any] = ["position": (expected as? [String: Any])?["position"] ?? 0,
                                                 "accounts": accounts[account].map { [account: $0] } ?? [:]]
                    #expect(try json(one.output) == (wanted as NSDictionary), "replay --account \(account) at \(position ?? "the end")")
                }
            }

            // Views (`NAME.views`, one per line): an as-of time, perhaps a position and
            // environments, each against the model's `NAME.replay.json.viewK`.
            let views = (try? String(contentsOfFile: base.path + ".views", encoding: .utf8))?
                .split(separator: "\n").filter { !$0.allSatisfy(\.isWhitespace) } ?? []
            for (index, view) in views.enumerated() {
                var arguments = ["replay", "--json"]
                for setting in view.split(separator: " ") {
                    let parts = setting.split(separator: "=", maxSplits: 1).map(String.init)
                    try #require(parts.count == 2, "a view's setting is name=value: \(setting)")
                    arguments += ["--\(parts[0])", parts[1]]
                }
                let run = try self.run("ledger", arguments + [ledgerDir])
                #expect(run.status == 0, "\(run.error)")
                let expected = try json(Data(contentsOf: URL(fileURLWithPath: base.path + ".replay.json.view\(index + 1)")))
                #expect(try json(run.output) == expected, "view \(index + 1): \(view)")
            }

            #expect(try ledger("verify", ledgerDir).status == 0)
            let exported = try ledger("export", ledgerDir)
            let exportFile = directory.appendingPathComponent("export.jsonl")
            try exported.output.write(to: exportFile)
            let copy = directory.appendingPathComponent("copy").path
            #expect(try ledger("import", "--catalog", catalog, copy, exportFile.path).status == 0)
            #expect(try ledger("export", copy).output == exported.output, "export → import → export is byte-identical")
        } }
    }

    /// `ledger copy` between every pair of backends, across a catalog that grew midway: the
    /// copy verifies, exports the same bytes and replays the same projections; a second copy
    /// onto it is refused.
    @Test(arguments: backends, backends)
    func copiesBetweenBackends(from source: String, to destination: String) throws {
        let stream = Self.fixtures.appendingPathComponent("generated/seed2027")
        let catalogJSON = try String(contentsOfFile: stream.path + ".catalog.json", encoding: .utf8)
        try withDirectory { directory in
            let grown = directory.appendingPathComponent("grown.json")
            let extra = #"{"id": "com.example.stars", "type": "consumable", "grants": {"stars": 5}}, "#
            try catalogJSON.replacingOccurrences(of: #""products": ["#, with: #""products": ["# + extra).write(to: grown, atomically: true, encoding: .utf8)
            let lines = try String(contentsOfFile: stream.path + ".jsonl", encoding: .utf8).split(separator: "\n")
            let first = directory.appendingPathComponent("first.jsonl")
            let second = directory.appendingPathComponent("second.jsonl")
            try (lines[..<200].joined(separator: "\n") + "\n").write(to: first, atomically: true, encoding: .utf8)
            try (lines[200...].joined(separator: "\n") + "\n").write(to: second, atomically: true, encoding: .utf8)
            try withLedgerLocation(source, in: directory, name: "source") { from in
                try withLedgerLocation(destination, in: directory, name: "copy") { to in
                    #expect(try ledger("import", "--catalog", stream.path + ".catalog.json", from, first.path).status == 0)
                    #expect(try ledger("import", "--catalog", grown.path, from, second.path).status == 0)
                    let copied = try ledger("copy", from, to)
                    #expect(copied.status == 0, "\(copied.error)")
                    #expect(copied.error.contains("the copy is intact and equal to the source"))
                    #expect(try ledger("verify", to).status == 0)
                    #expect(try ledger("export", to).output == ledger("export", from).output)
                    let replayed = try ledger("replay", "--json", "--as-of", Self.asOf, to)
                    #expect(try json(replayed.output) == json(ledger("replay", "--json", "--as-of", Self.asOf, from).output))
                    // The same change feed, byte for byte: the copy took the source's clock.
                    let feed = try ledger("changes", "-j", from)
                    #expect(feed.status == 0 && !feed.output.isEmpty)
                    #expect(try ledger("changes", "-j", to).output == feed.output)
                    let again = try ledger("copy", from, to)
                    #expect(again.status == 2)
                    #expect(again.error.contains("already holds a ledger"))
                }
            }
        }
    }

    // MARK: Exit codes and messages

    /// The store's events import, export and verify like the others; `replay --environment`
    /// counts only the store's reports from the environments given.
    /// `ledger books`: the figures as JSON (FORMAT.md, "The books") at the head and at an
    /// earlier position, a table for people, and usage errors as such.
    @Test(arguments: backends)
    func booksAtAPositionAndForPeople(on backend: String) throws {
        try withDirectory { directory in try withLedgerLocation(backend, in: directory) { ledgerDir in
            let catalog = directory.appendingPathComponent("catalog.json")
            try Data(#"{"products": [{"id": "pro", "type": "autoRenewable", "group": "g", "period": "P1M"}], "taxRates": {"FRA": 0.2}}"#.utf8)
                .write(to: catalog)
            let events = directory.appendingPathComponent("events.jsonl")
            try Data("""
                {"id":"s1","type":"storeTransaction","account":"u1","at":"2026-01-10T00:00:00Z","transaction":"1","originalTransaction":"1","product":"pro","purchasedAt":"2026-01-10T00:00:00Z","expiresAt":"2026-02-10T00:00:00Z","price":9990,"currency":"EUR","storefront":"FRA"}
                {"id":"s2","type":"storeTransaction","account":"u1","at":"2026-01-20T00:00:00Z","transaction":"1","originalTransaction":"1","product":"pro","purchasedAt":"2026-01-10T00:00:00Z","expiresAt":"2026-02-10T00:00:00Z","price":9990,"currency":"EUR","storefront":"FRA","revokedAt":"2026-01-20T00:00:00Z","revocationType":"REFUND_FULL"}

                """.utf8).write(to: events)
            #expect(try ledger("import", "--catalog", catalog.path, ledgerDir, events.path).status == 0)
            let range = ["--from", "2026-01-01T00:00:00Z", "--to", "2026-03-01T00:00:00Z", "--by", "month", "--at", "2026-01-15T00:00:00Z"]
            func books(_ extra: [String]) throws -> [String: Any] {
                let run = try self.run("ledger", ["books", "--json"] + range + extra + [ledgerDir])
                #expect(run.status == 0, "\(run.error)")
                return try #require(try JSONSerialization.jsonObject(with: run.output) as? [String: Any])
            }
            func january(_ books: [String: Any]) -> [String: Int]? {
                ((books["periods"] as? [[String: Any]])?.first?["byCurrency"] as? [String: Any])?["EUR"] as? [String: Int]
            }
            // At the head: sold and refunded in January; 9990 / 1.2 × 0.7 = 5827.5 → 5828 (half to even).
            let now = try books([])
            #expect(now["estimate"] as? Bool == true && now["position"] as? Int == 2)
            #expect(january(now) == ["sales": 9990, "refunds": 9990, "net": 0, "proceeds": 0, "recognised": 0])
            #expect((now["at"] as? [String: Any])?["active"] as? Int == 1)
            // Known after the first event only: no refund yet, and 22 of its 31 days recognised in January.
            let then = try books(["--position", "1"])
            #expect(january(then) == ["sales": 9990, "refunds": 0, "net": 9990, "proceeds": 5828, "recognised": 7090])
            #expect(((then["at"] as? [String: Any])?["mrr"] as? [String: Int]) == ["EUR": 9990])
            #expect(try books(["--known-at", "2000-01-01T00:00:00Z"])["position"] as? Int == 0)
            let table = try ledger("books", "--from", "2026-01-01T00:00:00Z", "--to", "2026-03-01T00:00:00Z", "--by", "month", ledgerDir)
            #expect(table.status == 0 && table.text.contains("EUR") && table.text.contains("2026-02-01"), "\(table.text)")
            #expect(try ledger("books", "--from", "2026-01-01T00:00:00Z", ledgerDir).status == 64)
            #expect(try ledger("books", "--position", "1", "--known-at", "2026-01-01T00:00:00Z", ledgerDir).status == 64)
            #expect(try ledger("books", "--environment", "Moon", ledgerDir).status == 64)
            #expect(try ledger("books", "--position", "9", ledgerDir).status == 2)
        } }
    }

    @Test func storeEventsAndTheEnvironmentFilter() throws {
        try withDirectory { directory in
            let catalog = directory.appendingPathComponent("catalog.json")
            try Data(#"{"products": [{"id": "pro", "type": "autoRenewable", "group": "g"}, {"id": "pack", "type": "nonConsumable"}]}"#.utf8).write(to: catalog)
            let lines = """
                {"id":"s1","type":"storeTransaction","account":"u1","at":"2026-01-01T00:00:00Z","transaction":"10","originalTransaction":"10","product":"pro","purchasedAt":"2026-01-01T00:00:00Z","expiresAt":"2026-02-01T00:00:00Z","environment":"Production","price":9990,"currency":"USD"}
                {"id":"s2","type":"storeTransaction","account":"u1","at":"2026-01-01T00:00:00Z","transaction":"11","product":"pack","environment":"Sandbox","ownership":"FAMILY_SHARED"}
                {"id":"s3","type":"renewalInfo","account":"u1","at":"2026-01-01T00:00:00Z","originalTransaction":"10","willRenew":false}
                {"id":"s4","type":"storeTransaction","account":"u1","at":"2026-01-01T00:00:00Z","transaction":"12","product":"pack","environment":"Moon"}

                """
            let events = directory.appendingPathComponent("events.jsonl")
            try Data(lines.utf8).write(to: events)
            let ledgerDir = directory.appendingPathComponent("ledger").path
            let report = directory.appendingPathComponent("report.jsonl").path
            #expect(try ledger("import", "--catalog", catalog.path, "--report", report, ledgerDir, events.path).status == 0)
            #expect(try String(contentsOfFile: report, encoding: .utf8).contains(#"{"line": 4, "outcome": "rejected", "error": "invalidEvent", "message": "#))

            let all = try ledger("replay", "--json", "--as-of", "2026-01-15T00:00:00Z", ledgerDir)
            let accounts = try #require(try JSONSerialization.jsonObject(with: all.output) as? [String: Any])["accounts"] as? [String: Any]
            let u1 = try #require(accounts?["u1"] as? [String: Any])
            #expect(u1["entitlements"] as? [String] == ["pack", "pro"])
            let subscriptions = try #require(u1["subscriptions"] as? [[String: Any]])
            #expect(subscriptions.first?["status"] as? Int == 1)
            #expect(subscriptions.first?["willRenew"] as? Bool == false)
            #expect((u1["storeTransactions"] as? [[String: Any]])?.map { $0["environment"] as? String } == ["Production", "Sandbox"])

            let production = try ledger("replay", "--json", "--as-of", "2026-01-15T00:00:00Z", "--environment", "Production", ledgerDir)
            #expect(production.text.contains(#""entitlements": ["pro"]"#))
            #expect(!production.text.contains("Sandbox"))
            let text = try ledger("replay", "--as-of", "2026-01-15T00:00:00Z", ledgerDir)
            #expect(text.text.contains("store: transaction 11  pack  family shared  (Sandbox)"))
            #expect(try ledger("replay", "--environment", "Moon", ledgerDir).status == 64)

            // Export, import elsewhere, export again: the same bytes; and the ledger verifies.
            let exported = try ledger("export", ledgerDir)
            let copy = directory.appendingPathComponent("copy").path
            #expect(try ledger("import", "--catalog", catalog.path, copy, "-", input: exported.output).status == 0)
            #expect(try ledger("export", copy).output == exported.output)
            #expect(try ledger("verify", ledgerDir).status == 0)
        }
    }

    /// `ledger transfer` moves a purchase (or shares it), on both backends: the old account's
    /// answer loses it and the new one's has it at once (issue 41, point 5: before, neither
    /// had it until the new account's device reported a restore), a second move from the old
    /// account is refused (exit 1) and appends nothing, moving it back works, the history
    /// shows the pair, and the ledger verifies.
    @Test(arguments: Self.backends)
    func transferMovesAPurchaseAndRefusesWhatItCannot(_ backend: String) throws {
        try withDirectory { directory in
            let catalog = directory.appendingPathComponent("catalog.json")
            try Data(#"{"products": [{"id": "pro", "type": "autoRenewable", "group": "g"}, {"id": "coins", "type": "consumable", "grants": {"coin": 10}}]}"#.utf8).write(to: catalog)
            let lines = """
                {"id":"a1","type":"transactionUpdated","account":"alice","at":"2026-01-01T00:00:00Z","payment":"p1","state":"purchased","transaction":"10","originalTransaction":"10","product":"pro","expiresAt":"2026-02-01T00:00:00Z"}
                {"id":"a2","type":"transactionUpdated","account":"alice","at":"2026-01-01T00:00:00Z","payment":"p2","state":"purchased","transaction":"20","product":"coins"}

                """
            try withLedgerLocation(backend, in: directory) { location in
                #expect(try ledger("import", "--catalog", catalog.path, location, "-", input: Data(lines.utf8)).status == 0)
                let moved = try ledger("transfer", location, "--original-transaction", "10", "--from", "alice", "--to", "bob")
                #expect(moved.status == 0, "\(moved.error)")
                #expect(moved.text.hasPrefix("alice: appended at position 3\nbob: appended at position 4\n"))
                func entitlements() throws -> [String: [String]] {
                    let replay = try ledger("replay", "--json", "--as-of", "2026-01-15T00:00:00Z", location)
                    let accounts = try #require(try JSONSerialization.jsonObject(with: replay.output) as? [String: Any])["accounts"] as? [String: [String: Any]]
                    return (accounts ?? [:]).mapValues { $0["entitlements"] as? [String] ?? [] }
                }
                #expect(try entitlements() == ["alice": [], "bob": ["pro"]])
                let again = try ledger("transfer", location, "--original-transaction", "10", "--from", "alice", "--to", "carol", "--json")
                #expect(again.status == 1)
                #expect(again.text.contains(#""error": "unknownTransaction""#))
                let consumable = try ledger("transfer", location, "--original-transaction", "20", "--from", "alice", "--to", "bob", "--share")
                #expect(consumable.status == 1)
                #expect(consumable.text.contains("notRestorable"))
                #expect(try ledger("history", location, "--account", "bob").text.contains("original 10 from alice to bob"))
                // The pair, bob's restore of it and its finish.
                #expect(try ledger("export", location).text.split(separator: "\n").count == 6)
                let back = try ledger("transfer", location, "--original-transaction", "10", "--from", "bob", "--to", "alice")
                #expect(back.status == 0, "\(back.error)")
                #expect(try entitlements() == ["alice": ["pro"], "bob": []])
                #expect(try ledger("verify", location).status == 0)
            }
        }
    }

    /// `ledger forget` forgets a customer on both backends: the id is gone from every answer
    /// and, on LMDB, from the rewritten data file; the books stay under the pseudonym; asking
    /// again exits 1. `ledger rewrite` rewrites an LMDB file and refuses a database.
    @Test(arguments: Self.backends)
    func forgetRemovesTheCustomerAndKeepsTheBooks(_ backend: String) throws {
        try withDirectory { directory in
            let catalog = directory.appendingPathComponent("catalog.json")
            try Data(#"{"products": [{"id": "pro", "type": "autoRenewable", "group": "g"}]}"#.utf8).write(to: catalog)
            let lines = """
                {"id":"a1","type":"transactionUpdated","account":"alice@example.com","at":"2026-01-01T00:00:00Z","payment":"p1","state":"purchased","transaction":"10","originalTransaction":"10","product":"pro","expiresAt":"2026-02-01T00:00:00Z"}
                {"id":"b1","type":"transactionUpdated","account":"bob","at":"2026-01-01T00:00:00Z","payment":"p1","state":"purchased","transaction":"20","originalTransaction":"20","product":"pro","expiresAt":"2026-02-01T00:00:00Z"}

                """
            try withLedgerLocation(backend, in: directory) { location in
                #expect(try ledger("import", "--catalog", catalog.path, location, "-", input: Data(lines.utf8)).status == 0)
                let forgotten = try ledger("forget", location, "--account", "alice@example.com", "--requested-by", "ticket 4711", "--json")
                #expect(forgotten.status == 0, "\(forgotten.error)")
                let answer = try #require(try JSONSerialization.jsonObject(with: forgotten.output) as? [String: Any])
                #expect(answer["position"] as? Int == 3)
                #expect(answer["pseudonym"] as? String == "forgotten/1")
                #expect((answer["rewrote"] != nil) == (backend == "lmdb"))
                let replay = try ledger("replay", "--json", "--as-of", "2026-01-15T00:00:00Z", location)
                let accounts = try #require(try JSONSerialization.jsonObject(with: replay.output) as? [String: Any])["accounts"] as? [String: [String: Any]]
                #expect(accounts?["alice@example.com"] == nil)
                #expect(accounts?["forgotten/1"]?["entitlements"] as? [String] == ["pro"])
                #expect(accounts?["bob"]?["entitlements"] as? [String] == ["pro"])
                let export = try ledger("export", location).text
                #expect(!export.contains("alice"))
                #expect(export.contains(#""requestedBy":"ticket 4711""#))
                #expect(try ledger("verify", location).status == 0)
                if backend == "lmdb" {
                    for file in try FileManager.default.contentsOfDirectory(atPath: location) {
                        let bytes = try Data(contentsOf: URL(fileURLWithPath: location + "/" + file))
                        #expect(bytes.range(of: Data("alice@example.com".utf8)) == nil, "in \(file)")
                    }
                    // Refused while another process reads the ledger: it would go on reading the old file.
                    let follower = try ChildProcess(Self.binary("ledger"), ["changes", "--follow", location], output: .pipe)
                    _ = follower.output?.availableData
                    let refused = try ledger("rewrite", location)
                    _ = follower.stop()
                    #expect(refused.status == 2)
                    #expect(refused.error.contains("another process has the ledger"), "\(refused.error)")
                    let rewrite = try ledger("rewrite", location, "--json")
                    #expect(rewrite.status == 0, "\(rewrite.error)")
                    #expect(try ledger("verify", location).status == 0)
                } else {
                    #expect(try ledger("rewrite", location).status == 2)
                }
                let again = try ledger("forget", location, "--account", "alice@example.com", "--requested-by", "ticket 4711")
                #expect(again.status == 1)
                #expect(again.error.contains("no event of this account"))
            }
        }
    }

    /// `ledger attribute` runs the server's audit file again with the server's configuration;
    /// what still has no account (here, a line that does not verify) stays in the file.
    @Test func attributeKeepsWhatItCannotAttribute() throws {
        let root = Self.fixtures.deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("PurchaseLedgerServerTests/Fixtures/certs/testCA.der")
        try withDirectory { directory in
            let catalog = directory.appendingPathComponent("catalog.json")
            try Data(#"{"products": [{"id": "pack", "type": "nonConsumable"}]}"#.utf8).write(to: catalog)
            let ledgerDir = directory.appendingPathComponent("ledger").path
            let first = #"{"id":"e1","type":"paymentAdded","account":"u1","at":"2026-01-01T00:00:00Z","payment":"p1","product":"pack"}"#
            #expect(try ledger("import", "--catalog", catalog.path, ledgerDir, "-", input: Data(first.utf8)).status == 0)
            let audit = directory.appendingPathComponent("unattributed.jsonl")
            let line = #"{"notificationUUID": "n1", "reason": "no account", "signedPayload": "not.a.jws"}"#
            try Data((line + "\n").utf8).write(to: audit)
            let config = directory.appendingPathComponent("server.json")
            let appStore = #""appStore": {"bundleId": "com.example", "environment": "Sandbox", "trustedRoots": ["\#(root.path)"], "unattributedNotifications": "\#(audit.path)"}"#
            try Data(#"{"ledger": "\#(ledgerDir)", \#(appStore)}"#.utf8).write(to: config)

            let run = try ledger("attribute", "--config", config.path, "--json")
            #expect(run.status == 0, "\(run.error)")
            #expect(run.text == #"{"attributed": 0, "kept": 1}"# + "\n")
            #expect(try String(contentsOf: audit, encoding: .utf8) == line + "\n")
            #expect(!FileManager.default.fileExists(atPath: audit.path + ".attributing"))

            try Data(#"{"ledger": "\#(ledgerDir)"}"#.utf8).write(to: config)
            let without = try ledger("attribute", "--config", config.path)
            #expect(without.status == 2)
            #expect(without.error.contains("no appStore section"))
        }
    }

    @Test func createsOnlyWithACatalog() throws {
        try withDirectory { directory in
            let events = directory.appendingPathComponent("events.jsonl")
            try Data(#"{"id":"e1","type":"paymentAdded","account":"u1","at":"2026-01-01T00:00:00Z","payment":"p1","product":"com.example.tenhints"}"#.utf8).write(to: events)
            let run = try ledger("import", directory.appendingPathComponent("new").path, events.path)
            #expect(run.status == 2)
            #expect(run.error.contains("catalog"))
            #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("new/data.mdb").path))
        }
    }

    @Test func importsFromStandardInputWithAStoreKitCatalog() throws {
        let storekit = Self.fixtures.deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("PurchaseLedgerTests/Fixtures/UnitTestsConfiguration.storekit")
        try withDirectory { directory in
            let ledgerDir = directory.appendingPathComponent("ledger").path
            let lines = """
                {"id":"e1","type":"paymentAdded","account":"u1","at":"2026-01-01T00:00:00Z","payment":"p1","product":"lifetime"}
                {"id":"e2","type":"transactionUpdated","account":"u1","at":"2026-01-01T00:01:00Z","payment":"p1","state":"purchased","transaction":"1"}
                {"id":"e2","type":"transactionUpdated","account":"u1","at":"2026-01-01T00:01:00Z","payment":"p1","state":"purchased","transaction":"1"}
                {"id":"e3","type":"transactionFinished","account":"u1","at":"2026-01-01T00:02:00Z","payment":"p2"}

                """
            let run = try ledger("import", "--catalog", storekit.path, "--report", "-", ledgerDir, "-", input: Data(lines.utf8))
            #expect(run.status == 0, "\(run.error)")
            #expect(run.text == """
                {"line": 1, "outcome": "appended", "position": 1}
                {"line": 2, "outcome": "appended", "position": 2}
                {"line": 3, "outcome": "duplicate", "position": 2}
                {"line": 4, "outcome": "rejected", "error": "unknownPayment", "message": "payment \\"p2\\" is not in this account's queue"}

                """)
            #expect(run.error.contains("2 appended, 1 duplicate, 1 rejected"))
            let replay = try ledger("replay", "--json", ledgerDir)
            #expect(try json(replay.output) == json(Data(#"{"position": 2, "accounts": {"u1": {"entitlements": ["lifetime"], "balances": {}, "unfinished": [{"payment": "p1", "product": "lifetime", "state": "purchased", "transaction": "1", "downloads": []}]}}}"#.utf8)))
            // A second import needs no catalog, and appends after the first.
            let more = #"{"id":"e4","type":"transactionFinished","account":"u1","at":"2026-01-01T00:03:00Z","payment":"p1"}"#
            let second = try ledger("import", "--report", "-", ledgerDir, "-", input: Data(more.utf8))
            #expect(second.text == #"{"line": 1, "outcome": "appended", "position": 3}"# + "\n")
            #expect(try ledger("replay", "--account", "u1", ledgerDir).text.contains("unfinished:   none"))
            // A header line, then the three events.
            #expect(try ledger("history", "--account", "u1", ledgerDir).text.split(separator: "\n").count == 4)
            let stats = try ledger("stats", "--json", ledgerDir)
            let figures = try json(stats.output) as! [String: Any]
            #expect(figures["events"] as? Int == 3)
            #expect(figures["accounts"] as? Int == 1)
            #expect(figures["products"] as? Int == 7)
        }
    }

    @Test func verifyExitsOneAndNamesTheDamagedPosition() throws {
        try withDirectory { directory in
            let ledgerDir = directory.appendingPathComponent("ledger").path
            let catalog = Self.fixtures.appendingPathComponent("spec-cases/catalog.json").path
            let events = (1...40).map { index in
                #"{"id":"e\#(index)","type":"paymentAdded","account":"user-\#(index)","at":"2026-01-01T00:00:00Z","payment":"payment-\#(index)-abcdefghijklmnop","product":"com.example.tenhints"}"#
            }.joined(separator: "\n")
            let eventsFile = directory.appendingPathComponent("events.jsonl")
            try Data(events.utf8).write(to: eventsFile)
            // One batch: every record is written to the file exactly once.
            #expect(try ledger("import", "--catalog", catalog, ledgerDir, eventsFile.path).status == 0)
            #expect(try ledger("verify", ledgerDir).status == 0)

            let dataFile = URL(fileURLWithPath: ledgerDir + "/data.mdb")
            var bytes = try Data(contentsOf: dataFile)
            // The event id after its length, then the account's handle (27: handles are given in
            // order of first mention): only the record has that, and stale copies of it that LMDB
            // may leave in the unused middle of a page written since (its page buffers are
            // reused unzeroed). All of them flipped: the live one among them.
            let marker = Data([3] + Array("e27".utf8) + [27])
            let ranges = allRanges(of: marker, in: bytes)
            try #require(!ranges.isEmpty)
            for range in ranges { bytes[range.lowerBound + 3] ^= 0x01 }
            try bytes.write(to: dataFile)

            let verify = try ledger("verify", ledgerDir)
            #expect(verify.status == 1)
            #expect(verify.text.contains("position 27"))
            #expect(verify.text.contains("checksum"))
            let json = try ledger("verify", "--json", ledgerDir)
            #expect(json.status == 1)
            #expect(json.text.contains(#""position": 27"#))
            // A full replay refuses to answer from a damaged log.
            #expect(try ledger("replay", "--json", "--no-snapshot", ledgerDir).status == 2)
        }
    }

    @Test func usageAndUnusableInputs() throws {
        try withDirectory { directory in
            #expect(try ledger("replay").status == 64)
            #expect(try ledger("frobnicate").status == 64)
            #expect(try ledger("replay", "--json", "--as-of", "tomorrow", directory.path).status == 64)
            let missing = try ledger("verify", directory.appendingPathComponent("nothing").path)
            #expect(missing.status == 2)
            #expect(missing.error.contains("holds no ledger"))
            let catalog = Self.fixtures.appendingPathComponent("spec-cases/catalog.json").path
            let unreadable = try ledger("import", "--catalog", catalog, directory.appendingPathComponent("l").path, directory.appendingPathComponent("absent.jsonl").path)
            #expect(unreadable.status == 2)
            #expect(unreadable.error.contains("absent.jsonl"))
            let badCatalog = directory.appendingPathComponent("catalog.json")
            try Data(#"{"products": [{"id": "a", "type": "gift"}]}"#.utf8).write(to: badCatalog)
            let refused = try ledger("import", "--catalog", badCatalog.path, directory.appendingPathComponent("l2").path, "-", input: Data())
            #expect(refused.status == 2)
            #expect(refused.error.contains("catalog"))
        }
    }

    @Test func replayBeyondTheLogIsAnError() throws {
        try withDirectory { directory in
            let ledgerDir = directory.appendingPathComponent("ledger").path
            let catalog = Self.fixtures.appendingPathComponent("spec-cases/catalog.json").path
            let first = #"{"id":"e1","type":"paymentAdded","account":"u1","at":"2026-01-01T00:00:00Z","payment":"p1","product":"com.example.gem"}"#
            #expect(try ledger("import", "--catalog", catalog, ledgerDir, "-", input: Data(first.utf8)).status == 0)
            let empty = try ledger("replay", "--json", "--position", "0", ledgerDir)
            #expect(try json(empty.output) == json(Data(#"{"position": 0, "accounts": {}}"#.utf8)))
            let beyond = try ledger("replay", "--json", "--position", "5", ledgerDir)
            #expect(beyond.status == 2)
            #expect(beyond.error.contains("beyond"))
        }
    }

    @Test(arguments: [1, 7, 1000])
    func linesAreCheckedInInputOrderWhateverTheBatchSize(batchSize: Int) throws {
        try withDirectory { directory in
            let catalog = Self.fixtures.appendingPathComponent("spec-cases/catalog.json").path
            // Every second line depends on the one before it.
            var lines: [String] = []
            for index in 0..<1500 {
                lines.append(#"{"id":"a\#(index)","type":"paymentAdded","account":"u","at":"2026-01-01T00:00:00Z","payment":"p\#(index)","product":"com.example.gem"}"#)
                lines.append(#"{"id":"b\#(index)","type":"transactionUpdated","account":"u","at":"2026-01-01T00:00:00Z","payment":"p\#(index)","state":"purchasing"}"#)
            }
            let events = directory.appendingPathComponent("events.jsonl")
            try Data(lines.joined(separator: "\n").utf8).write(to: events)
            let ledgerDir = directory.appendingPathComponent("ledger").path
            let run = try ledger("import", "--batch-size", String(batchSize), "--catalog", catalog, "--report", "-", ledgerDir, events.path)
            #expect(run.status == 0)
            let expected = (1...3000).map { #"{"line": \#($0), "outcome": "appended", "position": \#($0)}"# }.joined(separator: "\n") + "\n"
            #expect(run.text == expected)
            #expect(try ledger("export", ledgerDir).output == Data((lines.joined(separator: "\n") + "\n").utf8))
        }
    }

    @Test func reportProblemsAreErrors() throws {
        try withDirectory { directory in
            let catalog = Self.fixtures.appendingPathComponent("spec-cases/catalog.json").path
            let events = directory.appendingPathComponent("events.jsonl")
            let line = #"{"id":"e1","type":"paymentAdded","account":"u","at":"2026-01-01T00:00:00Z","payment":"p1","product":"com.example.gem"}"#
            try Data(line.utf8).write(to: events)
            // A report that cannot be written.
            let full = try ledger("import", "--catalog", catalog, "--report", "/dev/full", directory.appendingPathComponent("a").path, events.path)
            #expect(full.status == 2)
            #expect(full.error.contains("report"))
            // A report that would overwrite its own input.
            let same = try ledger("import", "--catalog", catalog, "--report", events.path, directory.appendingPathComponent("b").path, events.path)
            #expect(same.status == 2)
            #expect(try Data(contentsOf: events) == Data(line.utf8))
            // A report in a directory that does not exist: refused before a ledger is created.
            let nowhere = directory.appendingPathComponent("missing/report.jsonl").path
            let lost = try ledger("import", "--catalog", catalog, "--report", nowhere, directory.appendingPathComponent("c").path, events.path)
            #expect(lost.status == 2)
            #expect(lost.error.contains("cannot write the report"))
            #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("c").path))
        }
    }

    /// A rejected line says why, in the report and, without one, on standard error with its
    /// line number; `--strict` turns any rejection into exit 1.
    @Test func aRejectedLineSaysWhyAndStrictFailsOnIt() throws {
        try withDirectory { directory in
            let catalog = Self.fixtures.appendingPathComponent("spec-cases/catalog.json").path
            let events = directory.appendingPathComponent("events.jsonl")
            let lines = [
                #"{"id":"e1","type":"paymentAdded","account":"u","at":"2026-01-01T00:00:00Z","payment":"p1","product":"com.example.gem"}"#,
                #"{"id":"e2","type":"refund","account":"u","at":"2026-01-01T00:00:00Z"}"#,
                #"{"id":"e3","type":"transactionFinished","account":"u","at":"2026-01-01T00:00:00Z","payment":"p9"}"#,
            ]
            try Data((lines.joined(separator: "\n") + "\n").utf8).write(to: events)
            let path = directory.appendingPathComponent("ledger").path
            let plain = try ledger("import", "--catalog", catalog, path, events.path)
            #expect(plain.status == 0)
            #expect(plain.error.contains(#"line 2: invalidEvent: unknown `type` "refund"; expected one of paymentAdded"#), "\(plain.error)")
            #expect(plain.error.contains(#"line 3: unknownPayment: "#), "\(plain.error)")

            let strict = try ledger("import", "--strict", "--report", "-", path, events.path)
            #expect(strict.status == 1)
            let report = strict.text.split(separator: "\n").map(String.init)
            #expect(report.first == #"{"line": 1, "outcome": "duplicate", "position": 1}"#)
            #expect(report.dropFirst().first?.hasPrefix(#"{"line": 2, "outcome": "rejected", "error": "invalidEvent", "message": "unknown `type` \"refund\""#) == true, "\(report)")
            // With a report, standard error has the summary only.
            #expect(!strict.error.contains("line 2:"))

            try Data((lines[0] + "\n").utf8).write(to: events)
            #expect(try ledger("import", "--strict", path, events.path).status == 0)
        }
    }

    /// A ledger is created only when an event is about to be appended: input that holds none
    /// (every line malformed) creates nothing, and a new ledger needs its catalog named.
    @Test func inputWithoutEventsCreatesNoLedger() throws {
        try withDirectory { directory in
            let catalog = Self.fixtures.appendingPathComponent("spec-cases/catalog.json").path
            let events = directory.appendingPathComponent("events.jsonl")
            try Data("not json\n{\"id\": 1}\n".utf8).write(to: events)
            let path = directory.appendingPathComponent("ledger").path
            let run = try ledger("import", "--catalog", catalog, "--report", "-", path, events.path)
            #expect(run.status == 0, "\(run.error)")
            #expect(run.text.split(separator: "\n").count == 2)
            #expect(run.text.contains(#""line": 2, "outcome": "rejected", "error": "invalidEvent", "message": "#))
            #expect(run.error.contains("no ledger was created"))
            #expect(!FileManager.default.fileExists(atPath: path))

            let uncataloged = try ledger("import", path, events.path)
            #expect(uncataloged.status == 2)
            #expect(uncataloged.error.contains("give --catalog"), "\(uncataloged.error)")
        }
    }

    @Test func messagesAndHelpReadAsAUserExpects() throws {
        try withDirectory { directory in
            let catalog = Self.fixtures.appendingPathComponent("spec-cases/catalog.json").path
            let events = directory.appendingPathComponent("events.jsonl")
            try Data(#"{"id":"e1","type":"paymentAdded","account":"u","at":"2026-01-01T00:00:00Z","payment":"p1","product":"com.example.gem"}"#.utf8).write(to: events)
            let ledgerDir = directory.appendingPathComponent("ledger").path
            let noCatalog = try ledger("import", ledgerDir, events.path)
            #expect(noCatalog.status == 2)
            #expect(noCatalog.error.contains("--catalog"), "\(noCatalog.error)")
            let one = try ledger("import", "--catalog", catalog, ledgerDir, events.path)
            #expect(one.status == 0)
            #expect(one.error.contains("imported 1 line into"), "\(one.error)")
            let help = try ledger("history", "--help")
            #expect(!help.text.contains(String(Int.max)), "\(help.text)")
            #expect(help.text.contains("--limit <count>"))
        }
    }

    /// Every command's help shows how to run it, and one placeholder style (no option's own
    /// name turned into a placeholder).
    @Test(arguments: ["import", "replay", "export", "verify", "history", "stats", "snapshot", "copy", "attribute", "reconcile"])
    func everyCommandsHelpHasAnExample(_ command: String) throws {
        let help = try ledger(command, "--help")
        #expect(help.status == 0)
        #expect(help.text.contains("Example"), "\(help.text)")
        #expect(help.text.contains("  ledger \(command) "), "\(help.text)")
        #expect(!help.text.contains("<batch-size>") && !help.text.contains("<snapshot-every>"), "\(help.text)")
    }

    @Test func asOfMustBeWritableInUTC() throws {
        try withDirectory { directory in
            let run = try ledger("replay", "--as-of", "9999-12-31T23:59:59-05:00", directory.path)
            #expect(run.status == 64)
        }
    }

    private func allRanges(of needle: Data, in haystack: Data) -> [Range<Int>] {
        var ranges: [Range<Int>] = []
        var start = haystack.startIndex
        while let range = haystack.range(of: needle, in: start..<haystack.endIndex) {
            ranges.append(range)
            start = range.upperBound
        }
        return ranges
    }
}
