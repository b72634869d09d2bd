/// A queue entry, named by its account and payment id (compared byte for byte).
package struct EntryReference: Sendable, Hashable {
    package var account: String
    /// The payment's bytes, held as its entry holds them (a replay keeps one holder per purchase).
    let paymentID: CompactID

    package var payment: String { paymentID.string }

    package init(account: String, payment: String) {
        self.init(account: account, paymentID: CompactID(payment))
    }

    init(account: String, paymentID: CompactID) {
        self.account = account
        self.paymentID = paymentID
    }

    package static func == (lhs: EntryReference, rhs: EntryReference) -> Bool {
        sameBytes(lhs.account, rhs.account) && lhs.paymentID == rhs.paymentID
    }

    package func hash(into hasher: inout Hasher) {
        hasher.combine(UTF8Key(account))
        hasher.combine(paymentID)
    }
}

/// The entry that holds a store transaction, since which position, and whether the transaction
/// credited a consumable (a purchase of one, as opposed to a restore or another product type).
package struct TransactionHolder: Sendable, Hashable {
    package var entry: EntryReference
    /// The position, with `creditsConsumable` in its top bit: 48 bytes a holder, not 56 (a
    /// replay keeps one per purchase). Log positions stay below 2^63; backends read a larger
    /// one as damage.
    private var packed: UInt64

    private static let creditsFlag: UInt64 = 1 << 63

    /// The largest position a holder records.
    package static let maximumPosition = creditsFlag - 1

    package var position: UInt64 {
        get { packed & Self.maximumPosition }
        set { packed = newValue & Self.maximumPosition | packed & Self.creditsFlag }
    }

    package var creditsConsumable: Bool {
        get { packed & Self.creditsFlag != 0 }
        set { packed = newValue ? packed | Self.creditsFlag : packed & Self.maximumPosition }
    }

    package init(entry: EntryReference, position: UInt64, creditsConsumable: Bool) {
        self.entry = entry
        packed = position & Self.maximumPosition | (creditsConsumable ? Self.creditsFlag : 0)
    }
}
