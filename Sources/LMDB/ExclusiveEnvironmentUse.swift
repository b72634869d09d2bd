/// Keeps every other process out of the environment in a directory while held, by LMDB's own
/// test of being alone: an exclusive record lock on the first byte of `lock.mdb`, which each
/// process with the environment open holds shared. A process opening it meanwhile waits.
///
/// Record locks belong to the process, not the descriptor: an environment this process opens
/// while holding it shares the lock, and closing that environment lets it go. So, while held,
/// open environments of that directory only `withoutLockFile`, or last, to initialize the lock
/// file (LMDB, alone, initializes it from the data file).
public final class ExclusiveEnvironmentUse {
    private var descriptor: Int32?

    /// Nil when another process has the environment open.
    public init?(directory: String) throws(LMDBError) {
        guard let descriptor = try LMDBCall.lockEnvironmentExclusively(directory: directory) else { return nil }
        self.descriptor = descriptor
    }

    deinit {
        release()
    }

    public func release() {
        if let descriptor { LMDBCall.unlockEnvironment(descriptor) }
        descriptor = nil
    }
}
