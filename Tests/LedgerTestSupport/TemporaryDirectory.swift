#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A new directory under the system temporary directory, removed with everything in it when
/// `body` returns. Every test that touches disk gets its own.
public func withTemporaryDirectory<R>(_ body: (String) async throws -> R) async throws -> R {
    let path = try makeTemporaryDirectory()
    defer { removeTree(path) }
    return try await body(path)
}

public func makeTemporaryDirectory() throws -> String {
    let base = String(cString: getenv("TMPDIR") ?? strdup("/tmp"))
    var template = Array("\(base)/purchase-ledger-test-XXXXXX".utf8CString)
    guard let made = mkdtemp(&template) else {
        throw TestFailure("mkdtemp failed: \(errno)")
    }
    return String(cString: made)
}

/// Removes `path` and, for a directory, everything in it (without following links).
public func removeTree(_ path: String) {
    var info = stat()
    guard lstat(path, &info) == 0 else { return }
    if info.st_mode & S_IFMT == S_IFDIR, let dir = opendir(path) {
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
            if name != "." && name != ".." { removeTree(path + "/" + name) }
        }
        closedir(dir)
        rmdir(path)
    } else {
        unlink(path)
    }
}

/// A test's own failure, with what went wrong.
public struct TestFailure: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
