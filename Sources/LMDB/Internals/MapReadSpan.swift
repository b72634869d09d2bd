import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The lowest and highest addresses of the map that this environment's read-only transactions
/// have handed out since the map was last mapped: every page in between may go at once
/// (`releaseEveryReadPage`), the B-tree's inner pages that lie there too, which a cursor reads
/// on its way to each value but hands none of out. Forgotten whenever the map is mapped again
/// (under the map lock held exclusively), since its addresses then point elsewhere.
final class MapReadSpan: Sendable {
    private let span = Mutex<(low: UInt, high: UInt)?>(nil)
    /// `Environment.Configuration.releasesReadPagesEvery`.
    private let interval: Int?
    /// Bytes of values the reads handed out, in all (wrapping).
    private let handedOut = Atomic<Int>(0)

    /// What a lookup counts at least: it maps the page its value lies in, whatever its size.
    static let pageSize = max(4096, Int(sysconf(Int32(_SC_PAGESIZE))))

    /// `interval` of 0 or less: no release of its own, as nil.
    init(releasingEvery interval: Int?) {
        self.interval = interval.flatMap { $0 > 0 ? $0 : nil }
    }

    /// Counts `bytes` of values handed out; true when they cross a multiple of the interval:
    /// the read that crossed it lets go of every read page. Without a store of its own, so
    /// that reads on two threads at once neither lose a count nor both let go for one.
    func noteHandedOut(_ bytes: Int) -> Bool {
        guard let interval, bytes > 0 else { return false }
        let before = handedOut.wrappingAdd(bytes, ordering: .relaxed).oldValue
        return before / interval != (before &+ bytes) / interval
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
