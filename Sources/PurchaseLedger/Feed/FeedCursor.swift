/// A place in the change feed. Changes are ordered by the log position that caused them (or,
/// for a change time caused, the position the log had then), then the commit's changes before
/// time's, time's by instant, then by account bytes. A cursor without an account stands after
/// every account's change at its position (and instant): `0` is the feed's start, `42` the
/// point after everything position 42 caused.
///
/// Text form (docs/FEEDS.md): `P`, `P.ACCOUNT`, `P@SECONDS.NANOS` and `P@SECONDS.NANOS.ACCOUNT`,
/// the account in base64url without padding. A change's id is its cursor's text: deriving the
/// feed again from storage gives the same ids.
public struct FeedCursor: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var position: UInt64
    /// Nil for a change an event caused; the instant, for a change time caused.
    public var instant: Timestamp?
    /// Nil: after every account at this position (and instant).
    public var account: String?

    public init(position: UInt64, instant: Timestamp? = nil, account: String? = nil) {
        self.position = position
        self.instant = instant
        self.account = account
    }

    /// Before every change.
    public static let start = FeedCursor(position: 0)

    public static func < (lhs: FeedCursor, rhs: FeedCursor) -> Bool {
        if lhs.position != rhs.position { return lhs.position < rhs.position }
        switch (lhs.instant, rhs.instant) {
        case (nil, .some): return true
        case (.some, nil): return false
        case let (left?, right?) where left != right: return left < right
        default: break
        }
        switch (lhs.account, rhs.account) {
        case (nil, nil), (nil, .some): return false
        case (.some, nil): return true
        case let (left?, right?): return left.utf8.lexicographicallyPrecedes(right.utf8)
        }
    }

    public static func == (lhs: FeedCursor, rhs: FeedCursor) -> Bool {
        lhs.position == rhs.position && lhs.instant == rhs.instant && sameBytes(lhs.account, rhs.account)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(position)
        hasher.combine(instant)
        hasher.combine(account.map { UTF8Key($0) })
    }

    public var description: String {
        var text: [UInt8] = []
        text.reserveCapacity(48 + ((account?.utf8.count ?? 0) + 2) / 3 * 4)
        appendText(to: &text)
        return String(decoding: text, as: UTF8.self)
    }

    /// Appends the text form (`description`): digits, `@`, `.`, `-` and URL-safe base64 only.
    /// A feed writes it twice for each change it hands out (its id and its cursor), into the
    /// change's JSON, without a string between.
    func appendText(to text: inout [UInt8]) {
        text += String(position).utf8
        if let instant {
            let nanoseconds = String(instant.nanoseconds)
            text += "@\(instant.seconds).".utf8
            text += repeatElement(UInt8(ascii: "0"), count: max(0, 9 - nanoseconds.utf8.count))
            text += nanoseconds.utf8
        }
        if var account {
            text.append(UInt8(ascii: "."))
            account.withUTF8 { Base64URL.append($0, to: &text) }
        }
    }

    /// Parses the text form; nil for anything else (a cursor comes from outside: a query
    /// string, a header, a command line).
    public init?(_ text: some StringProtocol) {
        guard text.utf8.count <= 1024 else { return nil }
        var rest = Substring(text)
        func digits() -> Substring {
            let end = rest.firstIndex { !("0"..."9").contains($0) } ?? rest.endIndex
            defer { rest = rest[end...] }
            return rest[..<end]
        }
        let positionDigits = digits()
        guard !positionDigits.isEmpty, positionDigits.count <= 20, let position = UInt64(positionDigits) else { return nil }
        var instant: Timestamp?
        if rest.first == "@" {
            rest = rest.dropFirst()
            var negative = false
            if rest.first == "-" {
                negative = true
                rest = rest.dropFirst()
            }
            let secondDigits = digits()
            guard !secondDigits.isEmpty, secondDigits.count <= 12, let seconds = Int64(secondDigits), rest.first == "." else { return nil }
            rest = rest.dropFirst()
            let nanoDigits = digits()
            guard nanoDigits.count == 9, let nanoseconds = UInt32(nanoDigits) else { return nil }
            let time = Timestamp(seconds: negative ? -seconds : seconds, nanoseconds: nanoseconds)
            guard time.isRepresentable else { return nil }
            instant = time
        }
        var account: String?
        if rest.first == "." {
            guard let bytes = Base64URL.decode(rest.dropFirst()), (1...128).contains(bytes.count),
                  let name = String(validating: bytes, as: UTF8.self) else { return nil }
            account = name
            rest = rest[rest.endIndex...]
        }
        guard rest.isEmpty else { return nil }
        self.init(position: position, instant: instant, account: account)
    }
}

/// Base64 with the URL's alphabet and no padding (RFC 4648 §5), for cursors.
enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    static func encode(_ bytes: [UInt8]) -> String {
        base64Encode(bytes, alphabet: alphabet, padded: false)
    }

    static func append(_ bytes: UnsafeBufferPointer<UInt8>, to text: inout [UInt8]) {
        base64Append(bytes, alphabet: alphabet, padded: false, to: &text)
    }

    /// The bytes of `text`; with `canonical`, only of the one spelling `encode` gives them
    /// (the unused low bits of the last character zero).
    static func decode(_ text: some StringProtocol, canonical: Bool = true) -> [UInt8]? {
        var values: [UInt32] = []
        for byte in text.utf8 {
            guard let index = alphabet.firstIndex(of: byte) else { return nil }
            values.append(UInt32(index))
        }
        guard values.count % 4 != 1 else { return nil }
        var out: [UInt8] = []
        var index = 0
        while index < values.count {
            let chunk = values[index..<min(index + 4, values.count)]
            var value: UInt32 = 0
            for (offset, sextet) in chunk.enumerated() { value |= sextet << (18 - 6 * offset) }
            for byte in 0..<(chunk.count - 1) { out.append(UInt8(value >> (16 - 8 * byte) & 255)) }
            index += 4
        }
        // Only the canonical spelling: the same cursor always has the same text.
        guard !canonical || encode(out) == String(text) else { return nil }
        return out
    }
}
