/// What `ledger verify` found.
public struct VerificationReport: Sendable, Hashable {
    public enum DamageKind: String, Sendable, Hashable {
        /// A record's bytes do not match its CRC-32C.
        case checksum
        /// Log keys do not run 1, 2, 3, … without a gap.
        case sequenceGap
        /// A record's checksum holds but its content cannot be decoded (unknown version, wrong
        /// position, malformed fields).
        case undecodable
        /// A record's event breaks the rules against the log before it.
        case ruleViolation
        /// An index (event ids, store transactions, account history) disagrees with the log.
        case indexMismatch
        /// The recorded catalogs are missing or unreadable, or one changes an earlier product.
        case catalog
        /// A snapshot is damaged or disagrees with the state replayed from the log.
        case snapshot
        /// The clock readings are out of order, or one is past the log's end.
        case clock
        /// The storage engine itself reported damage.
        case storage
    }

    public struct Damage: Sendable, Hashable, CustomStringConvertible {
        public var kind: DamageKind
        /// The first damaged log position, when the damage is in or about a record.
        public var position: UInt64?
        public var message: String

        public var description: String {
            position.map { "position \($0): \(kind.rawValue): \(message)" } ?? "\(kind.rawValue): \(message)"
        }
    }

    /// Records checked and found intact, from position 1.
    public var intactRecords: UInt64
    /// The first damage found; nil when the ledger is intact.
    public var damage: Damage?

    public var isIntact: Bool { damage == nil }
}

/// Checks a ledger in one read transaction (a consistent snapshot, which holds old pages for
/// the duration, as an audit should): every record's checksum,
/// version, position and encoding; the key sequence; every event against the rules, replayed
/// from the start; and the three indexes against the log.
struct LedgerVerifier {
    let storage: any LedgerStorage

    private struct Found: Error {
        var damage: VerificationReport.Damage
    }

    func run(progress: (UInt64) -> Void = { _ in }) -> VerificationReport {
        var intact: UInt64 = 0
        do {
            try storage.read { reader in try check(reader, intact: &intact, progress: progress) }
            return VerificationReport(intactRecords: intact, damage: nil)
        } catch let found as Found {
            return VerificationReport(intactRecords: intact, damage: found.damage)
        } catch let error as StorageError where error.code == .damaged {
            // A malformed log key.
            return VerificationReport(intactRecords: intact, damage: .init(kind: .sequenceGap, position: intact + 1, message: error.message))
        } catch {
            let damage = VerificationReport.Damage(kind: .storage, position: intact + 1, message: "\(StorageErrors.map(error))")
            return VerificationReport(intactRecords: intact, damage: damage)
        }
    }

    private func damage(_ kind: VerificationReport.DamageKind, _ position: UInt64?, _ message: String) -> Found {
        Found(damage: .init(kind: kind, position: position, message: message))
    }

