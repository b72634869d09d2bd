import Foundation
import HTTPTypes
import NIOCore
import PurchaseLedger

/// The events of a `POST /v1/events` body, by its Content-Type:
///
/// - `application/json` (or none): one event object, or an array of them;
/// - `application/x-ndjson`, `application/jsonl`, `application/x-jsonlines`: one event per
///   line, as `ledger import` reads files (an empty line is a line, and rejected).
///
/// One result per event, in order: an event that does not decode is rejected alone
/// (`invalidEvent`), as a bad line of an import is. A body that is not JSON at all, or is JSON
/// but neither an object nor an array, is refused whole.
enum EventBodyDecoder {
    static let jsonLinesTypes: Set<String> = ["application/x-ndjson", "application/jsonl", "application/x-jsonlines", "application/json-lines"]

    static func decode(_ body: ByteBuffer, contentType: String?) throws -> [Result<Event, LedgerError>] {
        // "type/subtype; parameters": the type, without its parameters (an empty value is no type).
        let mediaType = contentType.map { value in
            (value.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false).first ?? "")
                .trimmingCharacters(in: .whitespaces).lowercased()
        } ?? "application/json"
        let bytes = Array(body.readableBytesView)
        if jsonLinesTypes.contains(mediaType) {
            return jsonLines(bytes)
        }
        guard mediaType == "application/json" else {
            throw LedgerHTTPError(
                status: .unsupportedMediaType, code: "unsupportedMediaType",
                message: "send application/json (an event or an array of events) or application/x-ndjson (one event per line), not \"\(mediaType)\"")
        }
        do {
            return try Event.decodeEvents(json: bytes)
        } catch {
            throw LedgerHTTPError.invalidEvent(error.message)
        }
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
