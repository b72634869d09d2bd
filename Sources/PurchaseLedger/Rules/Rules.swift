/// What the rules may consult besides the event itself: the catalog, the event-id index, and
/// the projections (accounts, store transactions) as they stand before the event.
protocol RuleContext: ProjectionReader {
    var catalog: Catalog { get }
    /// The position of the appended event with this id, if any.
    func position(ofEventID id: String) throws -> UInt64?
}

/// What the rules decide for one event.
enum Decision: Sendable, Equatable {
    /// The event may be appended.
    case append
    /// The event is a redelivery of the event at this position: nothing is appended.
    case duplicate(of: UInt64)
    case reject(LedgerError)
}

/// The interchange format's rules, checked before anything is written. Each rule is one
/// function below, and `decide` applies them in the spec's order of precedence:
///
/// 1. `invalidEvent`: the event on its own (`Event.validate`);
/// 2. `duplicate` by event id;
/// 3. for events about a queue entry: `unknownPayment` (or, when a `transactionUpdated` opens a
///    new entry, `unknownProduct` then quantity-must-be-1); then, on a finished entry, a
///    redelivery or repeated finish is `duplicate`, anything else `entryFinished`;
/// 4. the type's own rules in the spec's order (the store's events: `unknownProduct` only).
enum Rules {
    /// The version of what the rules build: part of the snapshot schema (`SnapshotFormat`).
    /// Raise it when a log's projections would change under new rules. Spec 1.1 only appends
    /// events that 1.0 refused, so no log 1.0 wrote projects differently. 2: a withdrawal of
    /// consent recorded after a consent wins whatever their dates (older snapshots are rebuilt).
    /// 3: the store's dates are valid time, and reports are in force per environment
    /// (FORMAT.md, "Valid time", "Environments").
    static let version = 3

    /// What `decide` (and `Projector.apply` after it) will consult for `event` beyond its own
    /// account: its id in the event index, and the store transactions it names in the
    /// transaction and revocation indexes. Declared here, next to the rules that read them, so
    /// that the two change together; a shared backend fetches them ahead, behind its lock.
    static func lookups(of event: Event, into lookups: inout Lookups) {
        lookups.eventIDs.append(event.id)
        switch event.payload {
        case .transactionUpdated(let update):
            if let transaction = update.transaction { lookups.transactions.append(transaction) }
            if let original = update.originalTransaction { lookups.transactions.append(original) }
        case .revoked(let revoked):
            lookups.transactions.append(revoked.transaction)
        case .storeTransaction(let fact):
            lookups.transactions.append(fact.transaction)
            if let original = fact.originalTransaction { lookups.transactions.append(original) }
        case .transferred(let transfer), .shared(let transfer):
            lookups.transactions.append(transfer.originalTransaction)
        default:
            break
        }
    }

    static func decide(_ event: Event, in context: some RuleContext) throws -> Decision {
        do {
            try event.validate()
        } catch {
            return .reject(error)
        }
        if let earlier = try context.position(ofEventID: event.id) {
            return .duplicate(of: earlier)
        }
        let account = UTF8Key(event.account)
        switch event.payload {
        case .paymentAdded(let added):
            return paymentAdded(added, existing: try context.entry(account, UTF8Key(added.payment)), catalog: context.catalog)
        case .transactionUpdated(let update):
            return try transactionUpdated(update, account: event.account, existing: try context.entry(account, UTF8Key(update.payment)), in: context)
        case .downloadUpdated(let update):
            return downloadUpdated(update, existing: try context.entry(account, UTF8Key(update.payment)))
        case .transactionFinished(let finished):
            return transactionFinished(finished, existing: try context.entry(account, UTF8Key(finished.payment)))
        case .consumed(let consumed):
            return self.consumed(consumed, balance: try context.balance(account, UTF8Key(consumed.item)) ?? 0)
        case .revoked(let revoked):
            return try self.revoked(revoked, account: account, in: context)
        case .storeTransaction(let fact):
            return try storeTransaction(fact, account: event.account, in: context)
        case .renewalInfo:
            // Informational products (`product`, `renewsTo`) need not be in the catalog: the
            // report is kept whatever Apple renews to.
            return .append
        case .transferred(let transfer):
            return try transferred(transfer, account: account, in: context)
        case .shared(let share):
            return try shared(share, account: account, in: context)
        case .forgotten:
            // Nothing to forget of an account the ledger has no event of (the message names no
            // account: refusals are logged).
            guard try context.wholeState(account) != nil else { return .reject(.invalid("the ledger has no event of this account")) }
            return .append
        case .consumptionConsent, .consumptionRequest, .consumptionAnswer, .appStoreCall, .appTransaction:
            // Records of what was said: a request may name a transaction the ledger never saw
            // (that is the answer: not delivered), and an answer is the server's own.
            return .append
        }
    }

