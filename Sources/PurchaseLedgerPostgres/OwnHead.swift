import Synchronization

/// The last position this process's writer committed or is committing (`claim` before COMMIT,
/// `release` when it failed).
final class OwnHead: Sendable {
    private let head = Atomic<UInt64>(0)

    var position: UInt64 { head.load(ordering: .acquiring) }

    /// Returns the position claimed before, for `release`.
    func claim(through position: UInt64) -> UInt64 {
        head.exchange(position, ordering: .acquiringAndReleasing)
    }

    func release(back position: UInt64) {
        head.store(position, ordering: .releasing)
    }
}
