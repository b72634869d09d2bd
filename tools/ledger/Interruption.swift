import Dispatch

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Ctrl-C during long work: the person is told where the work stopped and what running it again
/// does, rather than a silent exit. The status stays 130, as a shell expects of SIGINT.
enum Interruption {
    /// Signal sources live as long as the process.
    private nonisolated(unsafe) static var sources: [any DispatchSourceSignal] = []

    /// From now on, SIGINT clears the terminal's line (whichever progress line is drawn), prints
    /// `ledger: interrupted: <message()>` and exits with status 130. `message` runs on a
    /// Dispatch thread: what it reads must be safe there.
    static func onInterrupt(_ message: @escaping @Sendable () -> String) {
        signal(SIGINT, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: SIGINT, queue: .global())
        source.setEventHandler {
            if Console.errorIsTerminal { Console.status("\r\u{1B}[K") }
            Console.error("ledger: interrupted: " + message())
            exit(130)
        }
        source.resume()
        sources.append(source)
    }
}
