#if canImport(Glibc)
import Glibc
#endif

/// A child process started with `posix_spawn`, not Foundation's `Process`: its `run()` can crash
/// reading `/proc/self/fd` (swift-corelibs-foundation #5472, in this toolchain), and the torture
/// starts hundreds of children. The child keeps the parent's standard streams.
struct SpawnedChild {
    let pid: pid_t
    /// The wait status once `exitStatus()` or `isRunning` saw the child end.
    private var ended: Int32?

    init(_ path: String, _ arguments: [String]) throws {
        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
        defer { for argument in argv { free(argument) } }
        var pid: pid_t = 0
        let status = posix_spawn(&pid, path, nil, nil, argv, environ)
        guard status == 0 else { throw TortureFailure("cannot start \(path): \(String(cString: strerror(status)))") }
        self.pid = pid
    }

    /// Still running (it has not ended, or has ended and not been reaped).
    var isRunning: Bool {
        mutating get {
            guard ended == nil else { return false }
            var status: Int32 = 0
            guard waitpid(pid, &status, WNOHANG) == pid else { return true }
            ended = status
            return false
        }
    }

    func kill() {
        _ = Glibc.kill(pid, SIGKILL)
    }

    /// Waits for the child to end; its wait status (`waitpid`'s).
    mutating func exitStatus() -> Int32 {
        if let ended { return ended }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        ended = status
        return status
    }
}
