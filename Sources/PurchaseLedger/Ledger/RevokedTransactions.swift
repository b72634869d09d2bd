/// Which transactions of one account's state an event had revoked by a position: the
/// `isRevoked` an answer about the account asks (`AccountView`, `HeldTransaction.all`). At the
/// first question, the transactions a view asks about are read in one lookup, instead of one
/// per question: on PostgreSQL, one query for an account of any size. Nothing is read when no
/// question comes (most callers of `LiveProjections.withAccount` ask none).
final class RevokedTransactions {
    private let state: AccountState
    private let position: UInt64
    private let reader: any LedgerStorageReader
    private var read: (named: Set<UTF8Key>, revokedAt: [UTF8Key: UInt64])?

    /// `reader` must be the read `state` comes from; it is used only while that read lasts.
    init(of state: AccountState, by position: UInt64, reader: any LedgerStorageReader) {
        self.state = state
        self.position = position
        self.reader = reader
    }

    /// Whether an event at or before the position revoked `transaction`. One a view does not
    /// ask about (an entry that no longer grants, which `HeldTransaction.all` asks about) is
    /// looked up on its own.
    func isRevoked(_ transaction: UTF8Key) throws -> Bool {
        let read = try self.read ?? readWhatAViewAsks()
        let revokedAt = read.named.contains(transaction)
            ? read.revokedAt[transaction] : try reader.revocation(ofTransaction: transaction.string)
        return revokedAt.map { $0 <= position } ?? false
    }

    /// The transactions of the entries that may grant and of the store's reports, original
    /// transactions too: what `AccountView` asks about. Not every entry's, which a long account
    /// of consumables would make thousands.
    private func readWhatAViewAsks() throws -> (named: Set<UTF8Key>, revokedAt: [UTF8Key: UInt64]) {
        var named: Set<UTF8Key> = []
        for entry in state.entries.granting {
            if let transaction = entry.transaction { named.insert(UTF8Key(transaction)) }
            if let original = entry.originalTransaction { named.insert(UTF8Key(original)) }
        }
        for report in state.storeTransactions {
            named.insert(report.key)
            if let original = report.record.fact.originalTransaction { named.insert(UTF8Key(original)) }
        }
        let read = (named: named, revokedAt: try reader.revocations(ofTransactions: Array(named)))
        self.read = read
        return read
    }
}
