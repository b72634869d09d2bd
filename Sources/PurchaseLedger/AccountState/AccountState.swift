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
    static let version: UInt8 = 7
    /// What the state holds, for the snapshot schema's text.
    static let fields = "entries, balances, store transactions, renewal infos, consent, reports by environment, app transaction, transfers"

    /// By payment id.
    var entries = QueueEntries()
    /// By item.
    var balances: [UTF8Key: Int64] = [:]
    /// The store's report in force per transaction id.
    var storeTransactions = StoreTransactionRecords()
    /// The store's renewal info in force per original transaction id.
    var renewals: [UTF8Key: RenewalRecord] = [:]
    /// The customer's consent to share consumption data with Apple, when recorded.
    var consent: ConsentRecord? {
        get { storedConsent?.value }
        set { storedConsent = newValue.map(OutOfLine.value) }
    }
    private var storedConsent: OutOfLine<ConsentRecord>?
    /// Only for transactions the store reported in more than one environment: the latest
    /// report of each (`ReportsUpdate`). Almost always empty.
    var environmentReports: [UTF8Key: [StoreTransactionRecord]] = [:]
    /// The same for renewal infos, by original transaction.
    var environmentRenewals: [UTF8Key: [RenewalRecord]] = [:]
    /// The customer's app transaction Apple signed last (`appTransaction` events).
    var appTransaction: AppTransactionRecord? {
        get { storedAppTransaction?.value }
        set { storedAppTransaction = newValue.map(OutOfLine.value) }
    }
    private var storedAppTransaction: OutOfLine<AppTransactionRecord>?
    /// The last transfer of each chain this account took part in (`transferred` events), by
    /// original transaction: a chain whose last transfer left the account is left out of its
    /// answers (kept, never removed, so that a layer of changes says "transferred back").
    var transfers: [UTF8Key: ChainTransfer] = [:]

    /// Applies one change; returns how the ledger-wide counts of entries and unfinished
    /// entries move with it.
    @discardableResult
    mutating func apply(_ change: AccountChange) -> AccountCounts {
        switch change {
        case .entry(let entry):
            let previous = entries.update(entry)
            return AccountCounts(entryWasFinished: previous?.isFinished, isFinished: entry.isFinished)
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
        case .transfer(let chain, let transfer):
            transfers[chain] = transfer
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
        for (chain, transfer) in transfers { body(.transfer(chain: chain, transfer)) }
        if entries.count == 0, balances.isEmpty, storeTransactions.isEmpty, renewals.isEmpty, consent == nil, appTransaction == nil,
           transfers.isEmpty {
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

    /// The chains the account transferred away and not back.
    var chainsTransferredAway: Set<UTF8Key> {
        transfers.isEmpty ? [] : Set(transfers.compactMap { $0.value.side == .leaving ? $0.key : nil })
    }

    /// The state without the store's reports and renewal infos of `chains` (original
    /// transactions): what the account's answers read once it transferred them away.
    func leavingOut(chains: Set<UTF8Key>) -> AccountState {
        var kept = self
        func isLeftOut(_ fact: StoreTransaction) -> Bool { chains.contains(UTF8Key(fact.chain)) }
        kept.storeTransactions = storeTransactions.filter { !isLeftOut($0.fact) }
        kept.environmentReports = environmentReports.filter { !isLeftOut($0.value[0].fact) }
        kept.renewals = renewals.filter { !chains.contains($0.key) }
        kept.environmentRenewals = environmentRenewals.filter { !chains.contains($0.key) }
        return kept
    }

    /// The product type of the chain `originalTransaction` names, when the account holds it (an
    /// entry purchased or restored, or a store report, of it or of a later transaction of it).
    /// When its records disagree, one that StoreKit does not restore wins (then the first in
    /// the catalog's order of types): the answer never depends on the order they are stored in.
    func productType(ofChain originalTransaction: UTF8Key) -> Catalog.ProductType? {
        let chain = originalTransaction.string
        var types: Set<Catalog.ProductType> = []
        for entry in entries.values where entry.state == .purchased || entry.state == .restored {
            if sameBytes(entry.transaction, chain) || sameBytes(entry.originalTransaction, chain) { types.insert(entry.productType) }
        }
        for record in storeTransactions.values where sameBytes(record.fact.chain, chain) {
            types.insert(record.productType)
        }
        let ordered = Catalog.ProductType.allCases.filter(types.contains)
        return ordered.first { !$0.isRestorable } ?? ordered.first
    }

    /// Entries and unfinished entries, for the ledger-wide counts.
    var counts: AccountCounts {
        AccountCounts(entries: entries.count, unfinished: entries.unfinishedCount)
    }
}

/// A value kept on the heap, behind a pointer: the ledger holds every account's state inline in
/// its table of accounts, so a field few accounts have (an app transaction is about 170 bytes)
/// would cost its size in each of the table's buckets. Immutable once made: a state copied
/// shares it, and a change makes a new one.
enum OutOfLine<Value: Sendable & Hashable>: Sendable, Hashable {
    indirect case value(Value)

    var value: Value {
        switch self {
        case .value(let value): value
        }
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
    /// The account's last transfer of a chain.
    case transfer(chain: UTF8Key, ChainTransfer)
    /// The account has an event that changes none of its state (a refund request): it exists,
    /// owning nothing.
    case opened
}

/// Entries and unfinished entries: kept ledger-wide for statistics, moved by each change.
struct AccountCounts: Sendable, Hashable {
    var entries = 0
    var unfinished = 0
}

extension AccountCounts {
    /// How the counts move when an entry is set: `wasFinished` nil when there was none.
    init(entryWasFinished wasFinished: Bool?, isFinished: Bool) {
        entries = wasFinished == nil ? 1 : 0
        unfinished = (isFinished ? 0 : 1) - (wasFinished.map { $0 ? 0 : 1 } ?? 0)
    }
}
