/// The state of a queue entry: `added` after `paymentAdded`, then what the queue reported.
public enum QueueEntryState: String, Sendable, Hashable, CaseIterable {
    case added, purchasing, deferred, purchased, failed, restored

    init(_ state: TransactionState) {
        switch state {
        case .purchasing: self = .purchasing
        case .deferred: self = .deferred
        case .purchased: self = .purchased
        case .failed: self = .failed
        case .restored: self = .restored
        }
    }

    /// `purchased`, `failed` and `restored` accept no other state: they await `finishTransaction`.
    public var isTerminal: Bool { self == .purchased || self == .failed || self == .restored }

    /// The spec's state machine. A new entry opened by `transactionUpdated` may take any state.
    func allowsTransition(to next: TransactionState) -> Bool {
        switch self {
        case .added: next == .purchasing || next == .deferred || next == .purchased || next == .failed
        case .purchasing: next == .deferred || next == .purchased || next == .failed
        case .deferred: next == .purchasing || next == .purchased || next == .failed
        case .purchased, .failed, .restored: false
        }
    }
}

/// One entry of an account's payment queue, as the log has built it so far.
struct QueueEntry: Sendable, Hashable {
    struct Download: Sendable, Hashable {
        var id: String
        var state: DownloadState
        var progress: Double
    }

    // Widest first, the narrow fields last, so that little is padding: 128 bytes an entry (a
    // replay holds one per purchase), with "not finished" a position of 0 rather than an
    // optional's extra byte, and the quantity (1 to 10) in one byte.
    /// The payment's bytes, without a heap object up to 22 of them.
    let paymentID: CompactID
    let product: String
    /// Set by `purchased` or `restored`, never changed afterwards.
    var transaction: String?
    var originalTransaction: String?
    /// The log position of the event that opened the entry (orders `unfinished`).
    let openedAt: UInt64
    /// The position of the event that set `state`: what a redelivery is a duplicate of.
    var stateSetAt: UInt64
    /// `finishedAt`, or 0 (no record is at position 0).
    private var finishedPosition: UInt64 = 0
    /// In the order first reported.
    var downloads: [Download] = []
    var expiresAt: Timestamp?
    /// `quantity`: every decoder of an event or a snapshot checks it is 1 to 10 first.
    private let quantityByte: UInt8
    let productType: Catalog.ProductType
    var state: QueueEntryState
    /// `fingerprint(payment)`, in what was padding: what a lookup among an account's entries
    /// compares before the bytes.
    let paymentFingerprint: UInt32

    init(payment: String, product: Catalog.Product, quantity: Int, openedAt: UInt64) {
        self.init(payment: payment, product: product.id, productType: product.type, quantity: quantity, openedAt: openedAt)
    }

    init(payment: String, product: String, productType: Catalog.ProductType, quantity: Int, openedAt: UInt64) {
        self.paymentID = CompactID(payment)
        self.product = product
        self.productType = productType
        precondition(EventLimits.quantity.contains(quantity), "a quantity is checked where it is decoded")
        self.quantityByte = UInt8(truncatingIfNeeded: quantity)
        self.openedAt = openedAt
        self.state = .added
        self.stateSetAt = openedAt
        self.paymentFingerprint = Self.fingerprint(payment)
    }

    /// The payment id (a new string when it was held inline past 15 bytes).
    var payment: String { paymentID.string }

    var quantity: Int { Int(quantityByte) }

    /// The position of `transactionFinished`, once finished.
    var finishedAt: UInt64? {
        get { finishedPosition == 0 ? nil : finishedPosition }
        set {
            assert(newValue != 0, "no record is at position 0")
            finishedPosition = newValue ?? 0
        }
    }

    var isFinished: Bool { finishedPosition != 0 }

    /// FNV-1a over a payment's bytes, folded to 32 bits.
    static func fingerprint(_ payment: String) -> UInt32 {
        var payment = payment
        return payment.withUTF8 { fingerprint(UnsafeRawBufferPointer($0)) }
    }

    static func fingerprint(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        let hash = bytes.reduce(0xCBF2_9CE4_8422_2325 as UInt64) { ($0 ^ UInt64($1)) &* 0x0000_0100_0000_01B3 }
        return UInt32(truncatingIfNeeded: hash ^ (hash >> 32))
    }

    func downloadIndex(_ id: String) -> Int? {
        downloads.firstIndex { sameBytes($0.id, id) }
    }

    /// Whether the entry may grant its product: a product that grants entitlements, purchased or
    /// restored (terminal states: an entry never stops being one). Whether it does at an instant
    /// is `entitles(at:isRevoked:)`'s.
    var mayGrant: Bool {
        productType.grantsEntitlement && (state == .purchased || state == .restored)
    }

    /// Whether the entry counts for entitlements at `time`, given which transactions are revoked.
    func entitles(at time: Timestamp, isRevoked: (UTF8Key) throws -> Bool) rethrows -> Bool {
        guard mayGrant else { return false }
        if let expiresAt, expiresAt <= time { return false }
        if let transaction, try isRevoked(UTF8Key(transaction)) { return false }
        if let originalTransaction, try isRevoked(UTF8Key(originalTransaction)) { return false }
        return true
    }
}

extension QueueEntry {
    /// The subscription or purchase its transaction belongs to: its original transaction, else
    /// the transaction itself (nil before the entry holds one).
    var chain: String? { originalTransaction ?? transaction }
}
