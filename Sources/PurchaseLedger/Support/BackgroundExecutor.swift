import Foundation
import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#endif

/// Threads of their own in Linux's idle scheduling class, for the server's work that must never
/// slow its appends: deriving the change feed and delivering webhooks. On a machine with a core
/// to spare they run as fast as on any thread; on a saturated one they get what the appends
/// leave, and the feed lags (its metrics say by how much) instead of the writer slowing. Tasks
/// run here under `withTaskExecutorPreference(BackgroundExecutor.shared)`, and the webhook
/// client's connections on `eventLoopGroup`.
final class BackgroundExecutor: TaskExecutor, @unchecked Sendable {
    static let shared = BackgroundExecutor(threads: max(1, ProcessInfo.processInfo.activeProcessorCount))

    /// One event loop, its thread as low as the executor's, for the webhook client. Its
    /// threads live as long as the process, like the executor's.
    static let eventLoopGroup: MultiThreadedEventLoopGroup = {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        for loop in group.makeIterator() { loop.execute { lowerThisThreadsPriority() } }
        return group
    }()

    // Guarded by `condition`.
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var first = 0

    private init(threads: Int) {
        for index in 0..<threads {
            let thread = Thread { [unowned self] in
                lowerThisThreadsPriority()
                self.work()
            }
            thread.name = "ledger-background-\(index)"
            thread.start()
        }
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    private func work() {
        while true {
            condition.lock()
            while first == jobs.count { condition.wait() }
            let job = jobs[first]
            first += 1
            if first == jobs.count {
                jobs.removeAll(keepingCapacity: true)
                first = 0
            } else if first >= 1024, first * 2 >= jobs.count {
                // Dropped from the front in runs, so that taking a job costs O(1) on average.
                jobs.removeFirst(first)
                first = 0
            }
            condition.unlock()
            job.runSynchronously(on: asUnownedTaskExecutor())
        }
    }
}

/// `SCHED_IDLE` of <bits/sched.h>, which Glibc's module leaves out (it is behind `__USE_GNU`);
/// part of Linux's ABI since 2.6.23.
let linuxIdleSchedulingPolicy: Int32 = 5

/// The calling thread to Linux's idle scheduling class (`SCHED_IDLE`): any other thread that
/// wakes takes its core at once. Where that is refused, nice 19 (a thread's own on Linux).
func lowerThisThreadsPriority() {
    #if os(Linux)
    var parameters = sched_param()
    parameters.sched_priority = 0
    if sched_setscheduler(0, linuxIdleSchedulingPolicy, &parameters) != 0 {
        _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 19)
    }
    #endif
}
