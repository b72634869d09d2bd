import Foundation

/// Searches bytes for names a forget must have removed, in every encoding they may have been
/// written in: raw UTF-8; JSON-escaped (once, and twice, as a JSON string held in another: a
/// parked webhook body), with and without `\/` and `\u` escapes of non-ASCII; percent-encoded;
/// base64 and base64url at each of the three alignments a name can have inside a longer encoded
/// text; and inside every compact JWS found, whose payload is decoded and searched the same way.
/// UUID-like names are matched without regard to case.
public enum Leaks {
    /// Each place a name was found, described (`"alice: base64url in …"`); empty when none.
    public static func find(_ names: [String], in bytes: [UInt8], depth: Int = 0) -> [String] {
        var found: [String] = []
        let haystack = bytes
        let lowered = bytes.map { ($0 >= 65 && $0 <= 90) ? $0 + 32 : $0 }
        for name in names where !name.isEmpty {
            let caseless = isUUIDLike(name)
            for (form, needle) in forms(of: name) where !needle.isEmpty {
                let (searched, wanted) = caseless ? (lowered, needle.map { ($0 >= 65 && $0 <= 90) ? $0 + 32 : $0 }) : (haystack, needle)
                if contains(searched, wanted) { found.append("\(name): \(form)") }
            }
        }
        guard depth < 3 else { return found }
        for payload in jwsPayloads(in: bytes) {
            found += find(names, in: payload, depth: depth + 1).map { "\($0) (inside a JWS)" }
        }
        return found
    }

    /// The same for every file under `directory`, recursively: each finding with its file.
    public static func find(_ names: [String], inFilesUnder directory: String) throws -> [String] {
        var found: [String] = []
        let manager = FileManager.default
        guard let enumerator = manager.enumerator(atPath: directory) else { return [] }
        for case let relative as String in enumerator {
            let path = directory + "/" + relative
            var isDirectory: ObjCBool = false
            guard manager.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue else { continue }
            let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
            found += find(names, in: bytes).map { "\($0) in \(relative)" }
        }
        return found
    }

    static func isUUIDLike(_ name: String) -> Bool {
        UUID(uuidString: name) != nil
    }

    /// The encodings of `name` searched for.
    static func forms(of name: String) -> [(String, [UInt8])] {
        let utf8 = Array(name.utf8)
        var forms: [(String, [UInt8])] = [("raw", utf8)]
        let escaped = jsonEscaped(name, asciiOnly: false, slashes: false)
        for (label, text) in [
            ("JSON-escaped", escaped),
            ("JSON-escaped, ASCII", jsonEscaped(name, asciiOnly: true, slashes: false)),
            ("JSON-escaped, slashes", jsonEscaped(name, asciiOnly: false, slashes: true)),
            ("JSON-escaped twice", jsonEscaped(escaped, asciiOnly: false, slashes: false)),
            ("JSON-escaped twice, slashes", jsonEscaped(jsonEscaped(name, asciiOnly: false, slashes: true), asciiOnly: false, slashes: true)),
            ("JSON-escaped twice, ASCII", jsonEscaped(jsonEscaped(name, asciiOnly: true, slashes: false), asciiOnly: true, slashes: false)),
            ("percent-encoded", name.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? name),
        ] where text != name {
            forms.append((label, Array(text.utf8)))
        }
        for alignment in 0..<3 {
            let padded = Array(repeating: UInt8(0), count: alignment) + utf8
            let encoded = Array(Data(padded).base64EncodedString().utf8)
            // The characters that depend on the name's bytes alone: not the first ones, which
            // carry the padding's bits, nor the last ones, which carry the next bytes'.
            let start = (alignment * 8 + 5) / 6
            let end = (padded.count * 8) / 6
            guard end > start + 2 else { continue }
            let core = Array(encoded[start..<end])
            forms.append(("base64 (\(alignment))", core))
            let url = core.map { $0 == UInt8(ascii: "+") ? UInt8(ascii: "-") : $0 == UInt8(ascii: "/") ? UInt8(ascii: "_") : $0 }
            if url != core { forms.append(("base64url (\(alignment))", url)) }
        }
        return forms
    }

    static func jsonEscaped(_ text: String, asciiOnly: Bool, slashes: Bool) -> String {
        var result = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "/" where slashes: result += "\\/"
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            default:
                if scalar.value < 0x20 || (asciiOnly && scalar.value > 0x7E) {
                    if scalar.value > 0xFFFF {
                        for unit in String(scalar).utf16 { result += String(format: "\\u%04x", unit) }
                    } else {
                        result += String(format: "\\u%04x", scalar.value)
                    }
                } else {
                    result.unicodeScalars.append(scalar)
                }
            }
        }
        return result
    }

    /// The decoded payloads of the compact JWS in `bytes` (three base64url runs joined by dots).
    static func jwsPayloads(in bytes: [UInt8]) -> [[UInt8]] {
        func isBase64URL(_ byte: UInt8) -> Bool {
            (byte >= 65 && byte <= 90) || (byte >= 97 && byte <= 122) || (byte >= 48 && byte <= 57) || byte == 45 || byte == 95
        }
        var payloads: [[UInt8]] = []
        var index = 0
        while index < bytes.count {
            guard isBase64URL(bytes[index]) else {
                index += 1
                continue
            }
            var runs: [Range<Int>] = []
            var start = index
            var cursor = index
            while cursor < bytes.count {
                if isBase64URL(bytes[cursor]) {
                    cursor += 1
                } else if bytes[cursor] == UInt8(ascii: "."), runs.count < 2 {
                    runs.append(start..<cursor)
                    cursor += 1
                    start = cursor
                } else {
                    break
                }
            }
            runs.append(start..<cursor)
            if runs.count == 3, runs[1].count >= 8 {
                var text = String(decoding: bytes[runs[1]], as: UTF8.self)
                    .replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
                text += String(repeating: "=", count: (4 - text.count % 4) % 4)
                if let decoded = Data(base64Encoded: text) { payloads.append(Array(decoded)) }
            }
            index = max(cursor, index + 1)
        }
        return payloads
    }

    static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, haystack.count >= needle.count else { return false }
        let first = needle[0]
        var index = 0
        let last = haystack.count - needle.count
        while index <= last {
            if haystack[index] == first, haystack[index..<index + needle.count].elementsEqual(needle) { return true }
            index += 1
        }
        return false
    }
}
