import ArgumentParser
import Logging
import PurchaseLedgerLocation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension LedgerCommand {
    struct Import: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Append the events of a JSON Lines file to a ledger, creating the ledger when needed.",
            discussion: """
                Every line is answered: appended, duplicate, or rejected with the spec's error code. \
                Events are committed in batches; a report line is written only once its batch is durable. \
                Exits 0 when every line was read, whatever the outcomes (with --strict, 1 when any was rejected).

                On a terminal a progress line shows how far the import is. Ctrl-C stops it: the lines \
                reported durable stay in the ledger, and running the same import again continues (the \
                lines already in the ledger answer duplicate).

                Examples:
                  ledger import --catalog Products.storekit --report report.jsonl ./ledger day.jsonl
                  zcat day.jsonl.gz | ledger import --strict ./ledger -
                  ledger import --json ./ledger day.jsonl | jq .rejected
                """)

        @Option(name: .shortAndLong, help: ArgumentHelp("The catalog (interchange JSON, or an Xcode .storekit file). Required to create a ledger.", valueName: "file"))
        var catalog: String?

        @Option(name: .shortAndLong, help: ArgumentHelp("Write one JSON outcome per input line to this file ('-' for standard output).", valueName: "file"))
        var report: String?

        @Option(name: .shortAndLong, help: ArgumentHelp("Events per durable commit.", valueName: "count"))
        var batchSize = 1000

        @Option(help: ArgumentHelp("Write a snapshot of the projections every <count> events (0: only at the end).", valueName: "count"))
        var snapshotEvery: UInt64 = 100_000

        @Flag(help: "Exit 1 when any line was rejected (the others are still imported).")
        var strict = false

        @Flag(name: .shortAndLong, help: "Print the summary as a JSON object on standard output.")
        var json = false

        @OptionGroup var location: LocationArgument

        @Argument(help: ArgumentHelp("The events, as JSON Lines ('-' for standard input).", valueName: "events"))
        var events: String

        func validate() throws {
            guard (1...100_000).contains(batchSize) else {
                throw ValidationError("--batch-size must be from 1 to 100000")
            }
            if json, report == "-" {
                throw ValidationError("--json and --report - would both write to standard output: give the report a file")
            }
        }

        func run() async throws {
            let rejected = try await runOrFail { () async throws -> Int in
                let catalogValue = try catalog.map { try Catalog(contentsOfFile: $0) }
                var input = try LineReader(path: events, maximumLength: Event.maximumJSONLineLength)
                defer { input.closeInput() }
                if let report, report != "-", input.isSameFile(as: report) {
                    throw CommandFailure(message: "the report \(report) would overwrite the events it reports on")
                }
                // Checked before the ledger is opened (it may be created): a report that cannot be
                // written must not leave a new, empty ledger behind.
                if let report { try ReportOutput.checkWritable(report) }
                var configuration = Ledger.Configuration()
                configuration.logger.logLevel = .warning
                configuration.snapshotInterval = snapshotEvery == 0 ? nil : snapshotEvery
                // A ledger that exists is opened now (a bad location fails at once); a new one is
                // created only when the first event is about to be appended, so input that holds
                // no event creates nothing.
                let open = { try location.openLedger(catalog: catalogValue, configuration: configuration) }
                let existing = try Importer.holdsLedger(location) ? try open() : nil
                if existing == nil, catalogValue == nil {
                    throw CommandFailure(message: "\(location.display) holds no ledger yet: give --catalog to create one")
                }
                let progress = ProgressLine("importing", unit: "lines")
                var importer = Importer(ledger: existing, open: open, progress: progress)
                let display = location.display
                Interruption.onInterrupt {
                    // The progress line counts lines whose batch is durable.
                    let lines = progress.done
                    guard lines > 0 else { return "no line of this import is durable yet; run it again to import" }
                    return "lines 1–\(grouped(lines)) of this import are durable in \(display); "
                        + "run the same import again to continue (the lines already imported answer duplicate)"
                }
                do {
                    // Opened only once the ledger is usable: a failed import leaves an old report alone.
                    importer.report = try report.map { try ReportOutput(path: $0) }
                    try await importer.run(&input, batchSize: batchSize)
                    try importer.report?.finish()
                    await importer.ledger?.close()
                    if json {
                        try Console.output(importer.summaryJSON() + "\n")
                    } else {
                        Console.error(importer.summary(directory: location.display, style: .error))
                    }
                    // Without a report, the first rejections say where and why (in the JSON summary with --json).
                    if importer.report == nil, !json, importer.rejected > 0 { Console.error(importer.firstRejections()) }
                    return importer.rejected
                } catch {
                    await importer.ledger?.close()
                    throw error
                }
            }
            if strict, rejected > 0 { throw ExitCode.rejectedLines }
        }
    }
}

