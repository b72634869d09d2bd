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
    let process = Process()
    process.executableURL = executable
    process.arguments = arguments
    let output = Pipe()
    let error = Pipe()
    process.standardOutput = output
    process.standardError = error
    let stdin = Pipe()
    process.standardInput = stdin
    try process.run()
    if let input { stdin.fileHandleForWriting.write(input) }
    try stdin.fileHandleForWriting.close()
    // Drain both pipes before waiting, so that a large output cannot block the child.
    let errorData = DataBox()
    let reading = DispatchGroup()
    DispatchQueue.global().async(group: reading) { errorData.data = error.fileHandleForReading.readDataToEndOfFile() }
    let outputData = output.fileHandleForReading.readDataToEndOfFile()
    reading.wait()
    process.waitUntilExit()
    return CommandRun(status: process.terminationStatus, output: outputData, error: String(decoding: errorData.data, as: UTF8.self))
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