    private func check(_ reader: any LedgerStorageReader, intact: inout UInt64, progress: (UInt64) -> Void) throws {
        let catalogs = try loadCatalogs(reader)
        var snapshots = try snapshotsToCheck(reader)
        var context = VerificationContext(reader: reader, catalog: catalogs[0].catalog)
        var nextCatalog = 1
        var expected: UInt64 = 1
        /// The account of the first report naming each customer: what the customers' index holds.
        var customers: [UTF8Key: String] = [:]
        let recordVersion = try expectedRecordVersion(reader)
        /// The account table as this read sees it, not as this process remembers it.
        let names = AccountNames()
        /// Handles are given in order of first mention: the greatest one so far.
        var lastHandle: UInt64 = 0
        var handleProblem: String?
        /// Records whose proof is kept apart: what the proofs table holds.
        var proofs = 0
        try reader.forEachRecord(from: 0, through: .max) { position, bytes in
            guard position == expected else {
                throw damage(.sequenceGap, expected, "the log jumps from position \(expected - 1) to \(position)")
            }
            let event: Event
            let decoded = Result { () throws(LogRecordCodec.Damage) in
                try LogRecordCodec.decode(bytes, expectedPosition: position) { handle in
                    guard handle <= lastHandle + 1 else {
                        handleProblem = "the record names account handle \(handle) before handle \(lastHandle + 1)"
                        return nil
                    }
                    guard let name = try names.name(of: handle, reader: reader) else { return nil }
                    if handle == lastHandle + 1 {
                        guard try reader.accountHandle(of: name) == handle else {
                            handleProblem = "the account table's index does not give \"\(name)\" handle \(handle)"
                            return nil
                        }
                        lastHandle = handle
                    }
                    return name
                } proof: { position in
                    // A forgotten customer's proofs are gone (the decode checks the record names one).
                    let stored = try reader.proof(at: position)
                    if stored != nil { proofs += 1 }
                    return stored
                }
            }
            switch decoded {
            case .success(let decoded):
                event = decoded
            case .failure(.checksum):
                throw damage(.checksum, position, "the record's bytes do not match its CRC-32C")
            case .failure(let other):
                if let handleProblem { throw damage(.indexMismatch, position, handleProblem) }
                throw damage(.undecodable, position, "\(other)")
            }
            // A forget renamed these handles to their pseudonyms, for good.
            if event.type == .forgotten {
                for handle in LogRecordCodec.renamedHandles(in: bytes) ?? [] {
                    guard try names.name(of: handle, reader: reader) == Forgotten.pseudonym(ofHandle: handle) else {
                        throw damage(.indexMismatch, position, "the forget renamed account handle \(handle), which the account table does not name as its pseudonym")
                    }
                }
            }
            let version = LogRecordCodec.version(of: bytes)
            guard version == recordVersion else {
                throw damage(.undecodable, position, "a record of format \(version) in a ledger of format \(recordVersion)")
            }
            while nextCatalog < catalogs.count, catalogs[nextCatalog].effectiveFrom <= position {
                context.catalog = catalogs[nextCatalog].catalog
                nextCatalog += 1
            }
            context.position = position - 1
            let decision: Decision
            do {
                decision = try Rules.decide(event, in: context)
            } catch let disagreement as IndexDisagreement {
                throw damage(.indexMismatch, position, disagreement.message)
            } catch {
                throw damage(.indexMismatch, position, "an index cannot be read: \(error)")
            }
            switch decision {
            case .append: break
            case .duplicate(let earlier):
                throw damage(.ruleViolation, position, "event \"\(event.id)\" repeats the event at position \(earlier)")
            case .reject(let error):
                throw damage(.ruleViolation, position, "event \"\(event.id)\" is rejected by the rules: \(error)")
            }
            do {
                try context.state.apply(event, at: position, catalog: context.catalog)
            } catch {
                throw damage(.ruleViolation, position, "\(error)")
            }
            try checkIndexes(reader, event: event, position: position, state: context.state)
            // A forgotten customer's id (its pseudonym) links no account: its entry went with the forget.
            if let customer = event.appTransaction, Forgotten.handle(ofPseudonym: customer) == nil {
                let key = UTF8Key(customer)
                let first = customers[key] ?? event.account
                customers[key] = first
                guard (try? reader.account(ofAppTransaction: customer)) == first else {
                    throw damage(.indexMismatch, position, "the customers' index does not give appTransactionId \"\(customer)\" to account \"\(first)\"")
                }
            }
            intact = position
            expected += 1
            if position & LogReader.progressMask == 0 { progress(position) }
            while let snapshot = snapshots.first, snapshot == position {
                try checkSnapshot(reader, at: snapshot, state: context.state)
                snapshots.removeFirst()
            }
            return true
        }
        let records = Int(expected - 1)
        if let beyond = snapshots.first {
            throw damage(.snapshot, beyond, "a snapshot reflects position \(beyond), beyond the log's end at \(records)")
        }
        let counts = try reader.counts()
        if counts.records != records {
            throw damage(.sequenceGap, expected, "the log holds \(counts.records) records, but they run 1 through \(records) only")
        }
        if counts.eventIDs != records {
            throw damage(.indexMismatch, nil, "the event-id index has \(counts.eventIDs) entries for \(records) events")
        }
        if counts.historyEntries != records {
            throw damage(.indexMismatch, nil, "the history index has \(counts.historyEntries) entries for \(records) events")
        }
        if counts.transactions != context.state.holders.count {
            throw damage(.indexMismatch, nil, "the transaction index has \(counts.transactions) entries for \(context.state.holders.count) held transactions")
        }
        if counts.revocations != context.state.revocations.count {
            throw damage(.indexMismatch, nil, "the revocation index has \(counts.revocations) entries for \(context.state.revocations.count) revoked transactions")
        }
        if counts.appTransactions != customers.count {
            throw damage(.indexMismatch, nil, "the customers' index has \(counts.appTransactions) entries for \(customers.count) customers the log names")
        }
        if counts.accountHandles != Int(lastHandle) {
            throw damage(.indexMismatch, nil, "the account table has \(counts.accountHandles) handles; the log names \(lastHandle)")
        }
        if counts.proofs != proofs {
            throw damage(.indexMismatch, nil, "the proofs table has \(counts.proofs) proofs; the log's records keep \(proofs) apart")
        }
        try checkClock(reader, last: expected - 1)
    }

