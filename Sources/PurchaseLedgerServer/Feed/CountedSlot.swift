import Synchronization

/// One of a bounded number of slots (`ExpensiveReads`, `HeldReads`), given back once: by
/// `release`, or when it goes.
final class CountedSlot: Sendable {
    private let giveBack: @Sendable () -> Void
    private let released = Atomic<Bool>(false)

    init(givingBack giveBack: @escaping @Sendable () -> Void) {
        self.giveBack = giveBack
    }

    func release() {
        guard !released.exchange(true, ordering: .acquiringAndReleasing) else { return }
        giveBack()
    }

    deinit {
        release()
    }
}
