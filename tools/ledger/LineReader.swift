#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import PurchaseLedgerLocation

/// Reads a file (or stdin) line by line: lines end at `\n`; a final `\n` does not start an
/// empty line; `\r` stays in the line (JSON treats it as whitespace). A line longer than
/// `maximumLength` is not kept whole: its first bytes are returned and `isTruncated` is set, so
/// a hostile 10 MB line costs no more memory than a normal one.
struct LineReader {
    struct Line {
        var bytes: [UInt8]
        var isTruncated: Bool
    }

    struct ReadError: Error, CustomStringConvertible {
        var path: String
        var errno: Int32
        var description: String { "cannot read \(path): \(String(cString: strerror(errno)))" }
    }

    private let fd: Int32
    private let path: String
    private let ownsDescriptor: Bool
    private let maximumLength: Int
    private var buffer = [UInt8](repeating: 0, count: 1 << 20)
    private var start = 0
    private var end = 0
    private var atEOF = false

    /// Opens `path`, or stdin for `-`.
    init(path: String, maximumLength: Int) throws {
        self.path = path == "-" ? "standard input" : path
        self.maximumLength = maximumLength
        if path == "-" {
            fd = STDIN_FILENO
            ownsDescriptor = false
        } else {
            fd = open(path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { throw ReadError(path: path, errno: errno) }
            var info = stat()
            if fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFDIR {
                close(fd)
                throw ReadError(path: path, errno: EISDIR)
            }
            ownsDescriptor = true
        }
    }

    /// True when `path` names the file being read (same device and inode).
    func isSameFile(as path: String) -> Bool {
        var input = stat()
        var other = stat()
        guard fstat(fd, &input) == 0, stat(path, &other) == 0 else { return false }
        return input.st_dev == other.st_dev && input.st_ino == other.st_ino
    }

    func closeInput() {
        if ownsDescriptor { close(fd) }
    }

    /// The next line, or nil at the end of the input.
    mutating func next() throws -> Line? {
        var line: [UInt8] = []
        var truncated = false
        var sawAnything = false
        while true {
            if start == end {
                if atEOF { return sawAnything ? Line(bytes: line, isTruncated: truncated) : nil }
                try fill()
                continue
            }
            sawAnything = true
            let newline = buffer[start..<end].firstIndex(of: 0x0A)
            let stop = newline ?? end
            let room = maximumLength + 1 - line.count
            if room > 0 {
                line.append(contentsOf: buffer[start..<min(stop, start + room)])
            }
            if stop - start > max(room, 0) { truncated = true }
            if line.count > maximumLength { truncated = true }
            if let newline {
                start = newline + 1
                return Line(bytes: line, isTruncated: truncated)
            }
            start = end
        }
    }

    private mutating func fill() throws {
        start = 0
        end = 0
        while true {
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw ReadError(path: path, errno: errno)
            }
            if count == 0 { atEOF = true }
            end = count
            return
        }
    }
}
