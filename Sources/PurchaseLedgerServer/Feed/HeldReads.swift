import Synchronization

/// The reads that hold their connection while they wait for changes (a stream of the feed, a
/// long poll), bounded in number: at most `limit` at once, and at most `limitPerKey` for one API
/// key. Each holds one of the server's `maxConnections`, and `limit` stays below it, so that
/// however many streams clients open and never read, appends, Apple's notifications and other
/// keys' readers keep connections to be served on. A read that finds no slot is answered 503
/// `busy` with `Retry-After` (docs/SERVER.md).
final class HeldReads: Sendable {
    let limit: Int
    let limitPerKey: Int
    private let held = Mutex<(total: Int, byKey: [String: Int])>((0, [:]))

    init(limit: Int, limitPerKey: Int) {
        self.limit = max(1, limit)
        self.limitPerKey = max(1, limitPerKey)
    }

    /// A slot, held until released (`release`, or when it goes).
    typealias Slot = CountedSlot

    /// A slot for a read of the key named `key`; nil when `limit` reads are held, or
    /// `limitPerKey` of that key's.
    func tryAcquire(key: String) -> Slot? {
        let taken = held.withLock { held in
            let ofKey = held.byKey[key, default: 0]
            guard held.total < limit, ofKey < limitPerKey else { return false }
            held.total += 1
            held.byKey[key] = ofKey + 1
            return true
        }
        return taken ? Slot { self.release(key) } : nil
    }

    /// How many are held now, in all and of `key` (for tests and metrics).
    func count(of key: String? = nil) -> Int {
        held.withLock { held in key.map { held.byKey[$0, default: 0] } ?? held.total }
    }

    private func release(_ key: String) {
        held.withLock { held in
            held.total -= 1
            let left = held.byKey[key, default: 1] - 1
            held.byKey[key] = left > 0 ? left : nil
        }
    }
}
