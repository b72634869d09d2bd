/// One account's store reports in force, by transaction id, held in the ids' byte order: the
/// order a projection lists them in (sorting them again for each projection was most of a long
/// subscriber's change feed, which builds one after each of its events), and, for the few
/// reports most accounts hold, smaller than a hash table. One array, so that the account
/// state stays as small inline as with a dictionary.
struct StoreTransactionRecords: Sendable, Hashable, Sequence, ExpressibleByDictionaryLiteral {
    struct Element: Sendable, Hashable {
        var key: UTF8Key
        var record: StoreTransactionRecord
    }

    /// In byte order of their keys.
    private var elements: [Element] = []

    init() {}

    init(dictionaryLiteral elements: (UTF8Key, StoreTransactionRecord)...) {
        for (key, record) in elements { self[key] = record }
    }

    var isEmpty: Bool { elements.isEmpty }
    var count: Int { elements.count }
    /// The transaction ids, in byte order.
    var keys: LazyMapSequence<[Element], UTF8Key> { elements.lazy.map(\.key) }
    /// The reports, in their ids' order.
    var values: LazyMapSequence<[Element], StoreTransactionRecord> { elements.lazy.map(\.record) }

    subscript(key: UTF8Key) -> StoreTransactionRecord? {
        get {
            let (found, index) = place(of: key)
            return found ? elements[index].record : nil
        }
        set {
            let (found, index) = place(of: key)
            switch (found, newValue) {
            case (true, let record?): elements[index].record = record
            case (true, nil): elements.remove(at: index)
            case (false, let record?): elements.insert(Element(key: key, record: record), at: index)
            case (false, nil): break
            }
        }
    }

    /// The reports `isIncluded` keeps, in the same order.
    func filter(_ isIncluded: (StoreTransactionRecord) throws -> Bool) rethrows -> StoreTransactionRecords {
        var kept = StoreTransactionRecords()
        kept.elements = try elements.filter { try isIncluded($0.record) }
        return kept
    }

    func makeIterator() -> IndexingIterator<[Element]> {
        elements.makeIterator()
    }

    /// Whether `key` is held, and its index, or where it would go. A renewal's id usually
    /// comes after every earlier one: checked first.
    private func place(of key: UTF8Key) -> (found: Bool, index: Int) {
        guard let last = elements.last else { return (false, 0) }
        if last.key < key { return (false, elements.count) }
        var (low, high) = (0, elements.count)
        while low < high {
            let middle = (low + high) / 2
            if elements[middle].key < key { low = middle + 1 } else { high = middle }
        }
        return (low < elements.count && elements[low].key == key, low)
    }
}
