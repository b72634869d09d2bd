#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension String {
    /// `utf8` as a string when it is valid UTF-8, else nil. Decoding repairs invalid UTF-8 with
    /// U+FFFD, so getting the same bytes back proves there was none. (`String(validating:as:)`
    /// is generic and not specialized for its callers: it instantiated type metadata on every
    /// call, a tenth of a replay and of parsing a line.) The bytes are compared with `memcmp`:
    /// `elementsEqual` over the `utf8` view cost a replay 5%.
    init?(exactUTF8 utf8: UnsafeBufferPointer<UInt8>) {
        var text = String(decoding: utf8, as: UTF8.self)
        let same = text.withUTF8 { decoded in
            guard decoded.count == utf8.count else { return false }
            guard let decodedStart = decoded.baseAddress, let start = utf8.baseAddress else { return true }
            return memcmp(decodedStart, start, utf8.count) == 0
        }
        guard same else { return nil }
        self = text
    }
}
