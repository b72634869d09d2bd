/// A store report in force: Apple's object, when Apple signed it, and the event that carried it.
protocol SignedReport {
    var signedAt: Timestamp { get }
    var eventID: String { get }
}

extension SignedReport {
    /// Whether this report replaces `other` about the same transaction: the one Apple signed
    /// later does; of two signed at the same instant, the one with the greater event id (by
    /// bytes). A total order over the reports, so the one in force never depends on the order
    /// they were appended in.
    func supersedes(_ other: some SignedReport) -> Bool {
        if signedAt != other.signedAt { return signedAt > other.signedAt }
        return other.eventID.utf8.lexicographicallyPrecedes(eventID.utf8)
    }
}

/// The `storeTransaction` in force for one transaction of an account, with what the catalog
/// said of its product when it was applied (products never change).
struct StoreTransactionRecord: SignedReport, Sendable, Hashable {
    /// The report's thirty-odd fields, behind one reference (`Fact`).
    var fact: StoreTransaction {
        _read { yield storedFact.value }
        set { storedFact = Fact(newValue) }
    }
    private var storedFact: Fact
    var signedAt: Timestamp
    var eventID: String
    var productType: Catalog.ProductType
    /// The subscription group it is counted in: the catalog's group of the product, else Apple's
    /// `subscriptionGroup`, else its original transaction.
    var group: String

    init(fact: StoreTransaction, signedAt: Timestamp, eventID: String, product: Catalog.Product) {
        self.init(fact: fact, signedAt: signedAt, eventID: eventID, productType: product.type,
                  group: product.group ?? fact.subscriptionGroup ?? fact.originalTransaction ?? fact.transaction)
    }

    init(fact: StoreTransaction, signedAt: Timestamp, eventID: String, productType: Catalog.ProductType, group: String) {
        storedFact = Fact(fact)
        self.signedAt = signedAt
        self.eventID = eventID
        self.productType = productType
        self.group = group
    }

    /// What the store says; `revoked` events of the format's first version are checked apart.
    var isRevokedByStore: Bool { fact.revokedAt != nil }

    /// A report, immutable, shared by every copy of its record: a record is copied into each
    /// view of its account (the change feed makes one after every event), and copying the
    /// report's fields inline retained each of its strings every time.
    private final class Fact: Sendable, Hashable {
        let value: StoreTransaction

        init(_ value: StoreTransaction) {
            self.value = value
        }

        static func == (lhs: Fact, rhs: Fact) -> Bool {
            lhs === rhs || lhs.value == rhs.value
        }

        func hash(into hasher: inout Hasher) {
            value.hash(into: &hasher)
        }
    }
}

/// The `renewalInfo` in force for one subscription (by original transaction) of an account.
struct RenewalRecord: SignedReport, Sendable, Hashable {
    var info: RenewalInfo
    var signedAt: Timestamp
    var eventID: String
}

/// The `consumptionConsent` in force for an account (`Projector` has the rule).
struct ConsentRecord: Sendable, Hashable {
    var consented: Bool
    /// The latest `at` of the account's consent events so far: a consent dated at or before
    /// it does not undo a withdrawal.
    var signedAt: Timestamp
    /// The event that set `consented`.
    var eventID: String
}

/// The customer's app transaction in force: of the `appTransaction` events, the one Apple
/// signed last (then the greater event id), as for the store's reports.
struct AppTransactionRecord: Sendable, Hashable {
    /// Without `signed`: the proof stays in the log.
    var info: AppTransactionInfo
    var signedAt: Timestamp
    var eventID: String

    /// Whether this record is in force over `other`.
    func supersedes(_ other: AppTransactionRecord) -> Bool {
        signedAt != other.signedAt ? signedAt > other.signedAt : utf8Order(other.eventID, eventID)
    }
}

/// An account's last transfer of a chain: which side it was, the other account, and the
/// position of the `transferred` event.
struct ChainTransfer: Sendable, Hashable {
    var side: Transferred.Side
    var other: String
    var position: UInt64
}
