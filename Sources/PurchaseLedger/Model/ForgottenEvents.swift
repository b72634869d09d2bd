/// A customer asked to be forgotten (`forgotten`, docs/FORMAT.md "Forgetting a customer"): the
/// account's id leaves the ledger, its books stay.
///
/// The event names the account as any event does when it is appended; in the same commit the
/// account table renames the account's handle to its pseudonym, `forgotten/<handle>`, so that
/// from then on this event, and every earlier one of the account, reads as the pseudonym's. It
/// says who asked, never anything about the person.
public struct Forgotten: Sendable, Hashable {
    /// Who asked for it (an operator, a ticket's id): 1–128 bytes.
    public var requestedBy: String

    public init(requestedBy: String) {
        self.requestedBy = requestedBy
    }

    /// What every pseudonym starts with.
    public static let pseudonymPrefix = "forgotten/"

    /// The pseudonym an account or token takes when it is forgotten: its handle's number.
    public static func pseudonym(ofHandle handle: UInt64) -> String {
        pseudonymPrefix + String(handle)
    }

    /// The handle a pseudonym names, when `name` has the pseudonyms' form (`forgotten/` and a
    /// number from 1 without leading zeros).
    public static func handle(ofPseudonym name: String) -> UInt64? {
        let utf8 = name.utf8
        guard utf8.starts(with: pseudonymPrefix.utf8) else { return nil }
        let digits = utf8.dropFirst(pseudonymPrefix.utf8.count)
        guard let first = digits.first, first != UInt8(ascii: "0"), digits.count <= 19,
              digits.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else { return nil }
        return digits.reduce(UInt64(0)) { $0 * 10 + UInt64($1 - UInt8(ascii: "0")) }
    }

    /// The id `Ledger.forget` gives the event: the account's handle, so that it names nothing
    /// about the person (`OwnEventIDs.forget`; a ledger written before the namespaces may need
    /// `forget/<handle>/<n>`).
    public static func eventID(handle: UInt64) -> String {
        OwnEventIDs.forgetID(handle: handle, attempt: 1)
    }
}

extension Event {
    /// Whether a name the event's record stores as a handle (its account, a transfer's
    /// accounts, a token) starts as a pseudonym does: checked without copying the payload.
    var namesPseudonymForm: Bool {
        func isForm(_ name: String?) -> Bool { name?.utf8.starts(with: Forgotten.pseudonymPrefix.utf8) ?? false }
        if isForm(account) { return true }
        switch payload {
        case .transferred(let transfer), .shared(let transfer): return isForm(transfer.from) || isForm(transfer.to)
        case .storeTransaction(let fact): return isForm(fact.appAccountToken) || isForm(fact.appTransaction)
        case .renewalInfo(let info): return isForm(info.appAccountToken) || isForm(info.appTransaction)
        case .appStoreCall(let call): return isForm(call.appAccountToken) || (call.call == .getAppTransactionInfo && isForm(call.transaction))
        case .appTransaction(let info): return isForm(info.appTransaction)
        default: return false
        }
    }
}
