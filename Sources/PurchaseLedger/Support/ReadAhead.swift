import Foundation

/// Runs of values made in order on a thread of its own, a few runs ahead of the caller that
/// takes them: for a long read whose decoding runs on another core while the caller applies
/// what was decoded before it (a replay from the log's start).
///
/// - The thread runs in the caller's scheduling class: Linux gives a new thread its creator's
///   policy and nice value, so a caller in the idle class (the server's expensive reads) gets a
///   thread in it too, and the read stays below the appends.
/// - It never outlives `forEach`: when the caller stops taking runs, returning or throwing, the
///   thread is told to stop and waited for.
/// - A run that failed to be made is thrown in its turn, after every run before it was taken,
///   and nothing after it is made.
/// - The runs' arrays go back and forth between the two threads, kept and emptied: a new array
///   of a chunk's records each time (a megabyte or more) left holes in the heap that the
///   state's small values filled, and a replay's resident memory doubled.
enum ReadAhead {
    /// Starts `work` on a new thread; false when no thread could be made.
    typealias ThreadStart = (_ work: @escaping @Sendable () -> Void) -> Bool

    /// Calls `body` with the runs `fill` makes for `0`, `1`, … `count - 1`, in order, each
    /// filled on the thread (into an empty array) at most `depth` runs ahead of the one `body`
    /// has. Where no thread can be made (the process is at its limit of threads), the runs are
    /// made on the calling thread, each before it is taken: the same runs, no faster.
    static func forEach<Element: Sendable>(
        _ count: Int, depth: Int = 2, startingThread start: ThreadStart = startThread,
        fill: @escaping @Sendable (Int, inout [Element]) throws -> Void, _ body: ([Element]) throws -> Void
    ) throws {
        guard count > 0 else { return }
        let handoff = Handoff<Element>(depth: max(1, depth))
        guard start({ handoff.produce(count, fill) }) else {
            var run: [Element] = []
            for index in 0..<count {
                run.removeAll(keepingCapacity: true)
                try fill(index, &run)
                try body(run)
            }
            return
        }
        defer { handoff.stopAndWait() }
        for _ in 0..<count {
            let run = try handoff.next().get()
            try body(run)
            // Handed over, not copied: the thread empties it in place only while it is the
            // array's one owner (else emptying it allocates a new one).
            handoff.giveBack(consume run)
        }
    }

    /// A detached POSIX thread; false when `pthread_create` refuses (Foundation's `Thread`
    /// reports nothing, and the caller would wait forever for runs never made).
    static func startThread(_ work: @escaping @Sendable () -> Void) -> Bool {
        final class Work {
            let run: @Sendable () -> Void
            init(_ run: @escaping @Sendable () -> Void) { self.run = run }
        }
        let context = Unmanaged.passRetained(Work(work)).toOpaque()
        var thread = pthread_t()
        let created = pthread_create(&thread, nil, { context in
            guard let context else { return nil }
            let work = Unmanaged<Work>.fromOpaque(context).takeRetainedValue()
            work.run()
            return nil
        }, context)
        guard created == 0 else {
            Unmanaged<Work>.fromOpaque(context).release()
            return false
        }
        pthread_detach(thread)
        return true
    }
}

/// The runs between the thread that makes them and the caller that takes them.
private final class Handoff<Element: Sendable>: @unchecked Sendable {
    // Guarded by `condition`.
    private let condition = NSCondition()
    private var ready: [Result<[Element], any Error>] = []
    private var first = 0
    /// Arrays the caller is done with, for the next runs.
    private var spare: [[Element]] = []
    /// The caller took its last run (or stopped taking them).
    private var stopped = false
    /// The thread made its last run, or stopped.
    private var finished = false
    private let depth: Int

    init(depth: Int) {
        self.depth = depth
    }

    /// On the thread: makes the runs in order, waiting while `depth` of them wait to be taken.
    func produce(_ count: Int, _ fill: (Int, inout [Element]) throws -> Void) {
        defer {
            condition.lock()
            finished = true
            condition.broadcast()
            condition.unlock()
        }
        for index in 0..<count {
            condition.lock()
            while ready.count - first >= depth, !stopped { condition.wait() }
            let stop = stopped
            var run = spare.popLast() ?? []
            condition.unlock()
            if stop { return }
            // Emptied here, not by the caller: the values' releases are this thread's work.
            run.removeAll(keepingCapacity: true)
            let made = Result { () throws -> [Element] in
                try fill(index, &run)
                return run
            }
            condition.lock()
            ready.append(made)
            condition.broadcast()
            condition.unlock()
            if case .failure = made { return }
        }
    }

    /// The next run, once made.
    func next() -> Result<[Element], any Error> {
        condition.lock()
        defer { condition.unlock() }
        while first == ready.count, !finished { condition.wait() }
        // The thread stops early only after a failure, which the caller takes and throws.
        guard first < ready.count else { preconditionFailure("the read-ahead thread stopped before its last run") }
        let run = ready[first]
        ready[first] = .success([])
        first += 1
        if first == ready.count {
            ready.removeAll(keepingCapacity: true)
            first = 0
        }
        condition.broadcast()
        return run
    }

    /// An array the caller is done with.
    func giveBack(_ run: consuming [Element]) {
        condition.lock()
        spare.append(run)
        condition.unlock()
    }

    /// Tells the thread to stop, and waits until it has.
    func stopAndWait() {
        condition.lock()
        stopped = true
        ready.removeAll()
        spare.removeAll()
        first = 0
        condition.broadcast()
        while !finished { condition.wait() }
        condition.unlock()
    }
}
