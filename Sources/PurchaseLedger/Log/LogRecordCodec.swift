/// The binary form of one log record.
///
///     byte 0        format version (2; 1 in ledgers written before account handles)
///     varint        the record's own log position (so a record found under the wrong key,
///                   or copied elsewhere, is detected)
///     byte          event type tag (1 paymentAdded … 6 revoked, 7 storeTransaction, 8 renewalInfo,
///                   9 consumptionConsent, 10 consumptionRequest, 11 consumptionAnswer,
///                   12 appStoreCall, 13 appTransaction, 14 transferred, 15 shared,
///                   16 forgotten)
///     string        id                     (string = varint length + UTF-8)
///     account       the account            (format 2: its handle, a varint from 1; format 1: a string)
///     timestamp     at                     (zigzag varint seconds + varint nanoseconds)
///     …             the type's fields; optional fields behind a presence mask (a byte; a
///                   varint for the store's events, `StoreEventCoding`); a transfer's
///                   `from` and `to` are accounts too
///     …             format 2, for the types that carry them: the personal fields kept out of
///                   the payload (`PersonalFields`: a token's handle, a proof's presence)
///     …             `forgotten`: a varint count, then the handles its commit renamed to their
///                   pseudonyms (the account's, and tokens' only the account's records named), so
///                   that another process reading the record knows which names it must read again
///     4 bytes       CRC-32C (little-endian) of every byte before it
///
/// An account's id is stored once, in the storage's account table (`AccountNames`), and
/// records name it by handle: the id can then be forgotten without rewriting the log, and the
/// handles are dense, assigned in order of first mention, so a log and its copies agree on them.
///
/// JSON is for interchange; the log stores this, which is about a third of the size and
/// decodes without a parser.
package enum LogRecordCodec {
    /// The format records are written in.
    static let formatVersion: UInt8 = 2
    /// The format of ledgers written before account handles: read, never written.
    static let formatOneVersion: UInt8 = 1

    /// What is wrong with a record that does not decode.
    enum Damage: Error, Equatable, CustomStringConvertible {
        case checksum
        case unknownVersion(UInt8)
        case positionMismatch(UInt64)
        /// A format-2 record names an account the account table does not hold.
        case unknownAccountHandle(UInt64)
        /// A format-2 record's proof is not in the proofs table.
        case missingProof
        case undecodable(String)

        var description: String {
            switch self {
            case .checksum: "checksum mismatch"
            case .unknownVersion(let version): "unknown record format version \(version)"
            case .positionMismatch(let found): "record carries position \(found)"
            case .unknownAccountHandle(let handle): "record names account handle \(handle), which the account table lacks"
            case .missingProof: "record's proof is missing from the proofs table"
            case .undecodable(let reason): "undecodable record (\(reason))"
            }
        }
    }

    /// Writes the record's fields in format `version`; `accountHandle` names an account (or a
    /// token) in format 2, which keeps a proof out of the record and returns it (format 1
    /// writes them all inline).
    @discardableResult
    static func encode(
        _ event: Event, position: UInt64, into writer: inout ByteWriter, version: UInt8, renamedHandles: [UInt64] = [],
        accountHandle: (String) throws -> UInt64
    ) rethrows -> String? {
        func account(_ account: String, _ writer: inout ByteWriter) throws {
            if version == formatOneVersion { writer.string(account) } else { writer.varint(try accountHandle(account)) }
        }
        writer.byte(version)
        writer.varint(position)
        writer.byte(tag(of: event.type))
        writer.string(event.id)
        try account(event.account, &writer)
        writer.timestamp(event.at)
        // Only the types that carry personal fields are copied to take them out.
        guard version != formatOneVersion, PersonalFields.apply(to: event.type) else {
            try encode(event.payload, into: &writer, account: account)
            if case .forgotten = event.payload {
                writer.varint(UInt64(renamedHandles.count))
                for handle in renamedHandles { writer.varint(handle) }
            }
            return nil
        }
        var payload = event.payload
        let personal = PersonalFields.separate(&payload)
        try encode(payload, into: &writer, account: account)
        guard let personal else { return nil }
        writer.byte(personal.presence)
        if personal.presence & PersonalFields.tokenBit != 0, let token = personal.token { try account(token, &writer) }
        if let appTransaction = personal.appTransaction { try account(appTransaction, &writer) }
        return personal.proof
    }

    /// Writes the type's fields; `account` writes an account as the record's format does.
    private static func encode(
        _ payload: Event.Payload, into writer: inout ByteWriter, account: (String, inout ByteWriter) throws -> Void
    ) rethrows {
        switch payload {
        case .paymentAdded(let added):
            writer.string(added.payment)
            writer.string(added.product)
            writer.optionalQuantity(added.quantity)
        case .transactionUpdated(let update):
            writer.string(update.payment)
            writer.byte(index(of: update.state, in: TransactionState.allCases))
            var mask: UInt8 = 0
            if update.transaction != nil { mask |= 1 }
            if update.originalTransaction != nil { mask |= 2 }
            if update.error != nil { mask |= 4 }
            if update.expiresAt != nil { mask |= 8 }
            if update.product != nil { mask |= 16 }
            if update.quantity != nil { mask |= 32 }
            writer.byte(mask)
            if let value = update.transaction { writer.string(value) }
            if let value = update.originalTransaction { writer.string(value) }
            if let value = update.error { writer.string(value) }
            if let value = update.expiresAt { writer.timestamp(value) }
            if let value = update.product { writer.string(value) }
            if let value = update.quantity { writer.varint(UInt64(value)) }
        case .downloadUpdated(let download):
            writer.string(download.payment)
            writer.string(download.download)
            writer.byte(index(of: download.state, in: DownloadState.allCases))
            var mask: UInt8 = 0
            if download.progress != nil { mask |= 1 }
            if download.timeRemaining != nil { mask |= 2 }
            writer.byte(mask)
            if let value = download.progress { writer.double(value) }
            if let value = download.timeRemaining { writer.double(value) }
        case .transactionFinished(let finished):
            writer.string(finished.payment)
        case .consumed(let consumed):
            writer.string(consumed.item)
            writer.varint(UInt64(consumed.amount))
        case .revoked(let revoked):
            writer.string(revoked.transaction)
            writer.byte(revoked.reason == nil ? 0 : 1)
            if let reason = revoked.reason { writer.string(reason) }
        case .storeTransaction(let fact):
            writer.storeTransaction(fact)
        case .renewalInfo(let info):
            writer.renewalInfo(info)
        case .consumptionConsent(let consent):
            writer.byte(consent.consented ? 1 : 0)
        case .consumptionRequest(let request):
            writer.consumptionRequest(request)
        case .consumptionAnswer(let answer):
            writer.consumptionAnswer(answer)
        case .appStoreCall(let call):
            writer.appStoreCall(call)
        case .appTransaction(let info):
            writer.appTransaction(info)
        case .transferred(let transfer), .shared(let transfer):
            writer.string(transfer.originalTransaction)
            try account(transfer.from, &writer)
            try account(transfer.to, &writer)
        case .forgotten(let forgotten):
            writer.string(forgotten.requestedBy)
        }
    }

    /// A record of the current format, and the proof its event carried, which is stored apart
    /// (`PersonalFields`).
    struct Encoded {
        var bytes: [UInt8]
        var proof: String?
    }

    /// Encodes the event as a complete record of the current format, checksum included;
    /// `accountHandle` gives each account's (and token's) handle, assigning new ones.
    static func record(
        _ event: Event, position: UInt64, renamedHandles: [UInt64] = [], accountHandle: (String) throws -> UInt64
    ) rethrows -> Encoded {
        var writer = ByteWriter(capacity: 160)
        let proof = try encode(
            event, position: position, into: &writer, version: formatVersion, renamedHandles: renamedHandles, accountHandle: accountHandle)
        return Encoded(bytes: checksummed(writer), proof: proof)
    }

    /// The record's bytes with their CRC-32C appended.
    private static func checksummed(_ writer: consuming ByteWriter) -> [UInt8] {
        let crc = CRC32C.checksum(writer.bytes)
        writer.uint32(crc)
        return writer.bytes
    }

    /// The record format 1 wrote (accounts inline): what a ledger from before account handles
    /// holds, made for the tests of reading and migrating one.
    package static func formatOneRecord(_ event: Event, position: UInt64) -> [UInt8] {
        var writer = ByteWriter(capacity: 160)
        encode(event, position: position, into: &writer, version: formatOneVersion) { _ in 0 }
        return checksummed(writer)
    }

    /// The handle of the account a record of format 2 belongs to, read without decoding the
    /// rest (nor checking it: the decode does); nil for another format or a malformed record.
    /// A reader fetches a chunk's accounts together with it before decoding them.
    static func accountHandle(in record: UnsafeRawBufferPointer) -> UInt64? {
        head(of: record)?.account
    }

    /// The id and the account's handle of a record of format 2, read without decoding the
    /// rest, once its checksum holds: what the LMDB backend's indexes take from the records of
    /// their tail (a damaged id must not become an index entry). Nil for another format, a
    /// damaged or a malformed record.
    package static func indexedFields(in record: UnsafeRawBufferPointer) -> (id: String, account: UInt64)? {
        guard record.count > 4, record.first == formatVersion else { return nil }
        let stored = UInt32(littleEndian: record.loadUnaligned(fromByteOffset: record.count - 4, as: UInt32.self))
        guard CRC32C.checksum(UnsafeRawBufferPointer(rebasing: record[0..<record.count - 4])) == stored else { return nil }
        var reader = ByteReader(UnsafeRawBufferPointer(rebasing: record[1..<record.count - 4]))
        do {
            _ = try reader.varint()
            _ = try reader.byte()
            return (try reader.string(), try reader.varint())
        } catch {
            return nil
        }
    }

    /// The handles the commit of a `forgotten` record renamed; nil for a record of another type
    /// or a malformed one (the decode tells which).
    static func renamedHandles(in record: UnsafeRawBufferPointer) -> [UInt64]? {
        guard var head = head(of: record), head.tag == tag(of: .forgotten) else { return nil }
        do {
            _ = try head.rest.timestamp()
            _ = try head.rest.string()
            return try head.rest.renamedHandles()
        } catch {
            return nil
        }
    }

    /// A record of format 2 read up to its account, without checking it (the decode does): its
    /// event tag, its account's handle, and a reader of the bytes after them (the checksum left
    /// out); nil for another format or a malformed record.
    private static func head(of record: UnsafeRawBufferPointer) -> (tag: UInt8, account: UInt64, rest: ByteReader)? {
        guard record.count > 4, record.first == formatVersion else { return nil }
        var reader = ByteReader(UnsafeRawBufferPointer(rebasing: record[1..<record.count - 4]))
        do {
            _ = try reader.varint()
            let tag = try reader.byte()
            let idLength = try reader.varint()
            guard idLength <= UInt64(record.count) else { return nil }
            try reader.skip(Int(idLength))
            return (tag, try reader.varint(), reader)
        } catch {
            return nil
        }
    }

    /// The format version a record decoded without damage is of (its first byte).
    static func version(of record: UnsafeRawBufferPointer) -> UInt8 {
        record.first ?? 0
    }

    /// Checks the record's checksum, version and position, then decodes its event; a record of
    /// format 2 names its accounts and tokens by handle, which `accountName` resolves (nil: no
    /// such handle), and keeps its proof apart, which `proof` reads (nil: none stored) unless
    /// `readingProofs` is false (a replay, which never uses one: the event then has none).
    static func decode(
        _ record: UnsafeRawBufferPointer, expectedPosition: UInt64, accountName: (UInt64) throws -> String?,
        proof: (UInt64) throws -> String? = { _ in nil }, readingProofs: Bool = true,
        forgottenSince: (UInt64) throws -> Bool = { _ in false }
    ) throws(Damage) -> Event {
        guard record.count >= 6 else { throw .undecodable("\(record.count) bytes") }
        let body = UnsafeRawBufferPointer(rebasing: record[0..<record.count - 4])
        let stored = UInt32(littleEndian: record.loadUnaligned(fromByteOffset: record.count - 4, as: UInt32.self))
        guard CRC32C.checksum(body) == stored else { throw .checksum }
        guard body[0] == formatVersion || body[0] == formatOneVersion else { throw .unknownVersion(body[0]) }
        var reader = ByteReader(UnsafeRawBufferPointer(rebasing: body[1...]))
        do {
            let position = try reader.varint()
            guard position == expectedPosition else { throw Damage.positionMismatch(position) }
            func name(of handle: UInt64) throws -> String {
                guard let name = try accountName(handle) else { throw Damage.unknownAccountHandle(handle) }
                return name
            }
            func readAccount(_ reader: inout ByteReader) throws -> String {
                guard body[0] == formatVersion else { return try reader.string() }
                return try name(of: try reader.varint())
            }
            /// Whether `handle` names its own pseudonym: a forgotten account or token; or was
            /// forgotten by another process since `accountName` read it (`forgottenSince`).
            func isForgotten(_ handle: UInt64?) throws -> Bool {
                guard let handle else { return false }
                return try Forgotten.handle(ofPseudonym: try name(of: handle)) == handle || forgottenSince(handle)
            }
            func readPersonalFields(_ reader: inout ByteReader) throws -> PersonalFields? {
                guard body[0] == formatVersion else { return nil }
                let present = try reader.byte()
                guard present & ~PersonalFields.allBits == 0,
                      present & PersonalFields.tokenBit == 0 || present & PersonalFields.emptyTokenBit == 0 else {
                    throw Damage.undecodable("unknown personal fields mask")
                }
                var personal = PersonalFields()
                var tokenHandle: UInt64?
                if present & PersonalFields.tokenBit != 0 {
                    let handle = try reader.varint()
                    tokenHandle = handle
                    personal.token = try name(of: handle)
                }
                if present & PersonalFields.emptyTokenBit != 0 { personal.token = "" }
                var appTransactionHandle: UInt64?
                if present & PersonalFields.appTransactionBit != 0 {
                    let handle = try reader.varint()
                    appTransactionHandle = handle
                    personal.appTransaction = try name(of: handle)
                }
                if present & PersonalFields.proofBit != 0, readingProofs {
                    let stored = try proof(position)
                    // A forget removed the proofs of the records that name the account or a
                    // token or app transaction id it renamed: asked only when one is missing,
                    // not of every record.
                    guard try stored != nil || isForgotten(head(of: record)?.account) || isForgotten(tokenHandle)
                        || isForgotten(appTransactionHandle) else {
                        throw Damage.missingProof
                    }
                    personal.proof = stored
                }
                return personal
            }
            let event = try decodeEvent(&reader, account: readAccount, personalFields: readPersonalFields)
            guard reader.isAtEnd else { throw Damage.undecodable("trailing bytes") }
            return event
        } catch let damage as Damage {
            throw damage
        } catch let malformed as ByteReader.Malformed {
            throw .undecodable(malformed.reason)
        } catch {
            throw .undecodable("\(error)")
        }
    }

    /// `personalFields` reads what a record of format 2 keeps after the payload of the types
    /// that carry them (nil in format 1), put back before the event is made: no copy of it.
    private static func decodeEvent(
        _ reader: inout ByteReader, account readAccount: (inout ByteReader) throws -> String,
        personalFields: (inout ByteReader) throws -> PersonalFields?
    ) throws -> Event {
        let tag = try reader.byte()
        guard tag >= 1, tag <= EventType.allCases.count else { throw Damage.undecodable("unknown event tag \(tag)") }
        let type = EventType.allCases[Int(tag) - 1]
        let id = try reader.string()
        let account = try readAccount(&reader)
        let at = try reader.timestamp()
        var payload: Event.Payload
        switch type {
        case .paymentAdded:
            payload = .paymentAdded(PaymentAdded(
                payment: try reader.string(), product: try reader.string(), quantity: try reader.optionalQuantity()))
        case .transactionUpdated:
            let payment = try reader.string()
            let state = try value(try reader.byte(), in: TransactionState.allCases)
            let mask = try reader.byte()
            guard mask < 64 else { throw Damage.undecodable("unknown field mask") }
            payload = .transactionUpdated(TransactionUpdated(
                payment: payment, state: state,
                transaction: mask & 1 != 0 ? try reader.string() : nil,
                originalTransaction: mask & 2 != 0 ? try reader.string() : nil,
                error: mask & 4 != 0 ? try reader.string() : nil,
                expiresAt: mask & 8 != 0 ? try reader.timestamp() : nil,
                product: mask & 16 != 0 ? try reader.string() : nil,
                quantity: mask & 32 != 0 ? try reader.quantity() : nil))
        case .downloadUpdated:
            let payment = try reader.string()
            let download = try reader.string()
            let state = try value(try reader.byte(), in: DownloadState.allCases)
            let mask = try reader.byte()
            guard mask < 4 else { throw Damage.undecodable("unknown field mask") }
            let progress = mask & 1 != 0 ? try reader.double() : nil
            let timeRemaining = mask & 2 != 0 ? try reader.double() : nil
            // The ranges `Event.validate` allows: nothing else was ever appended.
            if let progress, !(progress >= 0 && progress <= 1) { throw Damage.undecodable("progress out of range") }
            if let timeRemaining, !(timeRemaining >= -1 && timeRemaining.isFinite) {
                throw Damage.undecodable("timeRemaining out of range")
            }
            payload = .downloadUpdated(DownloadUpdated(
                payment: payment, download: download, state: state, progress: progress, timeRemaining: timeRemaining))
        case .transactionFinished:
            payload = .transactionFinished(TransactionFinished(payment: try reader.string()))
        case .consumed:
            let item = try reader.string()
            let amount = try reader.varint()
            guard (1...UInt64(Int64.max)).contains(amount) else { throw Damage.undecodable("amount out of range") }
            payload = .consumed(Consumed(item: item, amount: Int64(amount)))
        case .revoked:
            let transaction = try reader.string()
            let hasReason = try reader.byte()
            guard hasReason <= 1 else { throw Damage.undecodable("unknown field mask") }
            payload = .revoked(Revoked(transaction: transaction, reason: hasReason == 1 ? try reader.string() : nil))
        case .storeTransaction:
            payload = .storeTransaction(try reader.storeTransaction())
        case .renewalInfo:
            payload = .renewalInfo(try reader.renewalInfo())
        case .consumptionConsent:
            payload = .consumptionConsent(ConsumptionConsent(consented: try reader.flag()))
        case .consumptionRequest:
            payload = .consumptionRequest(try reader.consumptionRequest())
        case .consumptionAnswer:
            payload = .consumptionAnswer(try reader.consumptionAnswer())
        case .appStoreCall:
            payload = .appStoreCall(try reader.appStoreCall())
        case .appTransaction:
            payload = .appTransaction(try reader.appTransaction())
        case .transferred, .shared:
            let transfer = Transferred(
                originalTransaction: try reader.string(), from: try readAccount(&reader), to: try readAccount(&reader))
            payload = type == .shared ? .shared(transfer) : .transferred(transfer)
        case .forgotten:
            payload = .forgotten(Forgotten(requestedBy: try reader.string()))
            _ = try reader.renamedHandles()
        }
        if PersonalFields.apply(to: type), let personal = try personalFields(&reader) {
            personal.restore(into: &payload)
        }
        return Event(id: id, account: account, at: at, payload: payload)
    }

    private static func tag(of type: EventType) -> UInt8 {
        index(of: type, in: EventType.allCases) + 1
    }

    private static func index<T: Equatable>(of value: T, in cases: [T]) -> UInt8 {
        UInt8(cases.firstIndex(of: value)!)
    }

    private static func value<T>(_ index: UInt8, in cases: [T]) throws(Damage) -> T {
        guard Int(index) < cases.count else { throw .undecodable("unknown state \(index)") }
        return cases[Int(index)]
    }
}

private extension ByteWriter {
    mutating func optionalQuantity(_ quantity: Int?) {
        // 0 stands for "absent": quantities are 1…10.
        varint(UInt64(quantity ?? 0))
    }
}

private extension ByteReader {
    /// A `forgotten` record's renamed handles: a count, then each (fewer than the bytes left).
    mutating func renamedHandles() throws(Malformed) -> [UInt64] {
        let count = try varint()
        guard count <= 4096 else { throw Malformed(reason: "too many renamed handles") }
        var handles: [UInt64] = []
        for _ in 0..<count { handles.append(try varint()) }
        return handles
    }

    mutating func optionalQuantity() throws(Malformed) -> Int? {
        let raw = try varint()
        guard raw <= 10 else { throw Malformed(reason: "quantity out of range") }
        return raw == 0 ? nil : Int(raw)
    }

    mutating func quantity() throws(Malformed) -> Int {
        guard let quantity = try optionalQuantity() else { throw Malformed(reason: "quantity out of range") }
        return quantity
    }
}
