/// The binary form of one account's projected state in a snapshot:
///
///     byte 0     format version (`AccountState.version`)
///     varint     entries, then each: payment, product, product type, quantity, openedAt,
///                state, stateSetAt, a presence mask (transaction, original transaction,
///                expiresAt, finishedAt), those fields, and the downloads (id, state, progress)
///     varint     balances, then each: item, amount (zigzag)
///     varint     store transactions, then each: signedAt, event id, product type, group, and
///                the `storeTransaction` fields (`StoreEventCoding`)
///     varint     renewal infos, then each: signedAt, event id, the `renewalInfo` fields
///     byte       consent: 0 none, 1 declined, 2 consented; then signedAt, event id
///     varint     transactions reported in several environments, then each: how many reports,
///                then each as a store transaction above; then the same for renewal infos
///     byte       app transaction: 0 none, 1 present; then signedAt, event id, its fields
///                (`AppStoreCallCoding`)
///     varint     chains transferred, then each: original transaction, side (0 leaving,
///                1 joining, 2 sharing), the other account, position
///     4 bytes    CRC-32C (little-endian) of every byte before it
enum AccountStateCodec {
    static func encode(_ state: AccountState) -> [UInt8] {
        var writer = ByteWriter(capacity: 64 + state.entries.count * 96)
        writer.byte(AccountState.version)
        // Sorted, so that the same state always has the same bytes.
        writer.varint(UInt64(state.entries.count))
        for entry in state.entries.values.sorted(by: { $0.paymentID < $1.paymentID }) {
            entry.paymentID.withBytes { writer.string(utf8: $0) }
            writer.string(entry.product)
            writer.byte(UInt8(Catalog.ProductType.allCases.firstIndex(of: entry.productType)!))
            writer.varint(UInt64(entry.quantity))
            writer.varint(entry.openedAt)
            writer.byte(UInt8(QueueEntryState.allCases.firstIndex(of: entry.state)!))
            writer.varint(entry.stateSetAt)
            var mask: UInt8 = 0
            if entry.transaction != nil { mask |= 1 }
            if entry.originalTransaction != nil { mask |= 2 }
            if entry.expiresAt != nil { mask |= 4 }
            if entry.finishedAt != nil { mask |= 8 }
            writer.byte(mask)
            if let value = entry.transaction { writer.string(value) }
            if let value = entry.originalTransaction { writer.string(value) }
            if let value = entry.expiresAt { writer.timestamp(value) }
            if let value = entry.finishedAt { writer.varint(value) }
            writer.varint(UInt64(entry.downloads.count))
            for download in entry.downloads {
                writer.string(download.id)
                writer.byte(UInt8(DownloadState.allCases.firstIndex(of: download.state)!))
                writer.double(download.progress)
            }
        }
        writer.varint(UInt64(state.balances.count))
        for item in state.balances.keys.sorted() {
            writer.string(item.string)
            writer.signed(state.balances[item]!)
        }
        writer.varint(UInt64(state.storeTransactions.count))
        for record in state.storeTransactions.values {
            writeStoreTransaction(record, to: &writer)
        }
        writer.varint(UInt64(state.renewals.count))
        for original in state.renewals.keys.sorted() {
            writeRenewal(state.renewals[original]!, to: &writer)
        }
        if let consent = state.consent {
            writer.byte(consent.consented ? 2 : 1)
            writer.timestamp(consent.signedAt)
            writer.string(consent.eventID)
        } else {
            writer.byte(0)
        }
        writer.varint(UInt64(state.environmentReports.count))
        for transaction in state.environmentReports.keys.sorted() {
            let records = state.environmentReports[transaction]!
            writer.varint(UInt64(records.count))
            for record in records { writeStoreTransaction(record, to: &writer) }
        }
        writer.varint(UInt64(state.environmentRenewals.count))
        for original in state.environmentRenewals.keys.sorted() {
            let records = state.environmentRenewals[original]!
            writer.varint(UInt64(records.count))
            for record in records { writeRenewal(record, to: &writer) }
        }
        if let record = state.appTransaction {
            writer.byte(1)
            writer.timestamp(record.signedAt)
            writer.string(record.eventID)
            writer.appTransaction(record.info)
        } else {
            writer.byte(0)
        }
        writer.varint(UInt64(state.transfers.count))
        for chain in state.transfers.keys.sorted() {
            let transfer = state.transfers[chain]!
            writer.string(chain.string)
            let side: UInt8 = switch transfer.side { case .leaving: 0; case .joining: 1; case .sharing: 2 }
            writer.byte(side)
            writer.string(transfer.other)
            writer.varint(transfer.position)
        }
        writer.uint32(CRC32C.checksum(writer.bytes))
        return writer.bytes
    }

    private static func writeStoreTransaction(_ record: StoreTransactionRecord, to writer: inout ByteWriter) {
        writer.timestamp(record.signedAt)
        writer.string(record.eventID)
        writer.caseIndex(record.productType)
        writer.string(record.group)
        writer.storeTransaction(record.fact)
    }

    private static func writeRenewal(_ record: RenewalRecord, to writer: inout ByteWriter) {
        writer.timestamp(record.signedAt)
        writer.string(record.eventID)
        writer.renewalInfo(record.info)
    }

    private static func readStoreTransaction(from reader: inout ByteReader) throws -> StoreTransactionRecord {
        let signedAt = try reader.timestamp()
        let eventID = try reader.string()
        let productType: Catalog.ProductType = try reader.caseIndex()
        let group = try reader.string()
        return StoreTransactionRecord(
            fact: try reader.storeTransaction(), signedAt: signedAt, eventID: eventID, productType: productType, group: group)
    }

