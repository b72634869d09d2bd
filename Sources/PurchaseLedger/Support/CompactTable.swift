/// A table by `UTF8Key` that keeps its elements densely, in one array, with a table of 8-byte
/// slots beside it to find them by hash (`HashSlots`).
///
/// Why not `Dictionary`: it keeps keys and values in tables of a power-of-two number of buckets
/// filled at most three quarters, so a table of large values (an account's state, a
/// transaction's holder) is often half empty, and a replay holds one per account and one per
/// purchase. Here the slots, 8 bytes each, are a quarter to a half full, and the elements take
/// an array's room (exactly what `reserveCapacity` asked for, else up to twice their count as
/// the array doubles). A key sits beside its value, so a lookup misses the cache in two places,
/// the slot and the element, as a dictionary's does in its keys and its values (its occupancy
/// bitmap is small). Neither array shrinks. Keys are compared by their bytes, as everywhere in
/// the ledger. The order of iteration is not meaningful (a removal moves the last element into
/// the hole): callers that print sort, as with `Dictionary`.
struct CompactTable<Value> {
    fileprivate struct Element {
        let key: UTF8Key
        var value: Value
    }

    private var elements: [Element] = []
    /// The elements' slots by their key's hash, at most half full.
    private var slots = HashSlots()

    init() {}

    var count: Int { elements.count }
    var isEmpty: Bool { elements.isEmpty }

    /// The keys, in no meaningful order.
    var keys: some Collection<UTF8Key> { elements.lazy.map(\.key) }

    /// The keys and values, in no meaningful order.
    var keysAndValues: some Collection<(key: UTF8Key, value: Value)> { elements.lazy.map { ($0.key, $0.value) } }

    /// Room for `capacity` elements without growing the arrays or the slots.
    mutating func reserveCapacity(_ capacity: Int) {
        elements.reserveCapacity(capacity)
        if Self.slotCount(for: capacity) > slots.size { slots.resize(to: Self.slotCount(for: capacity)) }
    }

    subscript(key: UTF8Key) -> Value? {
        get { find(key).map { elements[$0.element].value } }
        set {
            if let newValue {
                if let found = find(key) { elements[found.element].value = newValue } else { append(key, newValue) }
            } else {
                removeValue(forKey: key)
            }
        }
    }

    func contains(_ key: UTF8Key) -> Bool {
        find(key) != nil
    }

    /// Changes the value under `key` in place (no copy of it, so a value holding collections
    /// is not copied on write); adds `defaultValue()` first when the key is absent.
    mutating func modify<Answer>(_ key: UTF8Key, default defaultValue: () -> Value, _ body: (inout Value) -> Answer) -> Answer {
        let element: Int
        if let found = find(key) {
            element = found.element
        } else {
            append(key, defaultValue())
            element = elements.count - 1
        }
        return body(&elements[element].value)
    }

    /// Changes the value under `key` in place; nil, and nothing changed, when it is absent.
    mutating func modifyIfPresent<Answer>(_ key: UTF8Key, _ body: (inout Value) -> Answer) -> Answer? {
        guard let found = find(key) else { return nil }
        return body(&elements[found.element].value)
    }

    @discardableResult
    mutating func removeValue(forKey key: UTF8Key) -> Value? {
        guard let found = find(key) else { return nil }
        let last = elements.count - 1
        if found.element != last {
            // The last element fills the hole: its slot points at its new index.
            guard let movedSlot = find(elements[last].key)?.slot else { preconditionFailure("every key of the table has a slot") }
            elements.swapAt(found.element, last)
            slots.repoint(movedSlot, to: found.element)
        }
        let removed = elements.removeLast().value
        slots.remove(found.slot)
        return removed
    }

    /// Replaces the values `transform` gives a new one for; writes nothing else, so a table
    /// whose arrays another copy shares is copied only when a value changes.
    mutating func updateEach(_ transform: (UTF8Key, Value) -> Value?) {
        for index in elements.indices {
            if let new = transform(elements[index].key, elements[index].value) { elements[index].value = new }
        }
    }

    // MARK: Slots

    private static func slotCount(for count: Int) -> Int {
        HashSlots.slotCount(for: count, minimum: 16)
    }

    private func find(_ key: UTF8Key) -> (slot: Int, element: Int)? {
        slots.find(hash: HashSlots.hash(key)) { elements[$0].key == key }
    }

    private mutating func append(_ key: UTF8Key, _ value: Value) {
        if (elements.count + 1) * 2 > slots.size { slots.resize(to: Self.slotCount(for: elements.count + 1)) }
        elements.append(Element(key: key, value: value))
        slots.insert(hash: HashSlots.hash(key), element: elements.count - 1)
    }
}

extension CompactTable: Sendable where Value: Sendable {}
extension CompactTable.Element: Sendable where Value: Sendable {}

extension CompactTable: Equatable where Value: Equatable {
    /// The same keys with equal values, whatever their order.
    static func == (lhs: Self, rhs: Self) -> Bool {
        guard lhs.count == rhs.count else { return false }
        return lhs.elements.allSatisfy { rhs[$0.key] == $0.value }
    }
}
