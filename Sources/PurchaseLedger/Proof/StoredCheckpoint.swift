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

    /// Every stored checkpoint, oldest first (by size, then time).
    static func all(_ reader: any LedgerStorageReader) throws -> [StoredCheckpoint] {
        try reader.feedStates(prefix: prefix).map { key, value in
            guard let checkpoint = StoredCheckpoint(key: key, value: value) else {
                throw StorageError(.damaged, "the proof state \(key) is not a checkpoint")
            }
            return checkpoint
        }
    }
}
