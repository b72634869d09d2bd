/// A signed checkpoint kept beside the log (never as an event: it changes no leaf), under
/// `proof/checkpoint/<size, 20 digits>/<signedAt, milliseconds, 15 digits>`, so that key order
/// is size order, then time; the value is the note's bytes. Every one signed is kept.
public struct StoredCheckpoint: Sendable, Hashable {
    public let size: UInt64
    public let signedAt: Timestamp
    /// The signed note, as signed: the checkpoint's text, a blank line, its signature lines.
    public let note: String

    static let prefix = "proof/checkpoint/"

    /// The checkpoint the note carries: its text, up to the blank line before the signatures.
    public var checkpoint: Checkpoint? {
        let lines = note.split(separator: "\n", omittingEmptySubsequences: false)
        guard let blank = lines.firstIndex(where: \.isEmpty) else { return nil }
        return try? Checkpoint(text: lines[..<blank].joined(separator: "\n") + "\n")
    }

    var key: String {
        let milliseconds = max(0, signedAt.seconds) * 1000 + Int64(signedAt.nanoseconds / 1_000_000)
        return Self.prefix + Self.padded(size, 20) + "/" + Self.padded(UInt64(milliseconds), 15)
    }

    private static func padded(_ number: UInt64, _ width: Int) -> String {
        let digits = String(number)
        return String(repeating: "0", count: max(0, width - digits.count)) + digits
    }

    init(size: UInt64, signedAt: Timestamp, note: String) {
        (self.size, self.signedAt, self.note) = (size, signedAt, note)
    }

    /// Reads a stored one; nil for a key not of the form.
    init?(key: String, value: [UInt8]) {
        let fields = key.dropFirst(Self.prefix.utf8.count).split(separator: "/", omittingEmptySubsequences: false)
        guard key.hasPrefix(Self.prefix), fields.count == 2, let size = UInt64(fields[0]), let milliseconds = Int64(fields[1]), milliseconds >= 0,
              let note = String(validating: value, as: UTF8.self)
        else { return nil }
        let (seconds, remainder) = milliseconds.quotientAndRemainder(dividingBy: 1000)
        self.init(size: size, signedAt: Timestamp(seconds: seconds, nanoseconds: UInt32(remainder) * 1_000_000), note: note)
    }

    /// Where the key of the newest is kept (a checkpoint's write sets it), so that finding it
    /// reads two keys however many were signed.
    static let newestKey = "proof/newest-checkpoint"

    /// Keeps `self` and makes it the newest, in `writer`'s write.
    func store(_ writer: any LedgerStorageWriter) throws {
        try writer.setFeedState(key, Array(note.utf8))
        try writer.setFeedState(Self.newestKey, Array(key.utf8))
    }

    /// The stored checkpoints of a size greater than `size`, oldest first (by size, then
    /// time), at most `limit`.
    /// (Every one from the first when `size` is nil.)
    static func after(_ size: UInt64?, limit: Int, _ reader: any LedgerStorageReader) throws -> [StoredCheckpoint] {
        guard size != .max else { return [] }
        let from = size.map { prefix + padded($0 + 1, 20) } ?? prefix
        return try reader.feedStates(prefix: prefix, from: from, limit: limit).map { key, value in
            guard let checkpoint = StoredCheckpoint(key: key, value: value) else {
                throw StorageError(.damaged, "the proof state \(key) is not a checkpoint")
            }
            return checkpoint
        }
    }

    /// Every stored checkpoint, oldest first.
    static func all(_ reader: any LedgerStorageReader) throws -> [StoredCheckpoint] {
        try after(nil, limit: .max, reader)
    }

    /// The one signed last; nil before the first.
    static func newest(_ reader: any LedgerStorageReader) throws -> StoredCheckpoint? {
        guard let key = try reader.feedState(newestKey) else { return nil }
        guard let name = String(validating: key, as: UTF8.self), let value = try reader.feedState(name),
              let checkpoint = StoredCheckpoint(key: name, value: value)
        else { throw StorageError(.damaged, "the proof state \(newestKey) names no checkpoint") }
        return checkpoint
    }
}
