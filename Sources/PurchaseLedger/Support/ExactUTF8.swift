extension String {
    /// `utf8` as a string when it is valid UTF-8, else nil. Decoding repairs invalid UTF-8 with
    /// U+FFFD, so getting the same bytes back proves there was none. (`String(validating:as:)`
    /// is generic and not specialized for its callers: it instantiated type metadata on every
    /// call, a tenth of a replay and of parsing a line.)
    init?(exactUTF8 utf8: UnsafeBufferPointer<UInt8>) {
        let text = String(decoding: utf8, as: UTF8.self)
        guard text.utf8.count == utf8.count, text.utf8.elementsEqual(utf8) else { return nil }
        self = text
    }
}