    private static func readRenewal(from reader: inout ByteReader) throws -> RenewalRecord {
        let signedAt = try reader.timestamp()
        let eventID = try reader.string()
        return RenewalRecord(info: try reader.renewalInfo(), signedAt: signedAt, eventID: eventID)
    }

    struct Damage: Error, CustomStringConvertible {
        var description: String
    }

    static func decode(_ bytes: UnsafeRawBufferPointer) throws(Damage) -> AccountState {
        guard bytes.count >= 5 else { throw Damage(description: "\(bytes.count) bytes") }
        let body = UnsafeRawBufferPointer(rebasing: bytes[0..<bytes.count - 4])
        let stored = UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: bytes.count - 4, as: UInt32.self))
        guard CRC32C.checksum(body) == stored else { throw Damage(description: "checksum mismatch") }
        guard body[0] == AccountState.version else { throw Damage(description: "unknown version \(body[0])") }
        var reader = ByteReader(UnsafeRawBufferPointer(rebasing: body[1...]))
        do {
            var state = AccountState()
            let entryCount = try reader.varint()
            state.entries.reserveCapacity(Int(min(entryCount, 1 << 20)))
            for _ in 0..<entryCount {
                let payment = try reader.string()
                let product = try reader.string()
                let type = try value(try reader.byte(), in: Catalog.ProductType.allCases)
                let quantity = try reader.varint()
                guard (1...10).contains(quantity) else { throw Damage(description: "quantity out of range") }
                var entry = QueueEntry(
                    payment: payment, product: product, productType: type, quantity: Int(quantity), openedAt: try reader.varint())
                entry.state = try value(try reader.byte(), in: QueueEntryState.allCases)
                entry.stateSetAt = try reader.varint()
                let mask = try reader.byte()
                guard mask < 16 else { throw Damage(description: "unknown field mask") }
                if mask & 1 != 0 { entry.transaction = try reader.string() }
                if mask & 2 != 0 { entry.originalTransaction = try reader.string() }
                if mask & 4 != 0 { entry.expiresAt = try reader.timestamp() }
                if mask & 8 != 0 {
                    let finishedAt = try reader.varint()
                    guard finishedAt > 0 else { throw Damage(description: "an entry finished at position 0") }
                    entry.finishedAt = finishedAt
                }
                let downloadCount = try reader.varint()
                for _ in 0..<downloadCount {
                    entry.downloads.append(QueueEntry.Download(
                        id: try reader.string(), state: try value(try reader.byte(), in: DownloadState.allCases),
                        progress: try reader.double()))
                }
                state.entries.update(entry)
            }
            for _ in 0..<(try reader.varint()) {
                let item = try reader.string()
                state.balances[UTF8Key(item)] = try reader.signed()
            }
            for _ in 0..<(try reader.varint()) {
                let record = try readStoreTransaction(from: &reader)
                state.storeTransactions[UTF8Key(record.fact.transaction)] = record
            }
            for _ in 0..<(try reader.varint()) {
                let record = try readRenewal(from: &reader)
                state.renewals[UTF8Key(record.info.originalTransaction)] = record
            }
            switch try reader.byte() {
            case 0: break
            case let marker where marker <= 2:
                state.consent = ConsentRecord(consented: marker == 2, signedAt: try reader.timestamp(), eventID: try reader.string())
            default: throw Damage(description: "unknown consent marker")
            }
            for _ in 0..<(try reader.varint()) {
                var records: [StoreTransactionRecord] = []
                for _ in 0..<(try reader.varint()) { records.append(try readStoreTransaction(from: &reader)) }
                guard let first = records.first else { throw Damage(description: "an empty list of reports") }
                state.environmentReports[UTF8Key(first.fact.transaction)] = records
            }
            for _ in 0..<(try reader.varint()) {
                var records: [RenewalRecord] = []
                for _ in 0..<(try reader.varint()) { records.append(try readRenewal(from: &reader)) }
                guard let first = records.first else { throw Damage(description: "an empty list of renewal infos") }
                state.environmentRenewals[UTF8Key(first.info.originalTransaction)] = records
            }
            switch try reader.byte() {
            case 0: break
            case 1:
                let signedAt = try reader.timestamp()
                let eventID = try reader.string()
                state.appTransaction = AppTransactionRecord(info: try reader.appTransaction(), signedAt: signedAt, eventID: eventID)
            default: throw Damage(description: "unknown app transaction marker")
            }
            for _ in 0..<(try reader.varint()) {
                let chain = try reader.string()
                let side: Transferred.Side
                switch try reader.byte() {
                case 0: side = .leaving
                case 1: side = .joining
                case 2: side = .sharing
                default: throw Damage(description: "unknown transfer side")
                }
                state.transfers[UTF8Key(chain)] = ChainTransfer(side: side, other: try reader.string(), position: try reader.varint())
            }
            guard reader.isAtEnd else { throw Damage(description: "trailing bytes") }
            return state
        } catch let damage as Damage {
            throw damage
        } catch {
            throw Damage(description: "\(error)")
        }
    }

    private static func value<T>(_ index: UInt8, in cases: [T]) throws -> T {
        guard Int(index) < cases.count else { throw Damage(description: "unknown enumeration value \(index)") }
        return cases[Int(index)]
    }
}
