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

    func run() -> VerificationReport {
        var intact: UInt64 = 0
        do {
            try storage.read { reader in try check(reader, intact: &intact) }
            return VerificationReport(intactRecords: intact, damage: nil)
        } catch let found as Found {
            return VerificationReport(intactRecords: intact, damage: found.damage)
        } catch let error as StorageError where error.code == .damaged {
            // A malformed log key.
            return VerificationReport(intactRecords: intact, damage: .init(kind: .sequenceGap, position: intact + 1, message: error.message))
        } catch {
            let damage = VerificationReport.Damage(kind: .storage, position: intact + 1, message: "\(StorageErrors.map(error, maximumSize: nil))")
            return VerificationReport(intactRecords: intact, damage: damage)
        }
    }

    private func damage(_ kind: VerificationReport.DamageKind, _ position: UInt64?, _ message: String) -> Found {
        Found(damage: .init(kind: kind, position: position, message: message))
    }

    private func check(_ reader: any LedgerStorageReader, intact: inout UInt64) throws {
        let catalogs = try loadCatalogs(reader)
        var context = VerificationContext(reader: reader, catalog: catalogs[0].catalog)
        var nextCatalog = 1
        var expected: UInt64 = 1
        var credited = 0
        try reader.forEachRecord(from: 0, through: .max) { position, bytes in
            guard position == expected else {
                throw damage(.sequenceGap, expected, "the log jumps from position \(expected - 1) to \(position)")
            }
            let event: Event
            switch Result(catching: { () throws(LogRecordCodec.Damage) in try LogRecordCodec.decode(bytes, expectedPosition: position) }) {
            case .success(let decoded):
                event = decoded
            case .failure(.checksum):
                throw damage(.checksum, position, "the record's bytes do not match its CRC-32C")
            case .failure(let other):
                throw damage(.undecodable, position, "\(other)")
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
            guard (try? reader.position(ofEventID: event.id)) == position else {
                throw damage(.indexMismatch, position, "the event-id index does not point event \"\(event.id)\" here")
            }
            guard (try? reader.hasHistoryEntry(account: event.account, position: position)) == true else {
                throw damage(.indexMismatch, position, "the history index lacks this event of account \"\(event.account)\"")
            }
            if case .transactionUpdated(let update) = event.payload,
               update.state == .purchased || update.state == .restored, let transaction = update.transaction {
                let entry = EntryReference(account: event.account, payment: update.payment)
                guard (try? reader.holder(ofTransaction: transaction)) == entry else {
                    throw damage(.indexMismatch, position, "the transaction index does not give transaction \"\(transaction)\" to this entry")
                }
                context.holders[UTF8Key(transaction)] = entry
                credited += 1
            }
            do {
                try context.state.apply(event, at: position, catalog: context.catalog)
            } catch {
                throw damage(.ruleViolation, position, "\(error)")
            }
            intact = position
            expected += 1
            return true
        }
        let counts = try reader.counts()
        let records = Int(expected - 1)
        if counts.records != records {
            throw damage(.sequenceGap, expected, "the log holds \(counts.records) records, but they run 1 through \(records) only")
        }
        if counts.eventIDs != records {
            throw damage(.indexMismatch, nil, "the event-id index has \(counts.eventIDs) entries for \(records) events")
        }
        if counts.historyEntries != records {
            throw damage(.indexMismatch, nil, "the history index has \(counts.historyEntries) entries for \(records) events")
        }
        if counts.transactions != credited {
            throw damage(.indexMismatch, nil, "the transaction index has \(counts.transactions) entries for \(credited) credited transactions")
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
    var holders: [UTF8Key: EntryReference] = [:]
    var position: UInt64 = 0

    init(reader: any LedgerStorageReader, catalog: Catalog) {
        self.reader = reader
        self.catalog = catalog
    }

    /// The index's answer, checked against the log: an index entry naming an earlier record
    /// that does not carry this id is damage to the index, not a duplicate.
    func position(ofEventID id: String) throws -> UInt64? {
        guard let found = try reader.position(ofEventID: id), found <= position else { return nil }
        var matches = false
        try reader.forEachRecord(from: found, through: found) { key, bytes in
            matches = key == found && (try? LogRecordCodec.decode(bytes, expectedPosition: key))?.id == id
            return false
        }
        guard matches else { throw IndexDisagreement(message: "the event-id index points event \"\(id)\" at position \(found), which holds another event") }
        return found
    }

    func holder(ofTransaction transaction: String) throws -> EntryReference? {
        holders[UTF8Key(transaction)]
    }

    func entry(_ account: UTF8Key, _ payment: UTF8Key) -> QueueEntry? {
        state.entry(account, payment)
    }

    func balance(_ account: UTF8Key, _ item: UTF8Key) -> Int64? {
        state.balance(account, item)
    }

    func accountHolds(_ account: UTF8Key, transaction: UTF8Key) -> Bool {
        state.accountHolds(account, transaction: transaction)
    }

    func revocation(of transaction: UTF8Key) -> UInt64? {
        state.revocation(of: transaction)
    }

    func consumableCredit(of transaction: UTF8Key) -> EntryReference? {
        state.consumableCredit(of: transaction)
    }
}