    // MARK: paymentAdded

    /// `unknownProduct`, then quantity-must-be-1 (`invalidEvent`), then `duplicatePayment`.
    private static func paymentAdded(_ added: PaymentAdded, existing: QueueEntry?, catalog: Catalog) -> Decision {
        guard let product = catalog[added.product] else {
            return .reject(unknownProduct(added.product))
        }
        if let rejection = singleQuantity(added.quantity, product: product) {
            return .reject(rejection)
        }
        if existing != nil {
            return .reject(LedgerError(.duplicatePayment,
                "payment \"\(added.payment)\" is already in this account's queue; every addPayment needs a new payment id"))
        }
        return .append
    }

    // MARK: transactionUpdated

    private static func transactionUpdated(
        _ update: TransactionUpdated, account accountID: String, existing: QueueEntry?, in context: some RuleContext
    ) throws -> Decision {
        let productType: Catalog.ProductType
        if let entry = existing {
            if isRedelivery(update, of: entry) {
                return .duplicate(of: entry.stateSetAt)
            }
            if entry.isFinished {
                return .reject(entryFinished(entry))
            }
            guard entry.state.allowsTransition(to: update.state) else {
                return .reject(LedgerError(.illegalTransition,
                    "payment \"\(update.payment)\" is \(entry.state.rawValue); it cannot become \(update.state.rawValue)"
                        + (entry.state.isTerminal ? " (a \(entry.state.rawValue) transaction only awaits finishTransaction)" : "")))
            }
            productType = entry.productType
        } else {
            // StoreKit delivers transactions the app never added in this session: the update
            // opens a new entry when it names its product.
            guard let productID = update.product else {
                return .reject(unknownPayment(update.payment, hint: " (to open a new entry, include `product`)"))
            }
            guard let product = context.catalog[productID] else {
                return .reject(unknownProduct(productID))
            }
            if let rejection = singleQuantity(update.quantity, product: product) {
                return .reject(rejection)
            }
            productType = product.type
        }
        if update.state == .restored, !productType.isRestorable {
            return .reject(LedgerError(.notRestorable,
                "\(productType.rawValue) products are never restored; only non-consumables and auto-renewable subscriptions are"))
        }
        // Store transaction ids are global: another account never takes one. Another entry of
        // the same account may (1.1: typically the store's notification reported the purchase
        // before the device did); it is appended, and the projector credits nothing for it.
        if update.state == .purchased || update.state == .restored, let transaction = update.transaction {
            let chain = update.originalTransaction ?? transaction
            if let holder = try context.holder(of: UTF8Key(transaction)) {
                if !(try mayHold(holder, chain: chain, account: accountID, in: context)) {
                    return .reject(LedgerError(.transactionAlreadyCredited,
                        "store transaction \"\(transaction)\" is already held by another account; a transaction credits once"))
                }
            } else if !(try mayHoldNew(ofChain: chain, account: accountID, in: context)) {
                return .reject(movedChain(transaction))
            }
        }
        return .append
    }

    /// An update to the state the entry is already in (for `purchased` and `restored`, with the
    /// same transaction) is StoreKit redelivering it.
    private static func isRedelivery(_ update: TransactionUpdated, of entry: QueueEntry) -> Bool {
        guard entry.state == QueueEntryState(update.state) else { return false }
        switch update.state {
        case .purchased, .restored: return sameBytes(entry.transaction, update.transaction)
        case .purchasing, .deferred, .failed: return true
        }
    }

