import Logging

extension Ledger {
    /// Records or checks the catalog: a new ledger gets its first catalog; an existing one may
    /// grow by the given catalog's new products. Returns the catalog in force and which
    /// recorded catalog it is.
    ///
    /// What is decided on a read is checked again under the write, since a process sharing the
    /// storage may have created the ledger or grown its catalog in between; then it starts over.
    static func establishCatalog(
        _ given: Catalog?, storage: any LedgerStorage, location directory: String, copying: Bool = false, logger: Logger
    ) throws -> (catalog: Catalog, version: CatalogVersion) {
        let expected = IncompleteCopy.expectedMarker(of: storage, copying: copying)
        let (marker, catalogs, last) = try storage.read { (try $0.formatMarker(), try $0.catalogs(), try $0.lastPosition()) }
        if marker == nil && catalogs.isEmpty && last == 0 {
            guard !storage.isReadOnly else {
                throw StorageError(.notALedger, "\(directory) holds no ledger")
            }
            guard let given else {
                throw CatalogError(.missing, "\(directory) holds no ledger yet: a catalog is needed to create one")
            }
            let created = try storage.write { writer -> Bool in
                guard try writer.formatMarker() == nil, try writer.catalogs().isEmpty, try writer.lastPosition() == 0 else { return false }
                try writer.setFormatMarker(expected)
                try writer.recordCatalog(Array(given.json.utf8), effectiveFrom: 1)
                return true
            }
            if created {
                logger.info("created ledger", metadata: ["location": "\(directory)", "products": "\(given.products.count)"])
                return (given, CatalogVersion(effectiveFrom: 1, size: given.json.utf8.count))
            }
            return try establishCatalog(given, storage: storage, location: directory, copying: copying, logger: logger)
        }
        try IncompleteCopy.check(marker, of: storage, at: directory, copying: copying)
        guard let newest = catalogs.last else {
            throw StorageError(.damaged, "\(directory) holds a log without its catalog")
        }
        let recorded: Catalog
        do {
            recorded = try Catalog(json: newest.json)
        } catch {
            throw StorageError(.damaged, "the ledger's catalog cannot be read: \(error)")
        }
        if let marker, marker != expected, storage.readableFormats.contains(marker), !copying {
            guard storage.isReadOnly else {
                throw StorageError(
                    .unsupportedFormat,
                    "\(directory) holds a ledger of format \(marker), from before account handles; this version writes "
                        + "\(storage.storageFormat). Open it read-only, or migrate it: `ledger copy \(directory) NEW-LOCATION`")
            }
            logger.warning("the ledger is of an older format: read-only; `ledger copy` migrates it", metadata: [
                "location": "\(directory)", "format": "\(marker)",
            ])
        } else if marker != expected {
            throw StorageError(.unsupportedFormat, "\(directory) holds format \(marker ?? "?"), this version reads \(storage.storageFormat)")
        }
        let recordedVersion = CatalogVersion(effectiveFrom: newest.effectiveFrom, size: newest.json.count)
        guard let given, given != recorded else { return (recorded, recordedVersion) }
        // Each a successor of the other: the same products and entitlements, other settings of
        // the books (which change no rule): the given one is recorded.
        let sameRules = (try? given.checkSuccessor(recorded)) != nil && (try? recorded.checkSuccessor(given)) != nil
        if storage.isShared, !sameRules, (try? given.checkSuccessor(recorded)) != nil {
            // Another process sharing the ledger grew the catalog past this one's (a rolling
            // upgrade): the recorded catalog governs.
            logger.info("the ledger's catalog has grown past the one given; using the ledger's", metadata: [
                "given": "\(given.products.count)", "recorded": "\(recorded.products.count)",
            ])
            return (recorded, recordedVersion)
        }
        try recorded.checkSuccessor(given)
        guard !storage.isReadOnly else {
            throw CatalogError(.conflict, "the ledger is open read-only; its catalog cannot grow")
        }
        let grown = try storage.write { writer -> UInt64? in
            guard try writer.catalogs().last?.json == newest.json else { return nil }
            let effectiveFrom = try writer.lastPosition() + 1
            try writer.recordCatalog(Array(given.json.utf8), effectiveFrom: effectiveFrom)
            return effectiveFrom
        }
        guard let grown else {
            return try establishCatalog(given, storage: storage, location: directory, copying: copying, logger: logger)
        }
        logger.info("catalog grew", metadata: ["products": "\(recorded.products.count) → \(given.products.count)"])
        return (given, CatalogVersion(effectiveFrom: grown, size: given.json.utf8.count))
    }
}

/// A ledger `ledger copy` is still copying into: its format marker is the storage's with a
/// suffix, so that a copy stopped part-way (Ctrl-C, `kill -9`, a crash) never opens, verifies or
/// serves as a complete ledger; `ledger copy` run again resumes it, and marks it complete only
/// once it verified it against the source.
package enum IncompleteCopy {
    package static let suffix = "+incomplete-copy"

    static func marker(of storage: any LedgerStorage) -> String {
        storage.storageFormat + suffix
    }

    /// The format marker an open expects: a copy's while copying, else the storage's own.
    static func expectedMarker(of storage: any LedgerStorage, copying: Bool) -> String {
        copying ? marker(of: storage) : storage.storageFormat
    }

    /// Throws `incompleteCopy` for an incomplete copy opened by anyone but the copy, and
    /// `unsupportedFormat` for a complete ledger opened as a copy's destination.
    static func check(_ marker: String?, of storage: any LedgerStorage, at location: String, copying: Bool) throws {
        if !copying, marker == self.marker(of: storage) {
            throw StorageError(
                .incompleteCopy,
                "\(location) holds an incomplete copy: `ledger copy` stopped before it had copied and verified it; "
                    + "run the same `ledger copy` again to resume it, or remove it")
        }
        if copying, marker == storage.storageFormat {
            throw StorageError(.unsupportedFormat, "\(location) already holds a complete ledger")
        }
    }
}

