@testable import PurchaseLedger

/// Account handles given as a ledger's writer gives them, in order of first mention: records
/// encoded through it, from position 1 on, are byte for byte those a ledger of the same events
/// holds.
struct FirstMentionHandles {
    private var handles: [UTF8Key: UInt64] = [:]
    private var names: [UInt64: String] = [:]
    /// The proofs the records kept apart, by position.
    private(set) var proofs: [UInt64: String] = [:]

    mutating func handle(of account: String) -> UInt64 {
        if let known = handles[UTF8Key(account)] { return known }
        let handle = UInt64(handles.count + 1)
        handles[UTF8Key(account)] = handle
        names[handle] = account
        return handle
    }

    func name(of handle: UInt64) -> String? {
        names[handle]
    }

    mutating func record(_ event: Event, position: UInt64) -> [UInt8] {
        let encoded = LogRecordCodec.record(event, position: position) { handle(of: $0) }
        proofs[position] = encoded.proof
        return encoded.bytes
    }

    func decode(_ record: [UInt8], position: UInt64) throws(LogRecordCodec.Damage) -> Event {
        let (names, proofs) = (self.names, self.proofs)
        let result = record.withUnsafeBytes { bytes in
            Result { () throws(LogRecordCodec.Damage) in
                try LogRecordCodec.decode(bytes, expectedPosition: position) { names[$0] } proof: { proofs[$0] }
            }
        }
        return try result.get()
    }
}

/// The offsets at which `needle` occurs in `haystack`.
func occurrences(of needle: [UInt8], in haystack: [UInt8]) -> [Int] {
    guard let first = needle.first, needle.count <= haystack.count else { return [] }
    var found: [Int] = []
    var index = 0
    while index <= haystack.count - needle.count {
        if haystack[index] == first && haystack[index..<index + needle.count].elementsEqual(needle) {
            found.append(index)
        }
        index += 1
    }
    return found
}
