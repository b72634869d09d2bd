/// A binary heap: `top` is the element that precedes every other by `precedes` (a greatest
/// first, or a least first, as the order says). The grant sweep's candidates and the feed's due
/// instants.
struct Heap<Element: Sendable>: Sendable {
    private var items: [Element] = []
    private let precedes: @Sendable (Element, Element) -> Bool

    init(precedes: @escaping @Sendable (Element, Element) -> Bool) {
        self.precedes = precedes
    }

    var top: Element? { items.first }

    mutating func push(_ item: Element) {
        items.append(item)
        var index = items.count - 1
        while index > 0 {
            let parent = (index - 1) / 2
            guard precedes(items[index], items[parent]) else { return }
            items.swapAt(index, parent)
            index = parent
        }
    }

    mutating func pop() {
        guard !items.isEmpty else { return }
        items.swapAt(0, items.count - 1)
        items.removeLast()
        var index = 0
        while true {
            let (left, right) = (2 * index + 1, 2 * index + 2)
            var best = index
            if left < items.count, precedes(items[left], items[best]) { best = left }
            if right < items.count, precedes(items[right], items[best]) { best = right }
            guard best != index else { return }
            items.swapAt(index, best)
            index = best
        }
    }
}
