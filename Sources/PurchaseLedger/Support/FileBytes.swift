#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A file-system call failed: the call, the path and `strerror` of errno.
public struct FileSystemError: Error, Sendable, Hashable, CustomStringConvertible {
    public var path: String
    public var operation: String
    public var errno: Int32

    package init(path: String, operation: String, errno: Int32) {
        self.path = path
        self.operation = operation
        self.errno = errno
    }

    public var description: String {
        "\(operation) \(path): \(String(cString: strerror(errno)))"
    }
}

/// Reads whole files without Foundation.
enum FileBytes {
    static func contents(of path: String) throws(FileSystemError) -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw FileSystemError(path: path, operation: "open", errno: errno) }
        defer { close(fd) }
        var result: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw FileSystemError(path: path, operation: "read", errno: errno)
            }
            if count == 0 { return result }
            result.append(contentsOf: chunk[0..<count])
        }
    }
}
