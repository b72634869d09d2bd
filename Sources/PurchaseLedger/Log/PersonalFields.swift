/// What a record of format 2 keeps out of its payload because it identifies a person: the
/// `appAccountToken` (the app's id of its account, often the account's own id) and Apple's
/// `appTransactionId` (one per customer and app), stored as handles in the account table; and
/// Apple's signed JWS, which carries both, stored in the proofs table under the record's
/// position. The log itself then holds none of them, so a customer can be forgotten without
/// rewriting it.
///
/// In the record they follow the payload, for the types that carry them: a byte (bit 0: a
/// token, whose handle, a varint, follows; bit 1: a proof in the proofs table; bit 2: an
/// empty token, which names nothing; bit 3: an app transaction id, whose handle follows the
/// token's). A record written before bit 3 keeps the app transaction id in its payload.
struct PersonalFields: Equatable {
    var token: String?
    var proof: String?
    /// `appTransactionId`: a report's `appTransaction`, an `appTransaction` event's, or the
    /// `transaction` of a Get App Transaction Info call (which names the customer's).
    var appTransaction: String?

    static let tokenBit: UInt8 = 1
    static let proofBit: UInt8 = 2
    static let emptyTokenBit: UInt8 = 4
    static let appTransactionBit: UInt8 = 8
    static let allBits = tokenBit | proofBit | emptyTokenBit | appTransactionBit

    /// The byte that says which fields the record carries.
    var presence: UInt8 {
        let token: UInt8 = switch token {
        case nil: 0
        case let token? where token.isEmpty: Self.emptyTokenBit
        default: Self.tokenBit
        }
        return token | (proof == nil ? 0 : Self.proofBit) | (appTransaction == nil ? 0 : Self.appTransactionBit)
    }

    /// Whether events of this type carry them.
    static func apply(to type: EventType) -> Bool {
        switch type {
        case .storeTransaction, .renewalInfo, .appStoreCall, .appTransaction: true
        default: false
        }
    }

    /// An app transaction id to keep apart: an empty one names nothing, and stays in the payload.
    private static func named(_ appTransaction: String?) -> String? {
        appTransaction.flatMap { $0.isEmpty ? nil : $0 }
    }

    /// Takes the fields out of `payload`; nil for a type that carries none.
    static func separate(_ payload: inout Event.Payload) -> PersonalFields? {
        switch payload {
        case .storeTransaction(var fact):
            let fields = PersonalFields(token: fact.appAccountToken, proof: fact.signed, appTransaction: named(fact.appTransaction))
            (fact.appAccountToken, fact.signed) = (nil, nil)
            if fields.appTransaction != nil { fact.appTransaction = nil }
            payload = .storeTransaction(fact)
            return fields
        case .renewalInfo(var info):
            let fields = PersonalFields(token: info.appAccountToken, proof: info.signed, appTransaction: named(info.appTransaction))
            (info.appAccountToken, info.signed) = (nil, nil)
            if fields.appTransaction != nil { info.appTransaction = nil }
            payload = .renewalInfo(info)
            return fields
        case .appStoreCall(var call):
            var fields = PersonalFields(token: call.appAccountToken)
            call.appAccountToken = nil
            if call.call == .getAppTransactionInfo, let customer = named(call.transaction) {
                fields.appTransaction = customer
                call.transaction = ""
            }
            payload = .appStoreCall(call)
            return fields
        case .appTransaction(var info):
            let fields = PersonalFields(proof: info.signed, appTransaction: named(info.appTransaction))
            info.signed = nil
            if fields.appTransaction != nil { info.appTransaction = "" }
            payload = .appTransaction(info)
            return fields
        default:
            return nil
        }
    }

    /// Puts the fields back into a payload `separate` took them from.
    func restore(into payload: inout Event.Payload) {
        switch payload {
        case .storeTransaction(var fact):
            (fact.appAccountToken, fact.signed) = (token, proof)
            if let appTransaction { fact.appTransaction = appTransaction }
            payload = .storeTransaction(fact)
        case .renewalInfo(var info):
            (info.appAccountToken, info.signed) = (token, proof)
            if let appTransaction { info.appTransaction = appTransaction }
            payload = .renewalInfo(info)
        case .appStoreCall(var call):
            call.appAccountToken = token
            if let appTransaction { call.transaction = appTransaction }
            payload = .appStoreCall(call)
        case .appTransaction(var info):
            info.signed = proof
            if let appTransaction { info.appTransaction = appTransaction }
            payload = .appTransaction(info)
        default:
            break
        }
    }
}