    /// The clock readings, in (position, time) order, none past `last`, the log's end.
    private func checkClock(_ reader: any LedgerStorageReader, last: UInt64) throws {
        var previous: ClockReading?
        do {
            while case let readings = try reader.clockReadings(after: previous, limit: 4096), !readings.isEmpty {
                for reading in readings {
                    if let previous, reading <= previous {
                        throw damage(.clock, nil, "the clock reads position \(reading.position) at \(reading.time) after position \(previous.position) at \(previous.time)")
                    }
                    if reading.position > last {
                        throw damage(.clock, nil, "the clock has a reading at position \(reading.position), past the log's end, \(last)")
                    }
                    previous = reading
                }
            }
        } catch let error as StorageError where error.code == .damaged {
            throw damage(.clock, nil, error.message)
        }
    }

    /// The record format the ledger's marker promises: format 1 for a ledger from before
    /// account handles, the current one otherwise.
    private func expectedRecordVersion(_ reader: any LedgerStorageReader) throws -> UInt8 {
        let marker = try reader.formatMarker()
        return marker.map { storage.readableFormats.contains($0) } == true ? LogRecordCodec.formatOneVersion : LogRecordCodec.formatVersion
    }

    /// The indexes written with the record at `position` agree with the log.
    private func checkIndexes(_ reader: any LedgerStorageReader, event: Event, position: UInt64, state: LedgerState) throws {
        guard (try? reader.position(ofEventID: event.id, through: position)) == position else {
            throw damage(.indexMismatch, position, "the event-id index does not point event \"\(event.id)\" here")
        }
        guard (try? reader.hasHistoryEntry(account: event.account, position: position)) == true else {
            throw damage(.indexMismatch, position, "the history index lacks this event of account \"\(event.account)\"")
        }
        switch event.payload {
        case .transactionUpdated(let update):
            guard update.state == .purchased || update.state == .restored, let transaction = update.transaction else { break }
            guard (try? reader.holder(ofTransaction: transaction)) == state.holders[UTF8Key(transaction)] else {
                throw damage(.indexMismatch, position, "the transaction index disagrees about transaction \"\(transaction)\"")
            }
        case .revoked(let revoked):
            guard (try? reader.revocation(ofTransaction: revoked.transaction)) == position else {
                throw damage(.indexMismatch, position, "the revocation index disagrees about transaction \"\(revoked.transaction)\"")
            }
        default:
            break
        }
    }

    /// The positions of the stored snapshots this version reads, in order. A snapshot written
    /// under an older format or other rules is not damage (it is ignored); a bad checksum is.
    private func snapshotsToCheck(_ reader: any LedgerStorageReader) throws -> [UInt64] {
        var positions: [UInt64] = []
        for stored in try SnapshotStates.headers(reader) {
            switch stored.header {
            case .success(let header):
                positions.append(header.position)
            case .failure(let problem) where problem == .otherRules:
                continue
            case .failure(.olderFormat):
                continue
            case .failure(let problem):
                throw damage(.snapshot, stored.position, "the snapshot's header is unusable: \(problem)")
            }
        }
        return positions
    }

