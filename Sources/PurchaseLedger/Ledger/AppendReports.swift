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
