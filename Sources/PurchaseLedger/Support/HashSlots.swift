/// The slots that find elements kept elsewhere, in an array, by their hash: what `CompactTable`
/// and an account's entries (`QueueEntries`) index their arrays with.
///
/// Each slot is empty (0), or an element's index plus one in the low 32 bits and the 32-bit
/// hash of its key in the high 32: a probe compares the hash before it reads the element, and a
/// resize hashes no key again. Linear probing, a power of two in size, kept at most half full by
/// the owner (`slotCount(for:minimum:)`); a removal shifts the run back instead of leaving a
/// tombstone.
struct HashSlots: Sendable {
    private var slots: [UInt64] = []

    var isEmpty: Bool { slots.isEmpty }
    /// How many slots, empty or not.
    var size: Int { slots.count }

    /// Slots for `elements`: a power of two, at least twice `elements` and at least `minimum`.
    static func slotCount(for elements: Int, minimum: Int) -> Int {
        var count = minimum
        while count < elements * 2 { count *= 2 }
        return count
    }

    static func hash<Key: Hashable>(_ key: Key) -> UInt32 {
        UInt32(truncatingIfNeeded: key.hashValue)
    }

    /// The slot and the element whose hash is `hash` and that `isTheElement`; nil when none is.
    @inline(__always)
    func find(hash: UInt32, where isTheElement: (Int) -> Bool) -> (slot: Int, element: Int)? {
        guard !slots.isEmpty else { return nil }
        let mask = slots.count - 1
        var slot = Int(hash) & mask
        while true {
            let stored = slots[slot]
            if stored == 0 { return nil }
            if UInt32(truncatingIfNeeded: stored >> 32) == hash {
                let element = Int(truncatingIfNeeded: stored & 0xFFFF_FFFF) - 1
                if isTheElement(element) { return (slot, element) }
            }
            slot = (slot + 1) & mask
        }
    }

    /// Adds a slot for the element at `element`, whose hash is `hash`; there must be room.
    mutating func insert(hash: UInt32, element: Int) {
        assert(!slots.isEmpty && slots.count & (slots.count - 1) == 0, "a power of two of slots")
        let mask = slots.count - 1
        var slot = Int(hash) & mask
        while slots[slot] != 0 { slot = (slot + 1) & mask }
        slots[slot] = UInt64(hash) << 32 | UInt64(element + 1)
    }

    /// `count` slots holding the same elements, from the hashes the slots keep.
    mutating func resize(to count: Int) {
        let old = slots
        slots = [UInt64](repeating: 0, count: count)
        for stored in old where stored != 0 {
            insert(hash: UInt32(truncatingIfNeeded: stored >> 32), element: Int(truncatingIfNeeded: stored & 0xFFFF_FFFF) - 1)
        }
    }

    /// Points `slot` at the element now at `element` (an element moved in its array).
    mutating func repoint(_ slot: Int, to element: Int) {
        slots[slot] = slots[slot] & 0xFFFF_FFFF_0000_0000 | UInt64(element + 1)
    }

    /// Empties `slot`, moving later slots of the same run back so that every probe still
    /// reaches its element (no tombstones).
    mutating func remove(_ slot: Int) {
        let mask = slots.count - 1
        var hole = slot
        var next = slot
        while true {
            next = (next + 1) & mask
            let stored = slots[next]
            if stored == 0 { break }
            let home = Int(truncatingIfNeeded: stored >> 32) & mask
            // The element at `next` may move into the hole unless its home lies cyclically in
            // (hole, next]: then the hole is not on its probe path.
            let homeIsBetween = hole <= next ? (home > hole && home <= next) : (home > hole || home <= next)
            if !homeIsBetween {
                slots[hole] = stored
                hole = next
            }
        }
        slots[hole] = 0
    }
}
