/// The event ids the ledger's own components make (the library's forget, the server, the tools,
/// reconciliation): each in a namespace of its own, which a client cannot take.
///
/// An id is an idempotency key, first come first served: whoever appends an id first owns it,
/// and every later event with it is a `duplicate`. So an id a component makes from what it
/// records (`forget/<handle>`, `storekit:<transactionId>`) is only as safe as its namespace: a
/// client that could append `forget/3` first would make the forget of that account a
/// "duplicate", and a client that took `storekit:<id>` would keep a customer's genuine
/// purchase from ever being credited. Three rules keep the namespaces the ledger's:
///
/// - Every append, whatever its path: an id in a namespace is `invalidEvent` on any event type
///   but those the namespace's maker writes (`namespace(of:)`, checked with the event's other
///   fields in `Event.validate`), and a `forget/` id names the forgotten account's own handle
///   (`ProjectionSession`).
/// - The server's `POST /v1/events` refuses every id in a namespace (`isOwn`): a client never
///   appends one, whatever its scopes. Imports and copies by an operator keep them (an export
///   holds them).
/// - A component appending what it made asks that a `duplicate` be the same fact
///   (`Ledger.append(contentsOf:duplicates:)`, `Event.isSameFact(as:)`): an id someone else's
///   event holds is an error there, never taken for "already recorded".
///
/// The notifications' ids (`<notificationUUID>/…`) are Apple's random UUIDs, which no client
/// knows before Apple sends them; they need no namespace, and keep the form they always had.
public enum OwnEventIDs {
    /// A namespace: the prefix of its ids and the event types its maker writes under it.
    public struct Namespace: Sendable, Hashable {
        public let prefix: String
        public let types: Set<EventType>
        /// Who makes the ids, for messages.
        public let maker: String
    }

    /// `Ledger.forget`: `forget/<handle>`, or `forget/<handle>/<n>` when a ledger written
    /// before the namespaces were kept holds the first under another event.
    public static let forget = Namespace(prefix: "forget/", types: [.forgotten], maker: "a forget")
    /// Transfers and shares (`ledger transfer`, the server's restore policy), and what a
    /// transfer gives the account it joins (`TransferArrival`).
    public static let transfer = Namespace(
        prefix: "transfer/", types: [.transferred, .storeTransaction, .renewalInfo, .transactionUpdated, .transactionFinished],
        maker: "a transfer")
    public static let share = Namespace(
        prefix: "share/", types: [.shared, .storeTransaction, .renewalInfo, .transactionUpdated, .transactionFinished],
        maker: "a share")
    /// StoreKit 2 transactions a device sent the server (`POST /v1/transactions`).
    public static let storeKit = Namespace(
        prefix: "storekit:", types: [.transactionUpdated, .transactionFinished, .storeTransaction], maker: "the server's StoreKit 2 route")
    /// The calls the server made to Apple on the ledger's behalf, and their answers.
    public static let appStoreCall = Namespace(
        prefix: "appstore-call/", types: [.appStoreCall, .appTransaction], maker: "the server's calls to Apple")
    /// Reconciliation with the App Store Server API.
    public static let appStoreAPI = Namespace(
        prefix: "appstore-api:", types: [.transactionUpdated, .transactionFinished, .storeTransaction, .renewalInfo],
        maker: "reconciliation")

    public static let namespaces: [Namespace] = [forget, transfer, share, storeKit, appStoreCall, appStoreAPI]

    /// The namespace `id` is in, if any.
    public static func namespace(of id: String) -> Namespace? {
        // Every prefix starts with one of these bytes: most ids are passed over at the first.
        guard let first = id.utf8.first, first == UInt8(ascii: "f") || first == UInt8(ascii: "t") || first == UInt8(ascii: "s")
            || first == UInt8(ascii: "a") else { return nil }
        return namespaces.first { id.utf8.starts(with: $0.prefix.utf8) }
    }

    /// Whether `id` is one the ledger's components make: never a client's.
    public static func isOwn(_ id: String) -> Bool {
        namespace(of: id) != nil
    }

    /// The refusal of a client's event whose id is in a namespace.
    public static func clientRefusal(_ id: String) -> LedgerError? {
        guard let namespace = namespace(of: id) else { return nil }
        return .invalid("ids that start with `\(namespace.prefix)` are made by \(namespace.maker), never sent by a client; choose another id")
    }

    /// The refusal of a client's event (`POST /v1/events`): its id is in a namespace, it names
    /// an entry of the App Store's purchases (`appstore:<transactionId>`), or its account is a
    /// pseudonym (`forgotten/…`). The recorder opens and finishes the store's entries itself;
    /// a forgotten customer's books take only what the store reports of her purchases.
    public static func clientRefusal(of event: Event) -> LedgerError? {
        if let refusal = clientRefusal(event.id) { return refusal }
        if let payment = event.payment, isStorePayment(payment) {
            return .invalid("payments that start with `\(storePaymentPrefix)` are the App Store's purchases, which the server records from Apple's signed reports; never sent by a client")
        }
        var accounts = [event.account]
        if case .transferred(let transfer) = event.payload { accounts += [transfer.from, transfer.to] }
        if case .shared(let transfer) = event.payload { accounts += [transfer.from, transfer.to] }
        if accounts.contains(where: { $0.utf8.starts(with: Forgotten.pseudonymPrefix.utf8) }) {
            return .invalid("accounts that start with `\(Forgotten.pseudonymPrefix)` are forgotten customers' pseudonyms; a client never names one")
        }
        return nil
    }

