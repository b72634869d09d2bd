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
