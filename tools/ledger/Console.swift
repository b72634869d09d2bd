#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Unbuffered writes to the standard streams, retried on short writes, without Foundation.
enum Console {
    static func output(_ text: String) {
        send(Array(text.utf8), to: STDOUT_FILENO)
    }

    static func output(bytes: [UInt8]) {
        send(bytes, to: STDOUT_FILENO)
    }

    static func error(_ line: String) {
        send(Array((line + "\n").utf8), to: STDERR_FILENO)
    }

    /// Writes to stderr without a newline (progress lines).
    static func status(_ text: String) {
        send(Array(text.utf8), to: STDERR_FILENO)
    }

    static var errorIsTerminal: Bool { isatty(STDERR_FILENO) == 1 }

    static func send(_ bytes: [UInt8], to fd: Int32) {
        bytes.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let written = write(fd, raw.baseAddress! + offset, raw.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    return
                }
                offset += written
            }
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
