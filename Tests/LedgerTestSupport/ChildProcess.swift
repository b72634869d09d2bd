import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A process a test starts: the package's tools, a Python helper, `psql`.
///
/// Every test spawns through this type, never through Foundation's `Process`, for three reasons
/// seen in CI runs:
/// - `Process.run()` in the toolchain this package is tested with reads past a buffer while it
///   lists `/proc/self/fd` (swift-corelibs-foundation #5472) and crashed the test process now
///   and then, when other tests held many descriptors open;
/// - a child that inherited the runner's standard output kept it open after the test process
///   died, and the run waited on it until CI's limit;
/// - a child spawned from a thread that blocks SIGTERM started with SIGTERM blocked.
///
/// So a child gets `/dev/null`, a pipe of its own or a file for each standard stream (never
/// the runner's), none of this process's other descriptors, an empty signal mask and default
/// dispositions for the signals tests send.
public final class ChildProcess: @unchecked Sendable {
    /// Where one of the child's standard streams goes.
    public enum Stream: Sendable {
        /// `/dev/null`.
        case discard
        /// A pipe whose other end this object holds (`input`, `output` or `error`).
        case pipe
        /// A file, created or truncated (output streams only).
        case file(String)
    }

    /// How a child ended.
    public enum Termination: Equatable, Sendable, CustomStringConvertible {
        case exited(Int32)
        case signalled(Int32)

        /// The exit status, or the signal's number (as Foundation's `terminationStatus`).
        public var status: Int32 {
            switch self {
            case .exited(let status), .signalled(let status): status
            }
        }

        public var description: String {
            switch self {
            case .exited(let status): "exited \(status)"
            case .signalled(let signal): "killed by signal \(signal)"
            }
        }
    }

    public let pid: pid_t
    /// The write end of the child's standard input, when it is `.pipe`.
    public let input: FileHandle?
    /// The read end of the child's standard output, when it is `.pipe`.
    public let output: FileHandle?
    /// The read end of the child's standard error, when it is `.pipe`.
    public let error: FileHandle?
    private let termination = Mutex<Termination?>(nil)

