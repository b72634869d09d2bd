import Synchronization

/// The lowest and highest addresses of the map that this environment's read-only transactions
/// have handed out since the map was last mapped: every page in between may go at once
/// (`releaseEveryReadPage`), the B-tree's inner pages that lie there too, which a cursor reads
/// on its way to each value but hands none of out. Forgotten whenever the map is mapped again
/// (under the map lock held exclusively), since its addresses then point elsewhere.
final class MapReadSpan: Sendable {
    private let span = Mutex<(low: UInt, high: UInt)?>(nil)
    /// Bytes the environment's scans handed out since the span's pages were last let go of.
    private let scanned = Atomic<Int>(0)

    /// Counts `bytes` scanned; true (and the count starts over) once `interval` were.
    func noteScanned(_ bytes: Int, every interval: Int) -> Bool {
        let total = scanned.add(bytes, ordering: .relaxed).newValue
        guard total >= interval else { return false }
        scanned.store(0, ordering: .relaxed)
        return true
    }

    /// nil before any read of this map.
    var current: (low: UInt, high: UInt)? {
        span.withLock { $0 }
    }

    /// Widens the span to cover `read` and returns it.
    @discardableResult
    func widened(toCover read: (low: UInt, high: UInt)) -> (low: UInt, high: UInt) {
        span.withLock { span in
            let widened = span.map { (Swift.min($0.low, read.low), Swift.max($0.high, read.high)) } ?? read
            span = widened
            return widened
        }
    }

    func forget() {
        span.withLock { $0 = nil }
    }
}
