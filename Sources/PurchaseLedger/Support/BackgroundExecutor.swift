import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Threads of their own in Linux's idle scheduling class, off the cooperative pool the
/// appenders resume on, for work that must never slow the appends: the ledger's own
/// (`Ledger.Configuration.backgroundExecutor`'s default: the proof tree's leaves) and the
/// server's change feed, webhook deliveries and expensive reads. On a machine with a core to
/// spare they run as fast as on any thread; on a saturated one they get what the appends
/// leave, and that work lags instead of the writer slowing. One a core, started at the first
/// job and kept as long as the process. Tasks run here under
/// `withTaskExecutorPreference(BackgroundExecutor.shared)`.
package final class BackgroundExecutor: TaskExecutor, @unchecked Sendable {
    package static let shared = BackgroundExecutor()

    // Guarded by `condition`.
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var first = 0
    private var started = false

    private init() {}

    /// Starts the threads; called under `condition`, at the first job.
    private func start() {
        started = true
        for index in 0..<max(1, ProcessInfo.processInfo.activeProcessorCount) {
            let thread = Thread { [unowned self] in
                lowerThisThreadsPriority()
                self.work()
            }
            thread.name = "ledger-background-\(index)"
            thread.start()
        }
    }

    package func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        if !started { start() }
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
package func lowerThisThreadsPriority() {
    #if os(Linux)
    var parameters = sched_param()
    parameters.sched_priority = 0
    if sched_setscheduler(0, linuxIdleSchedulingPolicy, &parameters) != 0 {
        _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 19)
    }
    #endif
}