    // MARK: downloadUpdated

    /// Downloads belong to a purchased or restored, unfinished entry; a download that ended
    /// takes no further update; progress never decreases; `timeRemaining` is seconds ≥ 0 or -1.
    private static func downloadUpdated(_ update: DownloadUpdated, existing: QueueEntry?) -> Decision {
        guard let entry = existing else {
            return .reject(unknownPayment(update.payment, hint: ""))
        }
        if entry.isFinished {
            return .reject(entryFinished(entry))
        }
        guard entry.state == .purchased || entry.state == .restored else {
            return .reject(LedgerError(.illegalDownload,
                "payment \"\(update.payment)\" is \(entry.state.rawValue); downloads start once it is purchased or restored"))
        }
        if let remaining = update.timeRemaining, remaining < 0, remaining != -1 {
            return .reject(LedgerError(.illegalDownload,
                "`timeRemaining` must be seconds ≥ 0, or -1 for unknown (got \(remaining))"))
        }
        if let index = entry.downloadIndex(update.download) {
            let existing = entry.downloads[index]
            if existing.state.isTerminal {
                return .reject(LedgerError(.illegalDownload,
                    "download \"\(update.download)\" is \(existing.state.rawValue) and accepts no further update"))
            }
            let progress = update.progress ?? 0
            if progress < existing.progress {
                return .reject(LedgerError(.illegalDownload,
                    "download \"\(update.download)\" progress cannot go back from \(existing.progress) to \(progress)"))
            }
        }
        return .append
    }

    // MARK: transactionFinished

    /// A repeated finish is a duplicate; only purchased, failed or restored entries finish, and
    /// only once no download is waiting, active or paused.
    private static func transactionFinished(_ finished: TransactionFinished, existing: QueueEntry?) -> Decision {
        guard let entry = existing else {
            return .reject(unknownPayment(finished.payment, hint: ""))
        }
        if let finishedAt = entry.finishedAt {
            return .duplicate(of: finishedAt)
        }
        guard entry.state.isTerminal else {
            return .reject(LedgerError(.notFinishable,
                "payment \"\(finished.payment)\" is \(entry.state.rawValue); only purchased, failed or restored transactions can be finished"))
        }
        if let pending = entry.downloads.first(where: { $0.state.isPending }) {
            return .reject(LedgerError(.downloadsPending,
                "download \"\(pending.id)\" of payment \"\(finished.payment)\" is \(pending.state.rawValue); finish the transaction after its downloads end"))
        }
        return .append
    }

    // MARK: consumed

    private static func consumed(_ consumed: Consumed, balance: Int64) -> Decision {
        guard consumed.amount <= balance else {
            return .reject(LedgerError(.insufficientBalance,
                "cannot consume \(consumed.amount) \"\(consumed.item)\": the balance is \(balance)"))
        }
        return .append
    }

    // MARK: revoked

    /// The account must hold the transaction (as an entry's transaction or original
    /// transaction); a second revocation of a transaction (by any account: store transaction
    /// ids are global) is a duplicate of the first.
    private static func revoked(_ revoked: Revoked, account: UTF8Key, in context: some RuleContext) throws -> Decision {
        let transaction = UTF8Key(revoked.transaction)
        guard try context.accountHolds(account, transaction: transaction) else {
            return .reject(LedgerError(.unknownTransaction,
                "no entry of this account holds store transaction \"\(revoked.transaction)\""))
        }
        if let first = try context.revocation(of: transaction) {
            return .duplicate(of: first)
        }
        return .append
    }

    // MARK: transferred

