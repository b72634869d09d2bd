#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Unbuffered writes to the standard streams, retried on short writes, without Foundation.
enum Console {
    /// Writes to standard output; a failed write (a full disk, a closed pipe) is an error, so
    /// that a truncated export never ends with status 0.
    static func output(_ text: String) throws {
        try output(bytes: Array(text.utf8))
    }

    static func output(bytes: [UInt8]) throws {
        if let failure = send(bytes, to: STDOUT_FILENO) {
            throw CommandFailure(message: "cannot write to standard output: \(String(cString: strerror(failure)))")
        }
    }

    static func error(_ line: String) {
        send(Array((line + "\n").utf8), to: STDERR_FILENO)
    }

    /// Writes to stderr without a newline (progress lines).
    static func status(_ text: String) {
        send(Array(text.utf8), to: STDERR_FILENO)
    }

    static var errorIsTerminal: Bool { isatty(STDERR_FILENO) == 1 }
    static var outputIsTerminal: Bool { isatty(STDOUT_FILENO) == 1 }

    /// Writes all of `bytes`; returns the errno of a failed write, nil on success.
    @discardableResult
    static func send(_ bytes: [UInt8], to fd: Int32) -> Int32? {
        bytes.withUnsafeBytes { raw -> Int32? in
            var offset = 0
            while offset < raw.count {
                let written = write(fd, raw.baseAddress! + offset, raw.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    return errno
                }
                offset += written
            }
            return nil
        }
    }
}

/// Formats counts with thousands separators: 1,234,567.
func grouped(_ value: some BinaryInteger) -> String {
    let digits = Array(String(value).reversed())
    var out: [Character] = []
    for (index, digit) in digits.enumerated() {
        if index > 0 && index % 3 == 0 && digit != "-" { out.append(",") }
        out.append(digit)
    }
    return String(out.reversed())
}

/// Standard output gathered into large writes: a command that prints a line per change (a
/// million of them) pays one `write` a batch, not one a line. `flush` writes what is gathered;
/// a command flushes before it ends, and after each line it must show at once.
struct BatchedOutput {
    private var bytes: [UInt8] = []
    /// The size at which `append` writes what it gathered.
    static let batchBytes = 1 << 16

    mutating func append(_ text: String) throws {
        bytes.append(contentsOf: text.utf8)
        if bytes.count >= Self.batchBytes { try flush() }
    }

    /// Appends what `write` appends to the bytes gathered.
    mutating func append(_ write: (inout [UInt8]) -> Void) throws {
        write(&bytes)
        if bytes.count >= Self.batchBytes { try flush() }
    }

    mutating func flush() throws {
        guard !bytes.isEmpty else { return }
        try Console.output(bytes: bytes)
        bytes.removeAll(keepingCapacity: true)
    }
}
