/// What a record of format 2 keeps out of its payload because it identifies a person: the
/// `appAccountToken` (the app's id of its account, often the account's own id), stored as a
/// handle in the account table; and Apple's signed JWS, which carries that token, stored in
/// the proofs table under the record's position. The log itself then holds neither, so an
/// account can be forgotten without rewriting it.
///
/// In the record they follow the payload, for the types that carry them: a byte (bit 0: a
/// token, whose handle, a varint, follows; bit 1: a proof in the proofs table; bit 2: an
/// empty token, which names nothing).
struct PersonalFields: Equatable {
    var token: String?
    var proof: String?

    static let tokenBit: UInt8 = 1
    static let proofBit: UInt8 = 2
    static let emptyTokenBit: UInt8 = 4
    static let allBits = tokenBit | proofBit | emptyTokenBit

    /// The byte that says which fields the record carries.
    var presence: UInt8 {
        let token: UInt8 = switch token {
        case nil: 0
        case let token? where token.isEmpty: Self.emptyTokenBit
        default: Self.tokenBit
        }
        return token | (proof == nil ? 0 : Self.proofBit)
    }

    /// Whether events of this type carry them.
    static func apply(to type: EventType) -> Bool {
        switch type {
        case .storeTransaction, .renewalInfo, .appStoreCall, .appTransaction: true
        default: false
        }
    }

    /// Takes the fields out of `payload`; nil for a type that carries none.
    static func separate(_ payload: inout Event.Payload) -> PersonalFields? {
        switch payload {
        case .storeTransaction(var fact):
            let fields = PersonalFields(token: fact.appAccountToken, proof: fact.signed)
            (fact.appAccountToken, fact.signed) = (nil, nil)
            payload = .storeTransaction(fact)
            return fields
        case .renewalInfo(var info):
            let fields = PersonalFields(token: info.appAccountToken, proof: info.signed)
            (info.appAccountToken, info.signed) = (nil, nil)
            payload = .renewalInfo(info)
            return fields
        case .appStoreCall(var call):
            let fields = PersonalFields(token: call.appAccountToken)
            call.appAccountToken = nil
            payload = .appStoreCall(call)
            return fields
        case .appTransaction(var info):
            let fields = PersonalFields(proof: info.signed)
            info.signed = nil
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
            payload = .storeTransaction(fact)
        case .renewalInfo(var info):
            (info.appAccountToken, info.signed) = (token, proof)
            payload = .renewalInfo(info)
        case .appStoreCall(var call):
            call.appAccountToken = token
            payload = .appStoreCall(call)
        case .appTransaction(var info):
            info.signed = proof
            payload = .appTransaction(info)
        default:
            break
        }
    }
}
