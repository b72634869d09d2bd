import Synchronization

/// Slots counted in all and by API key: at most `limit` taken at once, and at most
/// `limitPerKey` by one key, so that no one client takes them all. What bounds the held reads
/// (`HeldReads`) and the expensive reads (`ExpensiveReads`).
final class KeyedSlots: Sendable {
    let limit: Int
    let limitPerKey: Int
    private let taken = Mutex<(total: Int, byKey: [String: Int])>((0, [:]))
    private let whenAllReleased: (@Sendable () -> Void)?

    /// - Parameter whenAllReleased: called when the last slot taken is released.
    init(limit: Int, limitPerKey: Int, whenAllReleased: (@Sendable () -> Void)? = nil) {
        self.limit = max(1, limit)
        self.limitPerKey = max(1, limitPerKey)
        self.whenAllReleased = whenAllReleased
    }

    /// A slot for the key named `key`; nil when `limit` slots are taken, or `limitPerKey` of
    /// that key's. Held until released (`release`, or when it goes).
    func tryAcquire(key: String) -> CountedSlot? {
        let acquired = taken.withLock { taken in
            let ofKey = taken.byKey[key, default: 0]
            guard taken.total < limit, ofKey < limitPerKey else { return false }
            taken.total += 1
            taken.byKey[key] = ofKey + 1
            return true
        }
        return acquired ? CountedSlot { self.release(key) } : nil
    }

    /// How many are taken now, in all and of `key` (for tests and metrics).
    func count(of key: String? = nil) -> Int {
        taken.withLock { taken in key.map { taken.byKey[$0, default: 0] } ?? taken.total }
    }

    private func release(_ key: String) {
        let left = taken.withLock { taken in
            taken.total -= 1
            let left = taken.byKey[key, default: 1] - 1
            taken.byKey[key] = left > 0 ? left : nil
            return taken.total
        }
        if left == 0 { whenAllReleased?() }
    }
}

/// The reads that hold their connection while they wait for changes (a stream of the feed, a
/// long poll), bounded in number: at most `limit` at once, and at most `limitPerKey` for one API
/// key. Each holds one of the server's `maxConnections`, and `limit` stays below it, so that
/// however many streams clients open and never read, appends, Apple's notifications and other
/// keys' readers keep connections to be served on. A read that finds no slot is answered 503
/// `busy` with `Retry-After` (docs/SERVER.md).
typealias HeldReads = KeyedSlots
