/// Everything the log says about one account: its queue entries and balances.
///
/// This folder is the account state's change-set: the state (here), the changes the projector
/// makes to it (`AccountChange`) and how each applies, the reads the rules make
/// (`ProjectionStore.swift`), and the snapshot codec (`AccountStateCodec`). A new field is
/// added here and in the codec; the stores (`LedgerState`, the writer's `ProjectionSession`,
/// the live projections, one account's rebuild) only read and apply changes whole.
struct AccountState: Sendable, Hashable {
    /// The version of the state's shape and of its codec: part of the snapshot schema
    /// (`SnapshotFormat`), so that a snapshot of another shape is ignored, never misread.
    static let version: UInt8 = 6
    /// What the state holds, for the snapshot schema's text.
    static let fields = "entries, balances, store transactions, renewal infos, consent, reports by environment, app transaction"

    /// By payment id.
    var entries = QueueEntries()
    /// By item.
    var balances: [UTF8Key: Int64] = [:]
    /// The store's report in force per transaction id.
    var storeTransactions: [UTF8Key: StoreTransactionRecord] = [:]
    /// The store's renewal info in force per original transaction id.
    var renewals: [UTF8Key: RenewalRecord] = [:]
    /// The customer's consent to share consumption data with Apple, when recorded.
    var consent: ConsentRecord?
    /// Only for transactions the store reported in more than one environment: the latest
    /// report of each (`ReportsUpdate`). Almost always empty.
    var environmentReports: [UTF8Key: [StoreTransactionRecord]] = [:]
    /// The same for renewal infos, by original transaction.
    var environmentRenewals: [UTF8Key: [RenewalRecord]] = [:]
    /// The customer's app transaction Apple signed last (`appTransaction` events).
    var appTransaction: AppTransactionRecord?

    /// Applies one change; returns how the ledger-wide counts of entries and unfinished
    /// entries move with it.
    @discardableResult
    mutating func apply(_ change: AccountChange) -> AccountCounts {
        switch change {
        case .entry(let entry):
            let previous = entries.updateValue(entry, forKey: UTF8Key(entry.payment))
            return AccountCounts(
                entries: previous == nil ? 1 : 0,
                unfinished: (entry.isFinished ? 0 : 1) - (previous.map { $0.isFinished ? 0 : 1 } ?? 0))
        case .balance(let item, let value):
            balances[item] = value
        case .storeTransaction(let record):
            storeTransactions[UTF8Key(record.fact.transaction)] = record
        case .renewal(let record):
            renewals[UTF8Key(record.info.originalTransaction)] = record
        case .consent(let record):
            consent = record
        case .appTransaction(let record):
            appTransaction = record
        case .environmentReports(let records):
            if let first = records.first { environmentReports[UTF8Key(first.fact.transaction)] = records }
        case .environmentRenewals(let records):
            if let first = records.first { environmentRenewals[UTF8Key(first.info.originalTransaction)] = records }
        case .opened:
            break
        }
        return AccountCounts()
    }

    /// A state that holds only changes (a session's changes to an account already in memory)
    /// as the changes that make it.
    func forEachChange(_ body: (AccountChange) -> Void) {
        for entry in entries.values { body(.entry(entry)) }
        for (item, value) in balances { body(.balance(item: item, value)) }
        for record in storeTransactions.values { body(.storeTransaction(record)) }
        for record in renewals.values { body(.renewal(record)) }
        if let consent { body(.consent(consent)) }
        if let appTransaction { body(.appTransaction(appTransaction)) }
        for records in environmentReports.values { body(.environmentReports(records)) }
        for records in environmentRenewals.values { body(.environmentRenewals(records)) }
        if entries.count == 0, balances.isEmpty, storeTransactions.isEmpty, renewals.isEmpty, consent == nil, appTransaction == nil {
            body(.opened)
        }
    }

    /// Whether one of the account's entries holds `transaction` as its transaction or its
    /// original transaction (what `revoked` requires). Read from the entries, not kept beside
    /// them: only a `revoked` event asks, and a set per account cost a replay of 250,000
    /// purchases 10 MB.
    func holds(_ transaction: UTF8Key) -> Bool {
        entries.values.contains { sameBytes($0.transaction, transaction.string) || sameBytes($0.originalTransaction, transaction.string) }
    }

    /// Entries and unfinished entries, for the ledger-wide counts.
    var counts: AccountCounts {
        AccountCounts(entries: entries.count, unfinished: entries.values.count { !$0.isFinished })
    }
}

/// One change `Projector.apply` makes to an account's state.
enum AccountChange: Sendable, Hashable {
    /// A queue entry, new or changed, replaces the one of its payment.
    case entry(QueueEntry)
    case balance(item: UTF8Key, Int64)
    /// The store's report now in force for its transaction.
    case storeTransaction(StoreTransactionRecord)
    /// The store's renewal info now in force for its original transaction.
    case renewal(RenewalRecord)
    /// The consent now in force.
    case consent(ConsentRecord)
    /// The app transaction now in force.
    case appTransaction(AppTransactionRecord)
    /// The latest report of each environment about one transaction (all of the same one).
    case environmentReports([StoreTransactionRecord])
    /// The latest renewal info of each environment about one original transaction.
    case environmentRenewals([RenewalRecord])
    /// The account has an event that changes none of its state (a refund request): it exists,
    /// owning nothing.
    case opened
}

/// Entries and unfinished entries: kept ledger-wide for statistics, moved by each change.
struct AccountCounts: Sendable, Hashable {
    var entries = 0
    var unfinished = 0
}
