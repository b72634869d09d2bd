import Logging

/// Text from a request (or a payload nobody has verified yet) made fit for a log line: control
/// characters, quotes, backslashes and anything outside printable ASCII escaped as `\u{…}`, and
/// at most `limit` characters kept, so that no client can forge a line or flood the log.
package enum LogSafe {
    package static let defaultLimit = 200

    package static func text(_ value: String, limit: Int = defaultLimit) -> String {
        var result = ""
        var kept = 0
        var scalars = value.unicodeScalars.makeIterator()
        while let scalar = scalars.next() {
            guard kept < limit else {
                var rest = 1
                while scalars.next() != nil { rest += 1 }
                result += "…(\(rest) more)"
                break
            }
            switch scalar.value {
            case 0x20...0x7E where scalar != "\\" && scalar != "\"":
                result.unicodeScalars.append(scalar)
            default:
                result += "\\u{" + String(scalar.value, radix: 16) + "}"
            }
            kept += 1
        }
        return result
    }

    package static func metadata(_ value: String, limit: Int = defaultLimit) -> Logger.MetadataValue {
        .string(text(value, limit: limit))
    }
}