    /// Starts `executable` (a path; `/usr/bin/env` finds a program on `PATH`) with `arguments`.
    public init(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil,
        input: Stream = .discard, output: Stream = .discard, error: Stream = .discard
    ) throws {
        _ = Self.writesToAClosedPipeFail
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        var parentEnds: [Int32: Int32] = [:]
        var childEnds: [Int32] = []
        defer { for descriptor in childEnds { close(descriptor) } }
        do {
            for (target, stream) in [(STDIN_FILENO, input), (STDOUT_FILENO, output), (STDERR_FILENO, error)] {
                let reads = target == STDIN_FILENO
                switch stream {
                case .discard:
                    posix_spawn_file_actions_addopen(&actions, target, "/dev/null", reads ? O_RDONLY : O_WRONLY, 0)
                case .file(let path):
                    guard !reads else { throw TestFailure("a child's standard input cannot be a file here") }
                    posix_spawn_file_actions_addopen(&actions, target, path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
                case .pipe:
                    var ends: [Int32] = [-1, -1]
                    guard pipe(&ends) == 0 else { throw TestFailure("pipe: errno \(errno)") }
                    // Close-on-exec too (every child closes what is not its own anyway), so
                    // that no other child holds this pipe open.
                    for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
                    let (childEnd, parentEnd) = reads ? (ends[0], ends[1]) : (ends[1], ends[0])
                    childEnds.append(childEnd)
                    parentEnds[target] = parentEnd
                    posix_spawn_file_actions_adddup2(&actions, childEnd, target)
                }
            }
            try Self.closeEverythingElse(&actions)

            var attributes = posix_spawnattr_t()
            posix_spawnattr_init(&attributes)
            defer { posix_spawnattr_destroy(&attributes) }
            var noSignals = sigset_t()
            sigemptyset(&noSignals)
            posix_spawnattr_setsigmask(&attributes, &noSignals)
            var defaults = sigset_t()
            sigemptyset(&defaults)
            for signal in [SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGPIPE, SIGCHLD, SIGUSR1, SIGUSR2] { sigaddset(&defaults, signal) }
            posix_spawnattr_setsigdefault(&attributes, &defaults)
            posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

            let argv = ([executable] + arguments).map { strdup($0) } + [nil]
            defer { for argument in argv { free(argument) } }
            let variables = environment.map { $0.map { strdup("\($0.key)=\($0.value)") } + [nil] }
            defer { for variable in variables ?? [] { free(variable) } }
            var pid: pid_t = 0
            let status = variables.map { posix_spawn(&pid, executable, &actions, &attributes, argv, $0) }
                ?? posix_spawn(&pid, executable, &actions, &attributes, argv, environ)
            guard status == 0 else { throw TestFailure("posix_spawn \(executable): \(String(cString: strerror(status)))") }
            self.pid = pid
        } catch {
            for descriptor in parentEnds.values { close(descriptor) }
            throw error
        }
        self.input = parentEnds[STDIN_FILENO].map { FileHandle(fileDescriptor: $0, closeOnDealloc: true) }
        self.output = parentEnds[STDOUT_FILENO].map { FileHandle(fileDescriptor: $0, closeOnDealloc: true) }
        self.error = parentEnds[STDERR_FILENO].map { FileHandle(fileDescriptor: $0, closeOnDealloc: true) }
    }

    /// Convenience for a built executable or any other file URL.
    public convenience init(
        _ executable: URL, _ arguments: [String], environment: [String: String]? = nil,
        input: Stream = .discard, output: Stream = .discard, error: Stream = .discard
    ) throws {
        try self.init(executable.path, arguments, environment: environment, input: input, output: output, error: error)
    }

    /// A write to a child that exited fails with EPIPE instead of killing the test process.
    private static let writesToAClosedPipeFail: Void = { _ = signal(SIGPIPE, SIG_IGN) }()

    /// glibc's `posix_spawn_file_actions_addclosefrom_np`, which Swift's Glibc module does not
    /// declare (it is a GNU extension).
    private typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    private static let closeFrom: CloseFrom? = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np")
        .map { unsafeBitCast($0, to: CloseFrom.self) }

    private static func closeEverythingElse(_ actions: inout posix_spawn_file_actions_t) throws {
        guard let closeFrom else { throw TestFailure("this C library has no posix_spawn_file_actions_addclosefrom_np") }
        guard closeFrom(&actions, 3) == 0 else { throw TestFailure("posix_spawn_file_actions_addclosefrom_np failed") }
    }

    /// Sends `signal`, unless the child was already reaped.
    public func send(_ signal: Int32) {
        termination.withLock { ended in
            if ended == nil { _ = Glibc.kill(pid, signal) }
        }
    }

    /// Whether the child has not ended yet (reaping it when it has).
    public var isRunning: Bool { reap(blocking: false) == nil }

    /// Waits for the child to end, blocking the calling thread.
    @discardableResult
    public func waitUntilExit() -> Termination {
        if let ended = termination.withLock({ $0 }) { return ended }
        // Wait without reaping, then reap under the lock: `isRunning` may be asked meanwhile.
        var info = siginfo_t()
        while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) != 0, errno == EINTR {}
        // Nil only when something else reaped it (ECHILD): no status then, and never a success.
        return reap(blocking: true) ?? .signalled(-1)
    }

    /// Waits for the child to end on a Dispatch thread, never on one of Swift concurrency's.
    @discardableResult
    public func exit() async -> Termination {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: self.waitUntilExit()) }
        }
    }

    /// SIGKILL (a child never ignores it), then waits for the end.
    @discardableResult
    public func kill() -> Termination {
        send(SIGKILL)
        return waitUntilExit()
    }

    /// SIGTERM, and SIGKILL if the child is still running `seconds` later; waits for the end.
    @discardableResult
    public func stop(within seconds: Double = 10) -> Termination {
        send(SIGTERM)
        let deadline = Date().addingTimeInterval(seconds)
        while isRunning, Date() < deadline { usleep(10_000) }
        return kill()
    }

    private func reap(blocking: Bool) -> Termination? {
        termination.withLock { ended in
            if let ended { return ended }
            var status: Int32 = 0
            var reaped: pid_t
            repeat { reaped = waitpid(pid, &status, blocking ? 0 : WNOHANG) } while reaped < 0 && errno == EINTR
            guard reaped == pid else { return nil }
            let signal = status & 0x7f
            ended = signal == 0 ? .exited((status >> 8) & 0xff) : .signalled(signal)
            return ended
        }
    }

    deinit {
        // A child nobody waits for any more is not left behind.
        if reap(blocking: false) == nil {
            _ = Glibc.kill(pid, SIGKILL)
            _ = reap(blocking: true)
        }
    }
}
