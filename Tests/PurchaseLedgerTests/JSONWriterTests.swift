import Testing
@testable import PurchaseLedger

/// String literals as the ledger writes them: only the quote, the backslash and control
/// characters escaped, whatever the string's length or storage.
struct JSONWriterTests {
    /// The escape rule written out plainly, one scalar at a time.
    static func reference(_ value: String) -> String {
        var out = "\""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "\u{08}": out += "\\b"
            case "\u{0C}": out += "\\f"
            case let control where control.value < 0x20:
                let hex = String(control.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    static let strings: [String] = [
        "", "a", "plain ascii", "forgotten/12", String(repeating: "x", count: 40),
        "quote \" inside", "back\\slash", "new\nline", "\u{01}\u{1F}", "tab\there",
        "é", "日本語の長い文字列ですね", "emoji 🧾 and \u{7F}", String(repeating: "🧾", count: 20) + "\"",
        // A long string stored natively, strings built from substrings (with and without a
        // character to escape), a long one bridged from UTF-16.
        String(repeating: "ab", count: 500), String("xx\"yy".dropFirst()), String(String(repeating: "cd", count: 40).dropFirst(3)),
        String(decoding: Array("utf16 ✓ text \u{01}".utf16), as: UTF16.self),
    ]

    @Test(arguments: strings)
    func aStringIsQuotedAsTheRuleSays(_ value: String) {
        var bytes: [UInt8] = []
        JSONWriter.appendQuoted(value, to: &bytes)
        #expect(String(decoding: bytes, as: UTF8.self) == Self.reference(value))
    }
}
