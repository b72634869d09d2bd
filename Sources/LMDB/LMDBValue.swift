/// A type stored as LMDB key or value bytes.
///
/// Keys are compared by LMDB as raw bytes (memcmp order), so an encoding that should sort
/// numerically must be big-endian; `UInt64` conforms that way.
public protocol LMDBEncodable {
    func withLMDBBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R
}

/// A type read back from LMDB bytes. The bytes point into the map and are only valid during
/// the call, so conformers copy what they keep.
public protocol LMDBDecodable {
    init(lmdbBytes: UnsafeRawBufferPointer) throws(LMDBError)
}

public typealias LMDBCodable = LMDBEncodable & LMDBDecodable

extension UInt64: LMDBCodable {
    /// Big-endian, so that LMDB's byte order is numeric order (and `MDB_APPEND` works).
    public func withLMDBBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try Swift.withUnsafeBytes(of: bigEndian) { try body($0) }
    }

    public init(lmdbBytes bytes: UnsafeRawBufferPointer) throws(LMDBError) {
        guard bytes.count == 8 else {
            throw LMDBError(code: .badValueSize, operation: "decode UInt64", detail: "\(bytes.count) bytes, expected 8")
        }
        self = UInt64(bigEndian: bytes.loadUnaligned(as: UInt64.self))
    }
}

extension String: LMDBCodable {
    /// UTF-8 bytes, without a terminator.
    public func withLMDBBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        var copy = self
        return try copy.withUTF8 { try body(UnsafeRawBufferPointer($0)) }
    }

    public init(lmdbBytes bytes: UnsafeRawBufferPointer) throws(LMDBError) {
        guard let text = String(validating: bytes.assumingMemoryBound(to: UInt8.self), as: UTF8.self) else {
            throw LMDBError(code: .badValueSize, operation: "decode String", detail: "invalid UTF-8")
        }
        self = text
    }
}

extension Array: LMDBEncodable where Element == UInt8 {
    public func withLMDBBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try withUnsafeBytes { try body($0) }
    }
}

extension Array: LMDBDecodable where Element == UInt8 {
    public init(lmdbBytes bytes: UnsafeRawBufferPointer) throws(LMDBError) {
        self = Array(bytes)
    }
}

/// An empty value, for tables whose keys carry all the information (set-like indexes).
public struct EmptyValue: LMDBCodable, Sendable, Hashable {
    public init() {}
    public func withLMDBBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(start: nil, count: 0))
    }
    public init(lmdbBytes bytes: UnsafeRawBufferPointer) throws(LMDBError) {}
}
