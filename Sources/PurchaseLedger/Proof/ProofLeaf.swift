/// A position's leaf data (docs/FORMAT.md, "The proof tree"): the line `ledger export
/// --as-forgotten` writes for it. The event as `export` writes it once every customer is
/// forgotten (each name the account table holds, accounts and tokens alike, as its handle's
/// pseudonym `forgotten/<handle>`; no `signed`, since a forget removes Apple's signatures),
/// then `accountCommitment` and, after the account's first event, `previous`.
enum ProofLeaf {
    /// The record's event with every name as its pseudonym, and the handle of its account.
    static func decodeAsForgotten(_ bytes: UnsafeRawBufferPointer, at position: UInt64) throws -> (account: UInt64, event: Event) {
        guard let handle = LogRecordCodec.accountHandle(in: bytes) else {
            throw StorageError(.damaged, "the record at position \(position) names its account by no handle (format 1: copy the ledger first)", position: position)
        }
        do {
            let event = try LogRecordCodec.decode(
                bytes, expectedPosition: position, accountName: { Forgotten.pseudonym(ofHandle: $0) }, readingProofs: false)
            return (handle, event)
        } catch {
            throw StorageError(.damaged, "record at position \(position): \(error)", position: position)
        }
    }

    /// Writes the leaf data of `event` (decoded as forgotten), without a newline.
    /// `commitment`: the account's commitment in base64 (`AccountCommitment.text`).
    static func write(_ event: Event, commitment: String, previous: UInt64, to writer: inout JSONWriter) {
        writer.beginObject()
        event.writeMembers(to: &writer)
        writer.member("accountCommitment", commitment)
        if previous > 0 { writer.member("previous", Int64(previous)) }
        writer.endObject()
    }
}
