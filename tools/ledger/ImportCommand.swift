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
                Exits 0 when every line was read, whatever the outcomes.
                """)

        @Option(help: ArgumentHelp("The catalog (interchange JSON, or an Xcode .storekit file). Required to create a ledger.", valueName: "CATALOG"))
        var catalog: String?

        @Option(help: ArgumentHelp("Write one JSON outcome per input line to this file ('-' for standard output).", valueName: "REPORT"))
        var report: String?

        @Option(help: "Events per durable commit.")
        var batchSize = 1000

        @Option(help: ArgumentHelp("Write a snapshot of the projections every N events (0: only at the end).", valueName: "N"))
        var snapshotEvery: UInt64 = 100_000

        @OptionGroup var location: LocationArgument

        @Argument(help: ArgumentHelp("The events, as JSON Lines ('-' for standard input).", valueName: "EVENTS"))
        var events: String

        func validate() throws {
            guard (1...100_000).contains(batchSize) else {
                throw ValidationError("--batch-size must be from 1 to 100000")
            }
        }

        func run() async throws {
            try await runOrFail {
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
                let ledger = try location.openLedger(catalog: catalogValue, configuration: configuration)
                do {
                    // Opened only once the ledger is usable: a failed import leaves an old report alone.
                    let reportOutput = try report.map { try ReportOutput(path: $0) }
                    var importer = Importer(ledger: ledger, report: reportOutput, showsProgress: Console.errorIsTerminal)
                    try await importer.run(&input, batchSize: batchSize)
                    try reportOutput?.finish()
                    await ledger.close()
                    Console.error(importer.summary(directory: location.display))
                } catch {
                    await ledger.close()
                    throw error
                }
            }
        }
    }
}

/// Reads lines in batches, appends each batch in one durable commit, and reports outcomes in
/// input order. The next batch is parsed while the previous one commits; it is submitted only
/// once the previous one is durable, so lines are checked in input order.
struct Importer {
    let ledger: Ledger
    let report: ReportOutput?
    let showsProgress: Bool

    private(set) var lines = 0
    private(set) var appended = 0
    private(set) var duplicates = 0
    private(set) var rejections: [String: Int] = [:]
    private let clock = ContinuousClock()
    private var started: ContinuousClock.Instant
    private var lastProgress: ContinuousClock.Instant

    init(ledger: Ledger, report: ReportOutput?, showsProgress: Bool) {
        self.ledger = ledger
        self.report = report
        self.showsProgress = showsProgress
        started = clock.now
        lastProgress = started
    }

    /// Lines submitted together: each decoded into an event, or rejected before the ledger.
    private struct Batch {
        var firstLine: Int
        var count: Int
        var appending: PendingLines
    }

    mutating func run(_ input: inout LineReader, batchSize: Int) async throws {
        var inFlight: Batch?
        while true {
            let (parsed, firstLine) = try readBatch(&input, size: batchSize)
            if let previous = inFlight {
                try await finish(previous)
            }
            guard !parsed.isEmpty else { break }
            inFlight = Batch(firstLine: firstLine, count: parsed.count, appending: try await ledger.submit(lines: parsed))
        }
        if showsProgress { Console.status("\r\u{1B}[K") }
    }

    private mutating func readBatch(_ input: inout LineReader, size: Int) throws -> ([Result<Event, LedgerError>], Int) {
        var parsed: [Result<Event, LedgerError>] = []
        parsed.reserveCapacity(size)
        let firstLine = lines + 1
        while parsed.count < size, let line = try input.next() {
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
            results = try await batch.appending.results()
        } catch {
            throw CommandFailure(message: "lines \(batch.firstLine)–\(batch.firstLine + batch.count - 1) were not imported: \(describe(error))")
        }
        var reportText = ""
        for (offset, outcome) in results.enumerated() {
            let number = batch.firstLine + offset
            switch outcome {
            case .success(.appended): appended += 1
            case .success(.duplicate): duplicates += 1
            case .failure(let error): rejections[error.code.rawValue, default: 0] += 1
            }
            reportText += outcome.reportLine(number) + "\n"
        }
        try report?.write(reportText)
        showProgress()
    }

    private mutating func showProgress() {
        guard showsProgress else { return }
        let now = clock.now
        guard now - lastProgress > .milliseconds(200) else { return }
        lastProgress = now
        Console.status("\r\u{1B}[K\(grouped(lines)) lines · \(grouped(appended)) appended · \(grouped(rate(now))) lines/s")
    }

    private func rate(_ now: ContinuousClock.Instant) -> Int {
        let elapsed = now - started
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        return seconds > 0 ? Int(Double(lines) / seconds) : 0
    }

    func summary(directory: String) -> String {
        let rejected = rejections.values.reduce(0, +)
        var text = "imported \(grouped(lines)) \(lines == 1 ? "line" : "lines") into \(directory): \(grouped(appended)) appended, \(grouped(duplicates)) duplicate, \(grouped(rejected)) rejected"
        if rejected > 0 {
            let codes = rejections.sorted { $0.value > $1.value || ($0.value == $1.value && $0.key < $1.key) }
            text += " (" + codes.map { "\($0.key) \(grouped($0.value))" }.joined(separator: ", ") + ")"
        }
        return text + "; \(rate(clock.now)) lines/s; log at position \(ledger.position)"
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
