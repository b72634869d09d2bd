import ArgumentParser
import Logging
import PurchaseLedgerLocation

extension LedgerCommand {
    struct Copy: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Copy a ledger to a new location, on the same backend or the other one, and verify the copy.",
            discussion: """
                SOURCE and DESTINATION are each a directory or a postgres:// URL; DESTINATION must hold no \
                ledger yet. Every event is appended again, in order, under the catalog that governed it, and \
                must land at its source position. Then the copy is verified: every record and index, the same \
                records as the source, the same catalogs, and the same projections. Exits 0 only when all agree.

                Until it is verified, DESTINATION is marked an incomplete copy: nothing else opens or verifies \
                it. Stopped at any point (Ctrl-C, kill -9, a crash), the same command run again resumes it from \
                where it stopped and verifies it whole; or remove it (drop the database) and copy again.

                On a terminal, progress lines show the copy and its verification.

                A ledger of an older format (one written before account handles) is migrated this way: \
                the copy is of the current format, and the command says so.

                Examples:
                  ledger copy ./ledger postgres://ledger@db/store
                  ledger copy --json postgres://ledger@db/store ./ledger-copy
                """)

        @Argument(help: ArgumentHelp("The ledger to copy: a directory or a postgres:// URL.", valueName: "source"))
        var source: String

        @Argument(help: ArgumentHelp("Where to copy it: a new directory or an empty PostgreSQL database.", valueName: "destination"))
        var destination: String

        @Option(name: .shortAndLong, help: ArgumentHelp("Events per durable commit.", valueName: "count"))
        var batchSize = 1000

        @OptionGroup var format: OutputFormat

        func validate() throws {
            guard (1...100_000).contains(batchSize) else {
                throw ValidationError("--batch-size must be from 1 to 100000")
            }
            guard source != destination else {
                throw ValidationError("SOURCE and DESTINATION are the same ledger")
            }
        }

        func run() async throws {
            let from = LocationArgument(directory: source)
            let to = LocationArgument(directory: destination)
            try await runOrFail {
                let sourceLog = try from.openLog()
                defer { sourceLog.close() }
                let resuming: Bool
                do {
                    try to.openLog().close()
                    throw CommandFailure(message: "\(to.display) already holds a ledger; copy into a new one")
                } catch let error as StorageError where error.code == .incompleteCopy {
                    resuming = true
                } catch let failure as CommandFailure {
                    throw failure
                } catch {
                    // Nothing there yet (or nothing readable): the copy creates it.
                    resuming = false
                }
                if resuming, !format.json { Console.error("\(to.display) holds an incomplete copy: resuming it") }
                if sourceLog.isOfOlderFormat, !format.json {
                    Console.error("\(from.display) is of the older format \(sourceLog.format): the copy is of the current format, a migration")
                }
                let last = try sourceLog.lastPosition()
                let progress = ProgressLine("copying", unit: "events")
                let destinationName = to.display
                Interruption.onInterrupt {
                    progress.done < last
                        ? "the copy stopped near position \(grouped(progress.done)) of \(grouped(last)); \(destinationName) holds an incomplete copy: "
                            + "run the same ledger copy again to resume it"
                        : "every event was copied to \(destinationName), but the copy was not yet checked against the source: "
                            + "run the same ledger copy again to check it and mark it complete"
                }
                // The feed consumers' state, read before the copy reads the source's last
                // position: no cursor in it can then be past the copy's last event, even while
                // the source's servers deliver.
                let feedStates = try sourceLog.feedStates(prefix: "").filter { !WebhookState.isLeaseKey($0.key) }
                let copier = LedgerCopier(source: sourceLog, destination: to, batchSize: batchSize)
                let copied = try await copier.copy(resuming: resuming) { progress.update($0, of: last) }
                try await copier.copyFeed(through: copied, states: feedStates)
                progress.clear()
                if !format.json { Console.error("copied \(grouped(copied)) events from \(from.display) to \(to.display); verifying the copy") }
                let copy = try to.location.openLog(logger: Logger(label: "ledger.copy"), options: LedgerLocation.processOptions, copying: true)
                let verifying = ProgressLine("verifying the copy", unit: "events")
                do {
                    try LedgerCopier.verify(copy, against: sourceLog, through: copied) { verifying.update($0, of: copied) }
                } catch {
                    copy.close()
                    throw error
                }
                copy.close()
                verifying.clear()
                // Only now does the copy open as a ledger.
                try await copier.markComplete()
                if format.json {
                    var writer = JSONWriter(spaced: true)
                    writer.beginObject()
                    writer.member("source", from.display)
                    writer.member("destination", to.display)
                    writer.member("copied", Int64(copied))
                    writer.member("verified", true)
                    if sourceLog.isOfOlderFormat { writer.member("migratedFrom", sourceLog.format) }
                    writer.endObject()
                    try Console.output(writer.string + "\n")
                } else {
                    Console.error("the copy is intact and equal to the source: \(grouped(copied)) events")
                }
            }
        }
    }
}