/// Reads lines in batches, appends each batch in one durable commit, and reports outcomes in
/// input order. The next batch is parsed while the previous one commits; it is submitted only
/// once the previous one is durable, so lines are checked in input order.
struct Importer {
    /// Nil until the first event is about to be appended to a ledger that did not exist.
    private(set) var ledger: Ledger?
    let open: () throws -> Ledger
    var report: ReportOutput?
    /// Counts the lines whose outcomes are durable.
    let progress: ProgressLine

    private(set) var lines = 0
    private(set) var appended = 0
    private(set) var duplicates = 0
    private(set) var rejections: [String: Int] = [:]
    /// The first rejected lines: number, error code, message.
    private(set) var firstRejected: [(line: Int, code: String, message: String)] = []
    static let rejectionsListed = 10
    private let clock = ContinuousClock()
    private var started: ContinuousClock.Instant
    /// The fraction of the input read, when its size is known.
    private var fractionRead: Double?

    init(ledger: Ledger?, open: @escaping () throws -> Ledger, progress: ProgressLine) {
        self.ledger = ledger
        self.open = open
        self.progress = progress
        started = clock.now
    }

    /// Lines submitted together: each decoded into an event, or rejected before the ledger.
    private struct Batch {
        var firstLine: Int
        var count: Int
        /// Nil when no line of the batch held an event and there is no ledger: all rejected.
        var appending: PendingLines?
        var parsed: [Result<Event, LedgerError>]
    }

    /// Whether `location` holds a ledger already (opening its log creates nothing).
    static func holdsLedger(_ location: LocationArgument) throws -> Bool {
        do {
            try location.openLog().close()
            return true
        } catch let error as StorageError where error.code == .notALedger {
            return false
        }
    }

    mutating func run(_ input: inout LineReader, batchSize: Int) async throws {
        var inFlight: Batch?
        while true {
            // Input that pauses (a pipe fed as events happen) must not hold back the answers
            // of what was read before it.
            if let previous = inFlight, input.wouldBlock() {
                try await finish(previous)
                inFlight = nil
            }
            let (parsed, firstLine) = try readBatch(&input, size: batchSize)
            if let previous = inFlight {
                try await finish(previous)
            }
            guard !parsed.isEmpty else { break }
            if ledger == nil, parsed.contains(where: { if case .success = $0 { true } else { false } }) {
                ledger = try open()
            }
            inFlight = Batch(firstLine: firstLine, count: parsed.count, appending: try await ledger?.submit(lines: parsed), parsed: parsed)
            fractionRead = input.fractionRead
        }
        progress.clear()
    }

    private mutating func readBatch(_ input: inout LineReader, size: Int) throws -> ([Result<Event, LedgerError>], Int) {
        var parsed: [Result<Event, LedgerError>] = []
        parsed.reserveCapacity(size)
        let firstLine = lines + 1
        // A batch ends early when the input pauses: what was read is appended now.
        while parsed.count < size, parsed.isEmpty || !input.wouldBlock(), let line = try input.next() {
            lines += 1
            if line.isTruncated {
                parsed.append(.failure(LedgerError(.invalidEvent, "the line is longer than \(Event.maximumJSONLineLength) bytes")))
                continue
            }
            do {
                let event = try line.bytes.withUnsafeBufferPointer { buffer throws(LedgerError) in try Event(jsonLine: buffer) }
                parsed.append(.success(event))
            } catch {
                parsed.append(.failure(error))
            }
        }
        return (parsed, firstLine)
    }

    /// Waits for the batch's commit, then writes its report lines.
    private mutating func finish(_ batch: Batch) async throws {
        let results: [AppendResult]
        do {
            results = try await batch.appending?.results() ?? batch.parsed.map { parsed in
                // Only failures reach here: a line that held an event opened the ledger.
                parsed.flatMap { _ in .failure(LedgerError(.invalidEvent, "not appended")) }
            }
        } catch {
            throw CommandFailure(message: "lines \(batch.firstLine)–\(batch.firstLine + batch.count - 1) were not imported: \(describe(error))")
        }
        var reportText = ""
        for (offset, outcome) in results.enumerated() {
            let number = batch.firstLine + offset
            switch outcome {
            case .success(.appended): appended += 1
            case .success(.duplicate): duplicates += 1
            case .failure(let error):
                rejections[error.code.rawValue, default: 0] += 1
                if firstRejected.count < Self.rejectionsListed { firstRejected.append((number, error.code.rawValue, error.message)) }
            }
            reportText += outcome.reportLine(number) + "\n"
        }
        // Durable now, whether or not the report line is written before a Ctrl-C.
        progress.update(UInt64(batch.firstLine + batch.count - 1), fraction: fractionRead)
        try report?.write(reportText)
    }

