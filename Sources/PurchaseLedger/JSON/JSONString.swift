/// JSON string literals escaped as the ledger escapes its own output (quote, backslash and
/// control characters; everything else as UTF-8), for code that writes JSON around the
/// ledger's shapes, such as the server's answers.
public enum JSONString {
    /// `"…"`, with the quotes.
    public static func quoted(_ value: String) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(value.utf8.count + 2)
        JSONWriter.appendQuoted(value, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }
}