    /// Every account state the snapshot at `position` reads equals the replayed one.
    private func checkSnapshot(_ reader: any LedgerStorageReader, at position: UInt64, state: LedgerState) throws {
        var newest: (account: String, bytes: [UInt8])?
        var seen = 0
        func compare() throws {
            guard let (account, bytes) = newest else { return }
            seen += 1
            let decoded: AccountState
            do {
                decoded = try bytes.withUnsafeBytes { raw throws(AccountStateCodec.Damage) in try AccountStateCodec.decode(raw) }
            } catch {
                throw damage(.snapshot, position, "the snapshot's state of account \"\(account)\" is damaged (\(error))")
            }
            guard state.accounts[UTF8Key(account)] == decoded else {
                throw damage(.snapshot, position, "the snapshot's state of account \"\(account)\" differs from the replayed one")
            }
            newest = nil
        }
        try reader.forEachAccountState { account, version, bytes in
            if let current = newest, !sameBytes(current.account, account) { try compare() }
            if version <= position { newest = (account, Array(bytes)) }
        }
        try compare()
        guard seen == state.accounts.count else {
            throw damage(.snapshot, position, "the snapshot holds \(seen) accounts; the log has \(state.accounts.count) by then")
        }
    }

    private func loadCatalogs(_ reader: any LedgerStorageReader) throws -> [(effectiveFrom: UInt64, catalog: Catalog)] {
        var catalogs: [(effectiveFrom: UInt64, catalog: Catalog)] = []
        for (effectiveFrom, json) in try reader.catalogs() {
            let catalog: Catalog
            do {
                catalog = try Catalog(json: json)
            } catch {
                throw damage(.catalog, nil, "the catalog recorded for position \(effectiveFrom) cannot be read: \(error)")
            }
            if let previous = catalogs.last?.catalog {
                do {
                    try previous.checkSuccessor(catalog)
                } catch {
                    throw damage(.catalog, nil, "the catalog recorded for position \(effectiveFrom): \(error.message)")
                }
            }
            catalogs.append((effectiveFrom, catalog))
        }
        guard let first = catalogs.first, first.effectiveFrom == 1 else {
            throw damage(.catalog, nil, "the ledger records no catalog for its first position")
        }
        return catalogs
    }
}

/// The rules' view during verification: the state replayed so far, and the indexes as they
/// were before the record under check (an index entry pointing at a later position does not
/// count yet).
struct IndexDisagreement: Error {
    var message: String
}

private struct VerificationContext: RuleContext {
    let reader: any LedgerStorageReader
    var catalog: Catalog
    var state = LedgerState()
    var position: UInt64 = 0

    init(reader: any LedgerStorageReader, catalog: Catalog) {
        self.reader = reader
        self.catalog = catalog
    }

    /// The index's answer, checked against the log: an index entry naming an earlier record
    /// that does not carry this id is damage to the index, not a duplicate.
    func position(ofEventID id: String) throws -> UInt64? {
        guard let found = try reader.position(ofEventID: id, through: position) else { return nil }
        var matches = false
        _ = try reader.record(at: found) { bytes in
            let decoded = try? LogRecordCodec.decode(bytes, expectedPosition: found) { handle in
                try reader.accountNames(handles: [handle]).first?.account
            } proof: { try reader.proof(at: $0) }
            matches = decoded?.id == id
        }
        guard matches else { throw IndexDisagreement(message: "the event-id index points event \"\(id)\" at position \(found), which holds another event") }
        return found
    }

    func read<Answer: Sendable>(_ account: UTF8Key, _ query: (AccountState) -> Answer?) throws -> Answer? {
        state.read(account, query)
    }

    func wholeState(_ account: UTF8Key) throws -> AccountState? {
        state.accounts[account]
    }

    func revocation(of transaction: UTF8Key) throws -> UInt64? {
        state.revocation(of: transaction)
    }

    func holder(of transaction: UTF8Key) throws -> TransactionHolder? {
        state.holder(of: transaction)
    }
}
