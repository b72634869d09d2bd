import Foundation

/// Runs of values made in order on a thread of its own, a few runs ahead of the caller that
/// takes them: for a long read whose decoding runs on another core while the caller applies
/// what was decoded before it (a replay from the log's start).
///
/// - The thread runs in the caller's scheduling class: Linux gives a new thread its creator's
///   policy and nice value, so a caller in the idle class (the server's expensive reads) gets a
///   thread in it too, and the read stays below the appends.
/// - It never outlives `forEach`: when the caller stops taking runs, returning or throwing, the
///   thread is told to stop and joined, so that nothing it held (a storage) is let go after.
/// - A run that failed to be made is handed over as far as it was made, then its failure is
///   thrown, and nothing after it is made: the caller meets what comes before a failure first,
///   as it would without the thread.
/// - The runs' arrays go back and forth between the two threads, kept and emptied: a new array
///   of a chunk's records each time (a megabyte or more) left holes in the heap that the
///   state's small values filled, and a replay's resident memory doubled.
/// - Where no thread can be made (the process at its limit of threads, or a system without
///   POSIX threads' Linux shape), the caller makes each run itself before it takes it: the
///   same runs, no faster.
enum ReadAhead {
    /// Starts `work` on a new thread and answers how to wait for its end; nil when no thread
    /// could be made.
    typealias ThreadStart = (_ work: @escaping @Sendable () -> Void) -> (() -> Void)?

    /// Calls `body` with the runs `fill` makes for `0`, `1`, … `count - 1`, in order, each
    /// filled on the thread (into an empty array) at most `depth` runs ahead of the one `body`
    /// has.
    static func forEach<Element: Sendable>(
        _ count: Int, depth: Int = 2, startingThread start: ThreadStart = startThread,
        fill: @escaping @Sendable (Int, inout [Element]) throws -> Void, _ body: ([Element]) throws -> Void
    ) throws {
        guard count > 0 else { return }
        let handoff = Handoff<Element>(depth: max(1, depth))
        guard let join = start({ handoff.produce(count, fill) }) else {
            var run: [Element] = []
            for index in 0..<count {
                run.removeAll(keepingCapacity: true)
                do {
                    try fill(index, &run)
                } catch {
                    try body(run)
                    throw error
                }
                try body(run)
            }
            return
        }
        defer {
            handoff.stop()
            join()
        }
        for _ in 0..<count {
            let (run, failure) = handoff.next()
            try body(run)
            if let failure { throw failure }
            // Handed over, not copied: the thread empties it in place only while it is the
            // array's one owner (else emptying it allocates a new one).
            handoff.giveBack(consume run)
        }
    }

    /// A joinable POSIX thread; nil when `pthread_create` refuses (Foundation's `Thread`
    /// reports nothing, and the caller would wait forever for runs never made).
    static func startThread(_ work: @escaping @Sendable () -> Void) -> (() -> Void)? {
        #if os(Linux)
        final class Work {
            let run: @Sendable () -> Void
            init(_ run: @escaping @Sendable () -> Void) { self.run = run }
        }
        let context = Unmanaged.passRetained(Work(work)).toOpaque()
        var thread = pthread_t()
        let created = pthread_create(&thread, nil, { context in
            guard let context else { return nil }
            Unmanaged<Work>.fromOpaque(context).takeRetainedValue().run()
            return nil
        }, context)
        guard created == 0 else {
            Unmanaged<Work>.fromOpaque(context).release()
            return nil
        }
        return { _ = pthread_join(thread, nil) }
        #else
        return nil
        #endif
    }
}

/// The runs between the thread that makes them and the caller that takes them.
private final class Handoff<Element: Sendable>: @unchecked Sendable {
    // Guarded by `condition`.
    private let condition = NSCondition()
    /// Runs made and not taken yet; one with a failure is the last.
    private var ready: [(run: [Element], failure: (any Error)?)] = []
    private var first = 0
    /// Arrays the caller is done with, for the next runs.
    private var spare: [[Element]] = []
    /// The caller took its last run (or stopped taking them).
    private var stopped = false
    private let depth: Int

    init(depth: Int) {
        self.depth = depth
    }

    /// On the thread: makes the runs in order, waiting while `depth` of them wait to be taken.
    func produce(_ count: Int, _ fill: (Int, inout [Element]) throws -> Void) {
        for index in 0..<count {
            condition.lock()
            while ready.count - first >= depth, !stopped { condition.wait() }
            let stop = stopped
            var run = spare.popLast() ?? []
            condition.unlock()
            if stop { return }
            // Emptied here, not by the caller: the values' releases are this thread's work.
            run.removeAll(keepingCapacity: true)
            var failure: (any Error)?
            do {
                try fill(index, &run)
            } catch {
                failure = error
            }
            condition.lock()
            ready.append((run, failure))
            condition.broadcast()
            condition.unlock()
            if failure != nil { return }
        }
    }

    /// The next run, once made, and the failure that ended it if it is the last.
    func next() -> (run: [Element], failure: (any Error)?) {
        condition.lock()
        defer { condition.unlock() }
        // The thread stops early only after a failure, which the caller takes and throws; it
        // makes every run the caller asks for otherwise.
        while first == ready.count { condition.wait() }
        let next = ready[first]
        ready[first] = ([], nil)
        first += 1
        if first == ready.count {
            ready.removeAll(keepingCapacity: true)
            first = 0
        }
        condition.broadcast()
        return next
    }

    /// An array the caller is done with.
    func giveBack(_ run: consuming [Element]) {
        condition.lock()
        spare.append(run)
        condition.unlock()
    }

    /// Tells the thread to stop (it ends at once if it waits, else once its run is made), and
    /// lets go of the runs it holds.
    func stop() {
        condition.lock()
        stopped = true
        ready.removeAll()
        first = 0
        spare.removeAll()
        condition.broadcast()
        condition.unlock()
    }
}