    /// The account a chain leaves must hold it (`unknownTransaction`: an entry or a store
    /// report of it, not transferred away already), and only what StoreKit restores moves
    /// (`notRestorable`). The account it joins records the arrival, and only right after its
    /// other half: the leaving account's last transfer of the chain must be this one
    /// (`unknownTransaction`), so a pair whose first half was refused appends nothing.
    private static func transferred(_ transfer: Transferred, account: UTF8Key, in context: some RuleContext) throws -> Decision {
        let chain = UTF8Key(transfer.originalTransaction)
        guard transfer.side(of: account.string) == .leaving else {
            let left = try context.read(UTF8Key(transfer.from), { $0.transfers[chain] })
            guard let left, left.side == .leaving, sameBytes(left.other, transfer.to) else {
                return .reject(LedgerError(.unknownTransaction,
                    "no transfer of \"\(transfer.originalTransaction)\" from \"\(transfer.from)\" to this account precedes this event"))
            }
            if let arrived = try context.read(account, { $0.transfers[chain] }), arrived.side == .joining, arrived.position > left.position {
                return .duplicate(of: arrived.position)
            }
            return .append
        }
        return try refusal(ifNotHolding: chain, owner: transfer.from, in: context).map(Decision.reject) ?? .append
    }

    // MARK: shared

    /// The owner must hold the chain (as for a transfer's leaving account: `unknownTransaction`,
    /// `notRestorable`); sharing it again with the same account is a duplicate of the first.
    private static func shared(_ share: Transferred, account: UTF8Key, in context: some RuleContext) throws -> Decision {
        let chain = UTF8Key(share.originalTransaction)
        if let last = try context.read(account, { $0.transfers[chain] }), last.side == .sharing, sameBytes(last.other, share.from) {
            return .duplicate(of: last.position)
        }
        return try refusal(ifNotHolding: chain, owner: share.from, in: context).map(Decision.reject) ?? .append
    }

    /// What refuses moving or sharing `chain` from `owner`: `unknownTransaction` when the owner
    /// transferred it away or holds no entry or store report of it, `notRestorable` when
    /// StoreKit would not restore it; nil when it may.
    private static func refusal(ifNotHolding chain: UTF8Key, owner: String, in context: some RuleContext) throws -> LedgerError? {
        let last = try context.read(UTF8Key(owner), { $0.transfers[chain] })
        if let last, last.side == .leaving {
            return LedgerError(.unknownTransaction,
                "\"\(owner)\" transferred \"\(chain.string)\" to another account at position \(last.position); it no longer holds it")
        }
        guard let type = try productType(ofChain: chain, heldBy: owner, in: context) else {
            return LedgerError(.unknownTransaction, "no entry or store report of \"\(owner)\" holds \"\(chain.string)\" or a transaction of it")
        }
        guard type.isRestorable else {
            return LedgerError(.notRestorable,
                "\(type.rawValue) products are never restored, so never moved between accounts; only non-consumables and auto-renewable subscriptions are")
        }
        return nil
    }

    /// The product type of `chain` for an account that holds it: from its own entries and
    /// reports, or, when a transfer brought the chain and the account holds no record of it
    /// yet (a bare `transferred` pair), from the accounts the chain came from, in turn. Nil
    /// when the account holds no part of it.
    private static func productType(ofChain chain: UTF8Key, heldBy account: String, in context: some RuleContext) throws -> Catalog.ProductType? {
        var current = account
        var visited: Set<UTF8Key> = [UTF8Key(account)]
        while true {
            if let type = try context.wholeState(UTF8Key(current))?.productType(ofChain: chain) { return type }
            guard let last = try context.read(UTF8Key(current), { $0.transfers[chain] }), last.side == .joining,
                  visited.insert(UTF8Key(last.other)).inserted else { return nil }
            current = last.other
        }
    }

    /// Whether `account` may hold a store transaction of `chain` that `holder` holds: the
    /// chain's owner now (the holder's account, or where its transfers took the chain) is the
    /// account, or shared the chain with it.
    private static func mayHold(_ holder: TransactionHolder, chain: String, account: String, in context: some RuleContext) throws -> Bool {
        let key = UTF8Key(chain)
        let owner = try self.owner(of: key, heldBy: holder.entry.account) { account in try context.read(account) { $0.transfers[key] } }
        if sameBytes(owner, account) { return true }
        guard let standing = try context.read(UTF8Key(account), { $0.transfers[UTF8Key(chain)] }) else { return false }
        return standing.side == .sharing && sameBytes(standing.other, owner)
    }

