import Foundation
import HTTPTypes
import NIOCore
import PurchaseLedger

/// The events of a `POST /v1/events` body, by its Content-Type:
///
/// - `application/json` (or none): one event object, or an array of them;
/// - `application/x-ndjson`, `application/jsonl`, `application/x-jsonlines`, `application/json-lines`: one event per
///   line, as `ledger import` reads files (an empty line is a line, and rejected).
///
/// One result per event, in order: an event that does not decode is rejected alone
/// (`invalidEvent`), as a bad line of an import is. A body that is not JSON at all, or is JSON
/// but neither an object nor an array, is refused whole.
enum EventBodyDecoder {
    static let jsonLinesTypes: Set<String> = ["application/x-ndjson", "application/jsonl", "application/x-jsonlines", "application/json-lines"]

    /// - Parameter limit: the most events a body may hold; a body with more is refused whole
    ///   (413) before any of it is decoded, so that a body of a million empty lines costs a
    ///   count, not a million results.
    static func decode(_ body: ByteBuffer, contentType: String?, limit: Int) throws -> [Result<Event, LedgerError>] {
        // "type/subtype; parameters": the type, without its parameters (an empty value is no type).
        let mediaType = contentType.map { value in
            (value.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false).first ?? "")
                .trimmingCharacters(in: .whitespaces).lowercased()
        } ?? "application/json"
        let bytes = Array(body.readableBytesView)
        if jsonLinesTypes.contains(mediaType) {
            var lines = bytes.count(where: { $0 == UInt8(ascii: "\n") })
            if bytes.last != UInt8(ascii: "\n"), !bytes.isEmpty { lines += 1 }
            try check(lines, limit: limit)
            return jsonLines(bytes)
        }
        guard mediaType == "application/json" else {
            throw LedgerHTTPError(
                status: .unsupportedMediaType, code: "unsupportedMediaType",
                message: "send application/json (an event or an array of events) or application/x-ndjson (one event per line), not \"\(mediaType)\"")
        }
        try check(topLevelElements(bytes), limit: limit)
        do {
            return try Event.decodeEvents(json: bytes)
        } catch {
            throw LedgerHTTPError.invalidEvent(error.message)
        }
    }

    private static func check(_ count: Int, limit: Int) throws {
        guard count <= limit else {
            throw LedgerHTTPError.tooLarge("the body holds more than \(limit) events; at most \(limit) in one request")
        }
    }

    /// How many elements a top-level JSON array holds, at most (commas at depth one, outside
    /// strings, plus one); 1 for anything else. Malformed JSON is left to the parser.
    static func topLevelElements(_ bytes: [UInt8]) -> Int {
        guard let first = bytes.first(where: { ![0x20, 0x09, 0x0A, 0x0D].contains($0) }), first == UInt8(ascii: "[") else { return 1 }
        var depth = 0
        var inString = false
        var escaped = false
        var commas = 0
        for byte in bytes {
            if inString {
                if escaped { escaped = false } else if byte == UInt8(ascii: "\\") { escaped = true } else if byte == UInt8(ascii: "\"") { inString = false }
                continue
            }
            switch byte {
            case UInt8(ascii: "\""): inString = true
            case UInt8(ascii: "["), UInt8(ascii: "{"): depth += 1
            case UInt8(ascii: "]"), UInt8(ascii: "}"): depth -= 1
            case UInt8(ascii: ","): if depth == 1 { commas += 1 }
            default: break
            }
        }
        return commas + 1
    }

    private static func jsonLines(_ bytes: [UInt8]) -> [Result<Event, LedgerError>] {
        var lines = bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
        // A final newline ends the last line; it does not start another.
        if lines.last?.isEmpty == true { lines.removeLast() }
        return lines.map { line in
            Result { () throws(LedgerError) in
                try Array(line).withUnsafeBufferPointer { buffer throws(LedgerError) in try Event(jsonLine: buffer) }
            }
        }
    }
}
