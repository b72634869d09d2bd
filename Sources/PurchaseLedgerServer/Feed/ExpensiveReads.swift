import Foundation
import PurchaseLedger
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The reads that cost more than a lookup (a feed reader behind what the hub keeps, which derives
/// the feed from storage; an account's timeline or proof; the books), bounded in number: at most
/// `limit` at once, and all but one of them for one API key (when `limit` is two or more), each on the idle
/// class's threads (`BackgroundExecutor`), so that whatever readers do, the appends keep their
/// threads, and a client paging from far behind as fast as it is answered leaves other clients
/// a slot. A reader that finds no slot free is answered 503 `busy` with `Retry-After`
/// (docs/SERVER.md); a stream waits for one. When the last one ends, the memory the reads took
/// is given back to the system.
final class ExpensiveReads: Sendable {
    private let slots: KeyedSlots

    init(limit: Int) {
        let limit = max(1, limit)
        // A glibc arena keeps what a derivation freed (many small allocations, freed at once at
        // its end) unless asked to hand it back.
        slots = KeyedSlots(limit: limit, limitPerKey: limit > 1 ? limit - 1 : 1, whenAllReleased: trimMemory)
    }

    /// A slot, held until released (`release`, or when it goes).
    typealias Slot = CountedSlot

    /// A slot for a read of the key named `key` when one is free; nil when `limit` reads run
    /// already, or all but one of them are that key's.
    func tryAcquire(key: String) -> Slot? {
        slots.tryAcquire(key: key)
    }

    /// How many run now, in all and of `key` (for tests and metrics).
    func count(of key: String? = nil) -> Int { slots.count(of: key) }

    /// Runs `body` on the idle class's threads, in a slot taken beforehand: cancelled (and
    /// `CancellationError` thrown) when `clientLeft` turns true, which is polled.
    static func run<R: Sendable>(
        in slot: Slot, until clientLeft: @escaping @Sendable () -> Bool, _ body: @escaping @Sendable () async throws -> R
    ) async throws -> R {
        defer { slot.release() }
        return try await withTaskExecutorPreference(BackgroundExecutor.shared) {
            try await withThrowingTaskGroup(of: R?.self) { group in
                group.addTask { try await body() }
                group.addTask {
                    while !clientLeft() { try await Task.sleep(for: .milliseconds(100)) }
                    throw CancellationError()
                }
                defer { group.cancelAll() }
                while let result = try await group.next() {
                    if let result { return result }
                }
                throw CancellationError()
            }
        }
    }
}

/// Hands memory glibc's allocator keeps free back to the system (`malloc_trim(0)`).
func trimMemory() {
    #if canImport(Glibc)
    _ = glibcMallocTrim(0)
    #endif
}

#if canImport(Glibc)
/// `malloc_trim` of <malloc.h>, which the Glibc module does not bring in.
@_silgen_name("malloc_trim")
private func glibcMallocTrim(_ pad: Int) -> Int32
#endif