    /// The account that owns `chain` now: `account`, or the account its transfers took the
    /// chain to, and on; `lastTransfer` answers an account's last transfer of the chain (from
    /// the rules' context, or from the published projections for `Ledger`).
    static func owner(
        of chain: UTF8Key, heldBy account: String, lastTransfer: (UTF8Key) throws -> ChainTransfer?
    ) rethrows -> String {
        var owner = account
        var visited: Set<UTF8Key> = [UTF8Key(account)]
        while let last = try lastTransfer(UTF8Key(owner)), last.side == .leaving, visited.insert(UTF8Key(last.other)).inserted {
            owner = last.other
        }
        return owner
    }

    // MARK: storeTransaction

    /// The store's report is kept whatever arrived before it (a refund before its purchase
    /// waits for it; a report older than the one in force changes nothing). Its product must
    /// be known, since what it grants depends on the product's type, with quantity 1 where the
    /// product requires it; and, as for a purchase, a transaction an entry of another account
    /// holds is `transactionAlreadyCredited`: a report grants, and a transaction grants once.
    private static func storeTransaction(_ fact: StoreTransaction, account: String, in context: some RuleContext) throws -> Decision {
        guard let product = context.catalog[fact.product] else {
            return .reject(unknownProduct(fact.product))
        }
        if let rejection = singleQuantity(fact.quantity, product: product) {
            return .reject(rejection)
        }
        if let holder = try context.holder(of: UTF8Key(fact.transaction)) {
            if !(try mayHold(holder, chain: fact.chain, account: account, in: context)) {
                return .reject(LedgerError(.transactionAlreadyCredited,
                    "store transaction \"\(fact.transaction)\" is held by another account; its store reports go to that account"))
            }
        } else if !(try mayHoldNew(ofChain: fact.chain, account: account, in: context)) {
            return .reject(movedChain(fact.transaction))
        }
        return .append
    }

    /// Whether `account` may hold a transaction no entry holds yet of `chain`. A chain that
    /// moved between accounts (a `transferred` of it) is its owner's, and of those the owner
    /// shared it with: the account that moved it away may not hold its new transactions, nor may
    /// a third account (FORMAT.md, "Transfers"). A chain that never moved keeps version 1's
    /// rule: any account may restore it under a new transaction. (The owner is found from the
    /// entry holding the chain's original transaction; a chain no entry holds the original of,
    /// known from the store's reports alone, is judged by the account's own transfers only.)
    private static func mayHoldNew(ofChain chain: String, account: String, in context: some RuleContext) throws -> Bool {
        let key = UTF8Key(chain)
        let own = try context.read(UTF8Key(account), { $0.transfers[key] })
        if own?.side == .leaving { return false }
        guard let holder = try context.holder(of: key) else { return true }
        if own == nil, try context.read(UTF8Key(holder.entry.account), { $0.transfers[key] }) == nil { return true }
        return try mayHold(holder, chain: chain, account: account, in: context)
    }

    private static func movedChain(_ transaction: String) -> LedgerError {
        LedgerError(.transactionAlreadyCredited,
            "store transaction \"\(transaction)\" belongs to a subscription or purchase another account owns now; its transactions credit that account")
    }

    // MARK: Shared rejections

    private static func singleQuantity(_ quantity: Int?, product: Catalog.Product) -> LedgerError? {
        guard product.type.requiresSingleQuantity, let quantity, quantity != 1 else { return nil }
        return .invalid("`quantity` must be 1 for \(product.type.rawValue) product \"\(product.id)\" (got \(quantity))")
    }

    private static func unknownProduct(_ product: String) -> LedgerError {
        LedgerError(.unknownProduct, "product \"\(product)\" is not in the ledger's catalog")
    }

    private static func unknownPayment(_ payment: String, hint: String) -> LedgerError {
        LedgerError(.unknownPayment, "payment \"\(payment)\" is not in this account's queue\(hint)")
    }

    private static func entryFinished(_ entry: QueueEntry) -> LedgerError {
        LedgerError(.entryFinished,
            "payment \"\(entry.payment)\" was finished at position \(entry.finishedAt ?? 0); it takes no further event")
    }
}
