/// An account's queue entries by payment id (by bytes): in an array, in the order each payment
/// first came, with an index by payment once there are more than a few.
///
/// Most accounts hold a handful of entries, and a dictionary's buckets (a power of two, at most
/// three quarters full) cost them up to twice the entries' own size: for a log of 250,000
/// purchases over 50,000 accounts, 67 MB where the entries were 32 MB (of 128 bytes each, as
/// then). An array costs what the entries do, and grows by a quarter, not twice over (most
/// accounts stop growing at a few entries, and the slack of doubling was a third of it). The
/// index keeps an account with thousands of entries at one lookup per event; its slots
/// (`HashSlots`, as `CompactTable`'s) hold an offset and a hash, since each key is its entry's
/// payment.
///
/// Beside them, the offsets of the two kinds of entries an answer reads, each in the order
/// opened, kept as entries change: those not finished (the `unfinished` set) and those that
/// may grant (a product that grants entitlements, `purchased` or `restored`). An account's
/// answer then reads those, not every entry it ever had: an account of ten thousand consumable
/// purchases, all finished, is answered as fast as one of ten (the change feed builds an answer
/// after every event).
struct QueueEntries: Sendable {
    /// The entries, in the order their payments first came.
    private(set) var values: [QueueEntry] = []
    /// Empty below `indexedFrom` entries; then the offsets into `values` by the payment's hash
    /// (seeded, as a dictionary's: payments come from outside), at most half full.
    private var index = HashSlots()
    /// Offsets of the entries not finished, by `openedAt`.
    private var unfinishedOffsets: [Int32] = []
    /// Offsets of the entries that may grant (`QueueEntry.mayGrant`), by `openedAt`: an entry
    /// becomes one once, and stays one.
    private var grantingOffsets: [Int32] = []

    /// The entries not finished, in the order opened.
    var unfinished: some Collection<QueueEntry> { unfinishedOffsets.lazy.map { values[Int($0)] } }

    /// The entries that may grant, in the order opened.
    var granting: some Collection<QueueEntry> { grantingOffsets.lazy.map { values[Int($0)] } }

    /// How many entries are not finished.
    var unfinishedCount: Int { unfinishedOffsets.count }

    /// Keeps the two lists as the entry at `offset` goes from what it was (open or finished, may
    /// grant or not; a new entry was neither) to what it is.
    private mutating func track(_ offset: Int, wasOpen: Bool, wasGranting: Bool) {
        let entry = values[offset]
        if wasOpen != !entry.isFinished {
            if wasOpen {
                if let found = unfinishedOffsets.firstIndex(of: Int32(truncatingIfNeeded: offset)) { unfinishedOffsets.remove(at: found) }
            } else {
                insert(offset, into: &unfinishedOffsets)
            }
        }
        if entry.mayGrant, !wasGranting { insert(offset, into: &grantingOffsets) }
    }

    /// Inserts `offset` into `offsets`, kept in the order the entries were opened (almost always
    /// at the end: entries come in that order, unless read back from a snapshot).
    private func insert(_ offset: Int, into offsets: inout [Int32]) {
        let opened = values[offset].openedAt
        var at = offsets.count
        while at > 0, values[Int(offsets[at - 1])].openedAt > opened { at -= 1 }
        offsets.insert(Int32(truncatingIfNeeded: offset), at: at)
    }

    /// Below this many entries a lookup compares payments one by one: cheaper than hashing.
    static let indexedFrom = 16

    var count: Int { values.count }

    /// The entries in the order they were opened: `values` itself when its order is that one
    /// (entries come in the order they open, unless read back from a snapshot), with no copy.
    var inOrderOpened: [QueueEntry] {
        for index in values.indices.dropFirst() where values[index].openedAt < values[index - 1].openedAt {
            return values.sorted { $0.openedAt < $1.openedAt }
        }
        return values
    }

    subscript(payment: UTF8Key) -> QueueEntry? {
        offset(of: payment).map { values[$0] }
    }

