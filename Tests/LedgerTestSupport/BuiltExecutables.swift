import Foundation

/// An executable of this package, next to the test bundle in the build folder.
public func builtExecutable(_ name: String) -> URL {
    var directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    while !FileManager.default.fileExists(atPath: directory.appendingPathComponent(name).path), directory.path != "/" {
        directory.deleteLastPathComponent()
    }
    return directory.appendingPathComponent(name)
}

/// What a command run to its end printed, and how it exited.
public struct CommandRun: Sendable {
    public var status: Int32
    public var output: Data
    public var error: String
    public var text: String { String(decoding: output, as: UTF8.self) }
}

/// Runs `executable` with `arguments` (and `input` on its standard input) to its end, as a
/// script would.
public func runCommand(_ executable: URL, _ arguments: [String], input: Data? = nil) throws -> CommandRun {
    let child = try ChildProcess(executable, arguments, input: .pipe, output: .pipe, error: .pipe)
    // Feed and drain on other threads, so that neither a large input nor a large output can
    // block the child.
    let errorData = DataBox()
    let streams = DispatchGroup()
    DispatchQueue.global().async(group: streams) {
        if let input { try? child.input?.write(contentsOf: input) }
        try? child.input?.close()
    }
    DispatchQueue.global().async(group: streams) { errorData.data = child.error?.readDataToEndOfFile() ?? Data() }
    let outputData = child.output?.readDataToEndOfFile() ?? Data()
    streams.wait()
    let termination = child.waitUntilExit()
    return CommandRun(status: termination.status, output: outputData, error: String(decoding: errorData.data, as: UTF8.self))
}

private final class DataBox: @unchecked Sendable {
    var data = Data()
}

/// `runCommand` for async tests: waits on a Dispatch thread, not on one of Swift concurrency's
/// few threads, which an in-process server the command talks to (a fake App Store) needs.
public func awaitCommand(_ executable: URL, _ arguments: [String], input: Data? = nil) async throws -> CommandRun {
    try await withCheckedThrowingContinuation { continuation in
        DispatchQueue.global().async {
            continuation.resume(with: Result { try runCommand(executable, arguments, input: input) })
        }
    }
}
