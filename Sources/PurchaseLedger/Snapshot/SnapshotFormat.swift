/// What makes a snapshot usable by this version of the ledger.
///
/// A snapshot records the projections as the rules of its time built them. When the rules or
/// the shape of the projections change, `schema` changes, its fingerprint with it, and older
/// snapshots are ignored (the ledger replays from the start and writes a fresh one): a slower
/// open, never a wrong answer.
enum SnapshotFormat {
    static let headerVersion: UInt8 = 1
    /// Names everything a snapshot's content depends on: built from the versions kept next to
    /// the rules and the account state, which change with them.
    static let schema = "interchange-v1; rules \(Rules.version); account-state \(AccountState.version) (\(AccountState.fields))"
    static let fingerprint: UInt64 = fnv1a(schema)

    /// 64-bit FNV-1a, a stable hash (Swift's `Hasher` is seeded per process).
    static func fnv1a(_ text: String) -> UInt64 {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in text.utf8 {
            hash ^= UInt64(byte)
            hash &*= 0x100_0000_01B3
        }
        return hash
    }
}

/// A snapshot's header: the position it reflects, what it was written by, counts for
/// statistics, and a checksum.
struct SnapshotHeader: Sendable, Hashable {
    var position: UInt64
    var fingerprint: UInt64
    /// The snapshot before it, whose account states this one builds on (0 for a full one).
    var previous: UInt64
    /// Account states written with this snapshot (every account, for a full one).
    var accountsWritten: Int
    var accounts: Int
    var entries: Int
    var unfinished: Int
    var createdAt: Timestamp

    func encode() -> [UInt8] {
        var writer = ByteWriter(capacity: 64)
        writer.byte(SnapshotFormat.headerVersion)
        writer.varint(position)
        writer.uint64(fingerprint)
        writer.varint(previous)
        writer.varint(UInt64(accountsWritten))
        writer.varint(UInt64(accounts))
        writer.varint(UInt64(entries))
        writer.varint(UInt64(unfinished))
        writer.timestamp(createdAt)
        writer.uint32(CRC32C.checksum(writer.bytes))
        return writer.bytes
    }

    /// Why a stored snapshot is not used.
    enum Problem: Error, Equatable, CustomStringConvertible {
        case damaged(String)
        case olderFormat(UInt8)
        case otherRules
        case positionMismatch

        var description: String {
            switch self {
            case .damaged(let reason): "damaged header (\(reason))"
            case .olderFormat(let version): "written in header format \(version)"
            case .otherRules: "written under other rules (schema fingerprint differs)"
            case .positionMismatch: "its key and header disagree on its position"
            }
        }
    }

    static func decode(_ bytes: [UInt8], key: UInt64) throws(Problem) -> SnapshotHeader {
        guard bytes.count >= 5 else { throw .damaged("\(bytes.count) bytes") }
        let body = Array(bytes.dropLast(4))
        let stored = bytes.withUnsafeBytes { UInt32(littleEndian: $0.loadUnaligned(fromByteOffset: bytes.count - 4, as: UInt32.self)) }
        guard CRC32C.checksum(body) == stored else { throw .damaged("checksum mismatch") }
        guard body[0] == SnapshotFormat.headerVersion else { throw .olderFormat(body[0]) }
        do {
            return try body.withUnsafeBytes { raw throws -> SnapshotHeader in
                var reader = ByteReader(UnsafeRawBufferPointer(rebasing: raw[1...]))
                let header = SnapshotHeader(
                    position: try reader.varint(), fingerprint: try reader.uint64(), previous: try reader.varint(),
                    accountsWritten: try reader.count(), accounts: try reader.count(),
                    entries: try reader.count(), unfinished: try reader.count(), createdAt: try reader.timestamp())
                guard reader.isAtEnd else { throw Problem.damaged("trailing bytes") }
                guard header.fingerprint == SnapshotFormat.fingerprint else { throw Problem.otherRules }
                guard header.position == key else { throw Problem.positionMismatch }
                return header
            }
        } catch let problem as Problem {
            throw problem
        } catch {
            throw .damaged("\(error)")
        }
    }
}
