import Foundation
import PurchaseLedger
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The reads that cost more than a lookup (a feed reader behind what the hub keeps, which derives
/// the feed from storage; an account's timeline), bounded in number: at most `limit` at once,
/// each on the idle class's threads (`BackgroundExecutor`), so that whatever readers do, the
/// appends keep their threads. A reader that finds no slot free is answered 503 `busy` with
/// `Retry-After` (docs/SERVER.md); a stream waits for one. Each kind of read (`Kind`) takes at
/// most all slots but one when there are two or more, so that feed readers far behind, paging
/// as fast as they are answered, leave a timeline its slot, and timelines leave the feed one.
/// When the last one ends, the memory the reads took is given back to the system.
final class ExpensiveReads: Sendable {
    /// What a read is, for the share of the slots it may take.
    enum Kind: CaseIterable {
        /// A feed reader behind what its hub keeps (`ChangeFeedHub`).
        case feedCatchUp
        /// A read of one account's past or proof, or of the books.
        case accountOrBooks
    }

    let limit: Int
    /// The reads running, of each kind.
    private let running = Mutex([Kind: Int]())

    init(limit: Int) {
        self.limit = max(1, limit)
    }

    /// The most slots reads of one kind take at once.
    var limitPerKind: Int { limit > 1 ? limit - 1 : 1 }

    /// A slot, held until released (`release`, or when it goes).
    typealias Slot = CountedSlot

    /// A slot when one is free to `kind`; nil when `limit` reads run already, or
    /// `limitPerKind` of that kind.
    func tryAcquire(_ kind: Kind) -> Slot? {
        let taken = running.withLock { running in
            guard running.values.reduce(0, +) < limit, running[kind, default: 0] < limitPerKind else { return false }
            running[kind, default: 0] += 1
            return true
        }
        return taken ? Slot { self.release(kind) } : nil
    }

    /// How many run now (for tests and metrics).
    var count: Int { running.withLock { $0.values.reduce(0, +) } }

    private func release(_ kind: Kind) {
        let left = running.withLock { running in
            running[kind, default: 0] -= 1
            return running.values.reduce(0, +)
        }
        // A derivation's state is many small allocations, freed all at once at its end: glibc
        // keeps such memory in its arenas unless asked to hand it back.
        if left == 0 { trimMemory() }
    }

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
