import PurchaseLedger

/// Positions and versions as the tables hold them (`bigint`), checked where they enter: only
/// `ledger_events` has a `CHECK` on its positions, and a negative value in another table (a
/// damaged or hand-edited database) is damage to report, not a conversion that traps.
enum StoredPosition {
    static func from(_ value: Int64) throws(StorageError) -> UInt64 {
        guard value >= 0 else { throw StorageError(.damaged, "the database holds a negative position or version (\(value))") }
        return UInt64(value)
    }
}