extension Ledger {
    /// Marks a ledger opened with `Configuration.copying` complete, once the copy verified.
    package func markCopyComplete() throws {
        try storage.write { try $0.setFormatMarker(storage.storageFormat) }
    }
}

/// How an open rebuilds the projections.
enum Opening {
    enum Source: CustomStringConvertible {
        case snapshot(UInt64, tail: UInt64)
        case fullReplay(UInt64)

        var description: String {
            switch self {
            case .snapshot(let position, let tail): "snapshot at \(position) + \(tail) events"
            case .fullReplay(let events): "full replay of \(events) events"
            }
        }
    }

    /// From the newest snapshot and the log after it when the snapshot is usable; otherwise
    /// (an older format, other rules, a bad checksum, a position beyond the log) a warning and
    /// a replay of the whole log, followed, when writable, by a fresh snapshot.
    static func projections(
        storage: any LedgerStorage, catalog: Catalog, configuration: Ledger.Configuration
    ) throws -> (live: LiveProjections, source: Source) {
        let logger = configuration.logger
        let log = LogReader(storage: storage)
        // One view: on shared storage a snapshot written between two reads would look beyond
        // the log.
        let (last, newest) = try storage.read { reader in
            let last = try reader.lastPosition()
            return (last, try SnapshotStates.newest(reader, lastPosition: last))
        }
        if configuration.useSnapshots, case .success(let header)? = newest {
            let live = LiveProjections(storage: storage, catalog: catalog, logger: logger, cacheCapacity: configuration.cachedAccounts, snapshot: header)
            try replayTail(into: live, through: last, log: log, catalog: catalog)
            return (live, .snapshot(header.position, tail: last - header.position))
        }
        if configuration.useSnapshots, case .failure(let problem)? = newest {
            logger.warning("ignoring the newest snapshot; replaying the log from the start", metadata: ["reason": "\(problem)"])
        }
        let state = try log.state(at: last, catalog: catalog, useSnapshots: false, logger: logger)
        let live = LiveProjections(storage: storage, catalog: catalog, logger: logger, cacheCapacity: configuration.cachedAccounts, replayed: state)
        let due = configuration.snapshotInterval.map { last >= $0 } ?? false
        if !storage.isReadOnly, configuration.useSnapshots, newest != nil || due {
            try live.writeSnapshot(keep: max(2, configuration.snapshotsKept))
        }
        return (live, .fullReplay(last))
    }

    /// Applies the events after the snapshot, in chunks, each in one read transaction, with the
    /// ledger-wide facts as they stood before each event.
    static func replayTail(into live: LiveProjections, through last: UInt64, log: LogReader, catalog: Catalog) throws {
        var next = live.position + 1
        while next <= last {
            let end = min(last, next + UInt64(LogReader.chunkSize) - 1)
            try log.storage.read { reader in
                try replay(reader, into: live, through: end, catalog: catalog)
            }
            next = end + 1
        }
    }

    /// Applies the records after the live position through `end`, as `reader` sees them, and
    /// publishes them.
    static func replay(_ reader: any LedgerStorageReader, into live: LiveProjections, through end: UInt64, catalog: Catalog) throws {
        let next = live.position + 1
        guard next <= end else { return }
        let facts = FactsAsOf(reader: reader, position: next - 1, names: live.storage.accountNames)
        var session = ProjectionSession(live: live, reader: reader, facts: facts, catalog: catalog, position: next - 1)
        let ahead = { (events: [Event]) in try facts.prefetch(events.compactMap { Projector.transactionLookedUp(by: $0).map { UTF8Key($0) } }) }
        // A chunk at a time (a catch-up after a long silence may span millions of events): what
        // a remote storage's reading holds at once, and its read-ahead, stay bounded.
        try LogReader.forEachChunk(from: next, through: end) { first, last in
            try LogReader.forEachDecoded(reader, storage: live.storage, from: first, through: last, readingProofs: false, ahead: ahead) { record in
                facts.position = record.position - 1
                if record.event.type == .forgotten {
                    // Another process forgot a customer (or this open replays a forget): what this
                    // one read of the names it renamed is stale, and so is what it holds under them.
                    session.publish(to: live)
                    let renames = try LogReader.renames(ofForgetAt: record.position, reader: reader, names: live.storage.accountNames)
                    live.abandonSnapshot()
                    live.publish(position: record.position - 1) { $0.rename(renames, droppingCache: true) }
                    session = ProjectionSession(live: live, reader: reader, facts: facts, catalog: catalog, position: record.position - 1)
                    try session.apply(record.event, at: record.position)
                    session.publish(to: live)
                    session = ProjectionSession(live: live, reader: reader, facts: facts, catalog: catalog, position: record.position)
                    live.forgets.publish(position: record.position, renames: renames)
                    return
                }
                try session.apply(record.event, at: record.position)
            }
        }
        session.publish(to: live)
    }
}
