import NIOCore
import NIOPosix
import PurchaseLedger

extension BackgroundExecutor {
    /// One event loop, its thread as low as the executor's, for the webhook client. Its
    /// thread lives as long as the process, like the executor's.
    static let eventLoopGroup: MultiThreadedEventLoopGroup = {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        for loop in group.makeIterator() { loop.execute { lowerThisThreadsPriority() } }
        return group
    }()
}