    /// What the entries of the App Store's purchases start with: `appstore:<transactionId>`,
    /// opened by the App Store's report of the purchase (a notification, a StoreKit 2
    /// transaction, reconciliation), never by `paymentAdded`.
    public static let storePaymentPrefix = "appstore:"

    /// Whether `payment` is the entry of an App Store purchase.
    public static func isStorePayment(_ payment: String) -> Bool {
        payment.utf8.starts(with: storePaymentPrefix.utf8)
    }

    /// The forget ids `Ledger.forget` may give the forget of the account with `handle`, in the
    /// order it tries them: `forget/<handle>`, then `forget/<handle>/2`, `/3`, …
    static func forgetID(handle: UInt64, attempt: Int) -> String {
        attempt <= 1 ? "forget/\(handle)" : "forget/\(handle)/\(attempt)"
    }

    /// The handle a `forget/` id names: `forget/<handle>` or `forget/<handle>/<n>` (numbers
    /// from 1, without leading zeros); nil for any other form.
    static func handle(ofForgetID id: String) -> UInt64? {
        guard id.utf8.starts(with: forget.prefix.utf8) else { return nil }
        let parts = id.utf8.dropFirst(forget.prefix.utf8.count).split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
        guard parts.count == 1 || parts.count == 2, let handle = number(parts[0]) else { return nil }
        if parts.count == 2 { guard let attempt = number(parts[1]), attempt >= 2 else { return nil } }
        return handle
    }

    private static func number(_ digits: Substring.UTF8View.SubSequence) -> UInt64? {
        guard let first = digits.first, first != UInt8(ascii: "0"), digits.count <= 19,
              digits.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else { return nil }
        return digits.reduce(UInt64(0)) { $0 * 10 + UInt64($1 - UInt8(ascii: "0")) }
    }
}

/// What a `duplicate` means to the one who appends.
public enum DuplicatePolicy: Sendable, Hashable {
    /// The format's rule: an event whose id the log holds is a `duplicate`, whatever the event
    /// already there says. What a client's events get.
    case byID
    /// An event whose id the log holds is a `duplicate` only when the event there is the same
    /// fact (`Event.isSameFact(as:)`); otherwise it is refused (`invalidEvent`: the id is
    /// another event's). What the ledger's own components ask for the ids they make, so that
    /// a taken id never passes for "already recorded".
    case sameFact
}

extension Event {
    /// Whether this event records the same fact as `recorded`, the event already in the log
    /// under its id: the same type, account and subject (the fields that say *what* happened,
    /// as a redelivery repeats them), whatever else differs. A redelivery may differ in what
    /// the maker read again since: the `at` of the device's events (informational) and of the
    /// server's own decisions, an extended `expiresAt`, Apple's proof signed anew, a report's
    /// `source`. Accounts and ids compare by bytes.
    public func isSameFact(as recorded: Event) -> Bool {
        guard type == recorded.type, sameBytes(account, recorded.account) else { return false }
        switch (payload, recorded.payload) {
        case let (.paymentAdded(new), .paymentAdded(old)):
            return sameBytes(new.payment, old.payment) && sameBytes(new.product, old.product)
        case let (.transactionUpdated(new), .transactionUpdated(old)):
            return sameBytes(new.payment, old.payment) && new.state == old.state && sameBytes(new.transaction, old.transaction)
        case let (.downloadUpdated(new), .downloadUpdated(old)):
            return sameBytes(new.payment, old.payment) && sameBytes(new.download, old.download) && new.state == old.state
        case let (.transactionFinished(new), .transactionFinished(old)):
            return sameBytes(new.payment, old.payment)
        case let (.consumed(new), .consumed(old)):
            return sameBytes(new.item, old.item) && new.amount == old.amount
        case let (.revoked(new), .revoked(old)):
            return sameBytes(new.transaction, old.transaction)
        case let (.storeTransaction(new), .storeTransaction(old)):
            // Apple's report of a transaction, signed at one instant.
            return sameBytes(new.transaction, old.transaction) && at == recorded.at
        case let (.renewalInfo(new), .renewalInfo(old)):
            return sameBytes(new.originalTransaction, old.originalTransaction) && at == recorded.at
        case let (.consumptionConsent(new), .consumptionConsent(old)):
            return new.consented == old.consented
        case let (.consumptionRequest(new), .consumptionRequest(old)):
            return sameBytes(new.transaction, old.transaction)
        case let (.consumptionAnswer(new), .consumptionAnswer(old)):
            return sameBytes(new.request, old.request) && sameBytes(new.transaction, old.transaction)
        case let (.appStoreCall(new), .appStoreCall(old)):
            return new.call == old.call && sameBytes(new.transaction, old.transaction)
        case let (.appTransaction(new), .appTransaction(old)):
            return sameBytes(new.appTransaction, old.appTransaction) && at == recorded.at
        case let (.transferred(new), .transferred(old)), let (.shared(new), .shared(old)):
            return sameBytes(new.originalTransaction, old.originalTransaction) && sameBytes(new.from, old.from)
                && sameBytes(new.to, old.to)
        case (.forgotten, .forgotten):
            // The account compared above: the same handle's forget.
            return true
        default:
            return false
        }
    }
}
