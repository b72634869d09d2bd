/// Several events in one JSON document: an object (one event) or an array of objects.
extension Event {
    /// Decodes a JSON document holding one event object or an array of them: one result per
    /// event, in order (an element that is not a valid event is rejected alone, `invalidEvent`).
    /// Throws `invalidEvent` when the document itself is not JSON, or neither an object nor an
    /// array.
    public static func decodeEvents(json bytes: [UInt8]) throws(LedgerError) -> [Result<Event, LedgerError>] {
        let value: JSONValue
        do {
            value = try JSONParser.parse(bytes)
        } catch {
            throw .invalid("not valid JSON: \(error)")
        }
        switch value {
        case .object:
            return [Result { () throws(LedgerError) in try Event(json: value) }]
        case .array(let elements):
            return elements.map { element in Result { () throws(LedgerError) in try Event(json: element) } }
        default:
            throw .invalid("the body must be an event object or an array of them, not \(value.typeName)")
        }
    }
}

extension Result where Success == AppendOutcome, Failure == LedgerError {
    /// The interchange format's report line for this result: `{"line": 1, "outcome":
    /// "appended", "position": 1}`, `… "duplicate", "position": 1}` or `… "rejected", "error":
    /// "illegalTransition", "message": "…"}`: the format's fields, then what was wrong, naming
    /// the field or the rule (an addition of this project; the format's fields are unchanged).
    public func reportLine(_ line: Int) -> String {
        switch self {
        case .success(.appended(let position)):
            "{\"line\": \(line), \"outcome\": \"appended\", \"position\": \(position)}"
        case .success(.duplicate(let position)):
            "{\"line\": \(line), \"outcome\": \"duplicate\", \"position\": \(position)}"
        case .failure(let error):
            "{\"line\": \(line), \"outcome\": \"rejected\", \"error\": \"\(error.code.rawValue)\", \"message\": \(JSONString.quoted(error.message))}"
        }
    }

    /// `[{"line": 1, …}, {"line": 2, …}]`: the report lines of `results`, counted from 1.
    public static func reportArray(_ results: [Self]) -> String {
        "[" + results.enumerated().map { $0.element.reportLine($0.offset + 1) }.joined(separator: ", ") + "]"
    }
}

extension LogRecord {
    /// `{"position": 12, "event": {…}}`, the event in its canonical form.
    public var jsonLine: String {
        "{\"position\": \(position), \"event\": \(event.jsonLine)}"
    }
}