extension LocationArgument {
    init(directory: String) {
        self.init()
        self.directory = directory
    }
}

/// Appends a ledger's events to a new ledger, catalog epoch by catalog epoch, so that every
/// event is checked under the catalog that governed it in the source.
struct LedgerCopier {
    let source: LedgerLog
    let destination: LocationArgument
    let batchSize: Int

    /// Copies through the source's last position now; returns it. `progress` gets the last
    /// position copied, as batches become durable.
    /// The destination is opened as a copy (`Ledger.Configuration.copying`): marked incomplete
    /// from its creation until `markComplete()`. `resuming` goes on from the position an
    /// interrupted copy reached.
    func copy(resuming: Bool = false, progress: (UInt64) -> Void = { _ in }) async throws -> UInt64 {
        let last = try source.lastPosition()
        let catalogs = try source.catalogHistory().filter { $0.effectiveFrom <= last + 1 }
        var reached: UInt64 = 0
        if resuming {
            let ledger = try destination.openLedger(catalog: nil, configuration: Self.configuration)
            reached = ledger.position
            await ledger.close()
            guard reached <= last else {
                throw CommandFailure(message: "the incomplete copy is at position \(reached), past the source's last, \(last)")
            }
            progress(reached)
        }
        for (index, epoch) in catalogs.enumerated() {
            let end = index + 1 < catalogs.count ? catalogs[index + 1].effectiveFrom - 1 : last
            // Copied whole before the copy was stopped.
            if epoch.effectiveFrom <= end, reached >= end { continue }
            // Opening with the epoch's catalog creates the ledger, or records the grown catalog
            // from the next position on: the position the source recorded it at.
            let ledger = try destination.openLedger(catalog: epoch.catalog, configuration: Self.configuration)
            do {
                guard ledger.position + 1 >= epoch.effectiveFrom, ledger.position <= max(end, epoch.effectiveFrom - 1) else {
                    throw CommandFailure(message: "the copy is at position \(ledger.position), the source's catalog \(index + 1) starts at \(epoch.effectiveFrom)")
                }
                if ledger.position < end {
                    try await append(from: ledger.position + 1, through: end, to: ledger, progress: progress)
                }
                await ledger.close()
            } catch {
                await ledger.close()
                throw error
            }
        }
        return last
    }

    static var configuration: Ledger.Configuration {
        var configuration = Ledger.Configuration()
        configuration.logger.logLevel = .warning
        configuration.copying = true
        return configuration
    }

    /// The source's clock readings through `last` and its feed consumers' `states` (read before
    /// `last` was): the copy's change feed is then the source's, and its webhook endpoints go
    /// on where they were.
    func copyFeed(through last: UInt64, states: [(key: String, value: [UInt8])]) async throws {
        let ledger = try destination.openLedger(catalog: nil, configuration: Self.configuration)
        do {
            try await ledger.copyFeed(from: source, through: last, states: states)
        } catch {
            await ledger.close()
            throw error
        }
        await ledger.close()
    }

