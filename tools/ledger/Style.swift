#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Colour and weight for people: only when the stream is a terminal, and never when `NO_COLOR`
/// is set to anything (no-color.org) or the terminal is `dumb`. Scripts reading a pipe always
/// get plain text.
struct Style: Sendable {
    let isEnabled: Bool

    /// For standard output.
    static let output = Style(stream: STDOUT_FILENO)
    /// For standard error (summaries, rejections).
    static let error = Style(stream: STDERR_FILENO)

    init(stream: Int32) {
        isEnabled = isatty(stream) == 1 && Self.environmentAllowsColour
    }

    init(enabled: Bool) {
        isEnabled = enabled
    }

    static var environmentAllowsColour: Bool {
        if let noColour = getenv("NO_COLOR"), noColour.pointee != 0 { return false }
        if let term = getenv("TERM"), String(cString: term) == "dumb" { return false }
        return true
    }

    func bold(_ text: String) -> String { wrap(text, "1") }
    func dim(_ text: String) -> String { wrap(text, "2") }
    func red(_ text: String) -> String { wrap(text, "31") }
    func green(_ text: String) -> String { wrap(text, "32") }
    func yellow(_ text: String) -> String { wrap(text, "33") }
    func cyan(_ text: String) -> String { wrap(text, "36") }

    private func wrap(_ text: String, _ code: String) -> String {
        isEnabled && !text.isEmpty ? "\u{1B}[\(code)m\(text)\u{1B}[0m" : text
    }
}