    private func rate(_ now: ContinuousClock.Instant) -> Int {
        let elapsed = now - started
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        return seconds > 0 ? Int(Double(lines) / seconds) : 0
    }

    var rejected: Int { rejections.values.reduce(0, +) }

    /// `line 34: invalidEvent: unknown `type` "refund"; …`, one line each, and how many more.
    func firstRejections() -> String {
        var text = firstRejected.map { "line \($0.line): \($0.code): \($0.message)" }.joined(separator: "\n")
        if rejected > firstRejected.count {
            text += "\n… and \(grouped(rejected - firstRejected.count)) more (--report FILE lists every line's outcome)"
        }
        return text
    }

    /// Rejection counts by error code, the most frequent first.
    private var rejectionsByCount: [(key: String, value: Int)] {
        rejections.sorted { $0.value > $1.value || ($0.value == $1.value && $0.key < $1.key) }
    }

    func summary(directory: String, style: Style = Style(enabled: false)) -> String {
        let rejectedText = "\(grouped(rejected)) rejected"
        var text = "imported \(grouped(lines)) \(lines == 1 ? "line" : "lines") into \(directory): \(grouped(appended)) appended, \(grouped(duplicates)) duplicate, \(rejected > 0 ? style.yellow(rejectedText) : rejectedText)"
        if rejected > 0 {
            text += " (" + rejectionsByCount.map { "\($0.key) \(grouped($0.value))" }.joined(separator: ", ") + ")"
        }
        guard let ledger else { return text + "; no line held an event, so no ledger was created" }
        return text + "; \(grouped(rate(clock.now))) lines/s; log at position \(grouped(ledger.position))"
    }

    /// `{"lines": 3, "appended": 1, "duplicates": 1, "rejected": 1, "rejections": {"invalidEvent": 1},
    /// "firstRejections": [{"line": 2, "error": "invalidEvent", "message": "…"}], "ledgerExists": true,
    /// "position": 1, "linesPerSecond": 2500}`; without a ledger (no line held an event), no `position`.
    func summaryJSON() -> String {
        var writer = JSONWriter(spaced: true)
        writer.beginObject()
        writer.member("lines", Int64(lines))
        writer.member("appended", Int64(appended))
        writer.member("duplicates", Int64(duplicates))
        writer.member("rejected", Int64(rejected))
        writer.key("rejections")
        writer.beginObject()
        for (code, count) in rejectionsByCount { writer.member(code, Int64(count)) }
        writer.endObject()
        writer.key("firstRejections")
        writer.beginArray()
        for rejection in firstRejected {
            writer.beginObject()
            writer.member("line", Int64(rejection.line))
            writer.member("error", rejection.code)
            writer.member("message", rejection.message)
            writer.endObject()
        }
        writer.endArray()
        writer.member("ledgerExists", ledger != nil)
        if let ledger { writer.member("position", Int64(ledger.position)) }
        writer.member("linesPerSecond", Int64(rate(clock.now)))
        writer.endObject()
        return writer.string
    }
}

struct CommandFailure: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}

/// Where report lines go: a file (created or truncated) or standard output. A write that
/// fails (a full disk, a closed pipe) ends the import with an error: a report with holes is
/// worse than none.
final class ReportOutput {
    private let fd: Int32
    private let path: String

    init(path: String) throws {
        if path == "-" {
            fd = STDOUT_FILENO
            self.path = "standard output"
        } else {
            fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
            guard fd >= 0 else { throw CommandFailure(message: "cannot write the report \(path): \(String(cString: strerror(errno)))") }
            self.path = path
        }
    }

    /// Whether `path` can be written (created in its directory, or an existing file opened for
    /// writing) without creating or truncating anything: so that a bad path fails the import
    /// before the ledger is opened, and an old report stays as it was.
    static func checkWritable(_ path: String) throws {
        guard path != "-" else { return }
        // The file itself when it exists, else the directory it would be created in.
        let directory = path.lastIndex(of: "/").map { String(path[..<$0]) } ?? "."
        let target = access(path, F_OK) == 0 ? path : (directory.isEmpty ? "/" : directory)
        guard access(target, W_OK) == 0 else {
            throw CommandFailure(message: "cannot write the report \(path): \(String(cString: strerror(errno)))")
        }
    }

    func write(_ text: String) throws {
        if let failure = Console.send(Array(text.utf8), to: fd) {
            throw CommandFailure(message: "cannot write the report to \(path): \(String(cString: strerror(failure)))")
        }
    }

    /// Flushes the report to disk and closes it.
    func finish() throws {
        guard fd != STDOUT_FILENO else { return }
        defer { close(fd) }
        if fsync(fd) != 0 {
            throw CommandFailure(message: "cannot write the report to \(path): \(String(cString: strerror(errno)))")
        }
    }
}