    /// Marks the copy complete: from now on it opens as any ledger does.
    func markComplete() async throws {
        let ledger = try destination.openLedger(catalog: nil, configuration: Self.configuration)
        do {
            try ledger.markCopyComplete()
        } catch {
            await ledger.close()
            throw error
        }
        await ledger.close()
    }

    /// Submits batches while earlier ones commit (a few in flight), each event required to land
    /// at its source position.
    private func append(from start: UInt64, through end: UInt64, to ledger: Ledger, progress: (UInt64) -> Void) async throws {
        var inFlight: [(records: [LogRecord], pending: PendingAppends)] = []
        func settle(_ batch: (records: [LogRecord], pending: PendingAppends)) async throws {
            for (record, result) in zip(batch.records, try await batch.pending.results()) {
                guard case .success(.appended(let position)) = result, position == record.position else {
                    throw CommandFailure(message: "the copy diverged at position \(record.position): \(result)")
                }
            }
            if let last = batch.records.last { progress(last.position) }
        }
        var next = start
        while next <= end {
            let chunkEnd = min(end, next + UInt64(batchSize) - 1)
            var records: [LogRecord] = []
            records.reserveCapacity(batchSize)
            try source.forEachRecord(from: next, through: chunkEnd) { records.append($0) }
            inFlight.append((records, try await ledger.submit(contentsOf: records.map(\.event))))
            if inFlight.count >= 4 { try await settle(inFlight.removeFirst()) }
            next = chunkEnd + 1
        }
        for batch in inFlight { try await settle(batch) }
    }

    /// The copy's records, indexes and rules check out, and it equals the source through
    /// `last`, the position copied to (a source that is still appended to goes on past it):
    /// the same records, catalogs and projections.
    static func verify(_ copy: LedgerLog, against source: LedgerLog, through last: UInt64, progress: (UInt64) -> Void = { _ in }) throws {
        // Three passes over the log: the copy's own check, then record by record, then the
        // projections; progress counts each third.
        let report = copy.verify { progress($0 / 3) }
        if let damage = report.damage {
            throw CommandFailure(message: "the copy does not verify: \(damage)")
        }
        guard try copy.lastPosition() == last else {
            throw CommandFailure(message: "the copy ends at position \(try copy.lastPosition()), not at \(last)")
        }
        let sourceCatalogs = try source.catalogHistory().filter { $0.effectiveFrom <= last + 1 }
        let copyCatalogs = try copy.catalogHistory()
        guard sourceCatalogs.map(\.effectiveFrom) == copyCatalogs.map(\.effectiveFrom),
              sourceCatalogs.map(\.catalog) == copyCatalogs.map(\.catalog) else {
            throw CommandFailure(message: "the copy's catalogs differ from the source's")
        }
        var next: UInt64 = 1
        while next <= last {
            let end = min(last, next + 9_999)
            var expected: [LogRecord] = []
            try source.forEachRecord(from: next, through: end) { expected.append($0) }
            var index = 0
            try copy.forEachRecord(from: next, through: end) { record in
                guard index < expected.count, record == expected[index] else {
                    throw CommandFailure(message: "the copy's record at position \(record.position) differs from the source's")
                }
                index += 1
            }
            progress(last / 3 + end / 3)
            next = end + 1
        }
        guard try copy.state(useSnapshots: false, progress: { progress(2 * (last / 3) + $0 / 3) }) == source.state(at: last) else {
            throw CommandFailure(message: "the copy's projections differ from the source's")
        }
        // The same feed: the copy's clock readings are the source's (a source still in use may
        // have ticked since, at `last`). The consumers' state is as it was when copied.
        var readings: [ClockReading] = []
        try source.forEachClockReading(through: last) { readings.append($0) }
        var index = 0
        try copy.forEachClockReading(through: last) { reading in
            guard index < readings.count, readings[index] == reading else {
                throw CommandFailure(message: "the copy's clock reading at position \(reading.position) differs from the source's")
            }
            index += 1
        }
        guard readings.dropFirst(index).allSatisfy({ $0.position == last }) else {
            throw CommandFailure(message: "the copy has \(index) clock readings, the source \(readings.count)")
        }
    }
}