    subscript(payment: CompactID) -> QueueEntry? {
        payment.withBytes { offset(of: payment, fingerprint: QueueEntry.fingerprint($0)) }.map { values[$0] }
    }

    /// Puts `entry` in as the entry of its payment; returns the one it replaced.
    @discardableResult
    mutating func update(_ entry: QueueEntry) -> QueueEntry? {
        if let offset = offset(of: entry.paymentID, fingerprint: entry.paymentFingerprint) {
            // Swapped, not copied out and assigned: an entry holds up to five references.
            var previous = entry
            swap(&previous, &values[offset])
            track(offset, wasOpen: !previous.isFinished, wasGranting: previous.mayGrant)
            return previous
        }
        if values.count == values.capacity { values.reserveCapacity(values.count + values.count / 4 + 1) }
        values.append(entry)
        track(values.count - 1, wasOpen: false, wasGranting: false)
        if values.count >= Self.indexedFrom {
            if index.isEmpty {
                // The first time: the entries so far, each hashed once.
                index.resize(to: HashSlots.slotCount(for: values.count, minimum: 32))
                for offset in values.indices { index.insert(hash: HashSlots.hash(values[offset].paymentID), element: offset) }
            } else {
                if values.count * 2 > index.size { index.resize(to: index.size * 2) }
                index.insert(hash: HashSlots.hash(entry.paymentID), element: values.count - 1)
            }
        }
        return nil
    }

    /// Changes the entry of `payment` in place (no copy of it out and back) and returns
    /// `body`'s answer; nil when there is none. `body` changes the entry's fields, not the
    /// entry for another payment's: the index finds it by its payment.
    mutating func update<Answer>(_ payment: UTF8Key, _ body: (inout QueueEntry) -> Answer) -> Answer? {
        guard let offset = offset(of: payment) else { return nil }
        let (wasOpen, wasGranting) = (!values[offset].isFinished, values[offset].mayGrant)
        let answer = body(&values[offset])
        if wasOpen == values[offset].isFinished || wasGranting != values[offset].mayGrant {
            track(offset, wasOpen: wasOpen, wasGranting: wasGranting)
        }
        assert(values[offset].paymentID.matches(payment.string), "an entry changed in place keeps its payment")
        return answer
    }

    mutating func reserveCapacity(_ count: Int) {
        values.reserveCapacity(count)
    }

    private func offset(of payment: UTF8Key) -> Int? {
        let wanted = QueueEntry.fingerprint(payment.string)
        return offset(hash: HashSlots.hash(payment)) { $0.paymentFingerprint == wanted && $0.paymentID.matches(payment.string) }
    }

    private func offset(of payment: CompactID, fingerprint wanted: UInt32) -> Int? {
        offset(hash: HashSlots.hash(payment)) { $0.paymentFingerprint == wanted && $0.paymentID == payment }
    }

    /// The offset of the entry that `isThePayment`; `hash` is the payment's (`UTF8Key`'s and
    /// `CompactID`'s are one). Fingerprints are compared first, the bytes only where one
    /// matches: comparing every payment's bytes cost a replay 15%.
    private func offset(hash: @autoclosure () -> UInt32, where isThePayment: (QueueEntry) -> Bool) -> Int? {
        guard !index.isEmpty else { return values.firstIndex(where: isThePayment) }
        return index.find(hash: hash()) { isThePayment(values[$0]) }?.element
    }
}

/// Equal when they hold the same entries by payment, whatever the order they came in (a state
/// rebuilt from a snapshot holds them in payment order).
extension QueueEntries: Hashable {
    static func == (lhs: QueueEntries, rhs: QueueEntries) -> Bool {
        lhs.count == rhs.count && lhs.values.allSatisfy { rhs[$0.paymentID] == $0 }
    }

    func hash(into hasher: inout Hasher) {
        // Order-independent, as `Set` hashes: a commutative sum of each entry's own hash.
        hasher.combine(count)
        hasher.combine(values.reduce(0) { $0 &+ $1.hashValue })
    }
}
