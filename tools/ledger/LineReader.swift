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
    /// Bytes read from the input so far.
    private var bytesRead: UInt64 = 0
    /// The input's size when it is a regular file (a path, or standard input redirected from
    /// one), for a percentage; nil for a pipe or a terminal.
    let size: UInt64?

    /// The fraction of the input consumed, when its size is known.
    var fractionRead: Double? {
        guard let size, size > 0 else { return nil }
        return Double(bytesRead - UInt64(end - start)) / Double(size)
    }

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
        var info = stat()
        size = fstat(fd, &info) == 0 && info.st_mode & S_IFMT == S_IFREG ? UInt64(clamping: info.st_size) : nil
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

    /// True when no byte is buffered and the input has none ready now (a pipe whose writer is
    /// slow): the next `next()` would wait. A regular file never would.
    func wouldBlock() -> Bool {
        guard start == end, !atEOF else { return false }
        var ready = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&ready, 1, 0) == 0
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
            bytesRead += UInt64(count)
            return
        }
    }
}
