/// CRC-32C (Castagnoli), the checksum of every log record: software slicing-by-8, about one
/// byte per cycle, with no dependency. Check value: crc32c("123456789") == 0xE3069283.
enum CRC32C {
    private static let tables: [[UInt32]] = {
        var tables = [[UInt32]](repeating: [UInt32](repeating: 0, count: 256), count: 8)
        for byte in 0..<256 {
            var crc = UInt32(byte)
            for _ in 0..<8 {
                crc = crc & 1 != 0 ? (crc >> 1) ^ 0x82F6_3B78 : crc >> 1
            }
            tables[0][byte] = crc
        }
        for byte in 0..<256 {
            var crc = tables[0][byte]
            for slice in 1..<8 {
                crc = tables[0][Int(crc & 0xFF)] ^ (crc >> 8)
                tables[slice][byte] = crc
            }
        }
        return tables
    }()

    private static let flat: [UInt32] = tables.flatMap { $0 }

    static func checksum(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        flat.withUnsafeBufferPointer { t in
            var crc: UInt32 = 0xFFFF_FFFF
            var index = 0
            let count = bytes.count
            while index + 8 <= count {
                let word = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: index, as: UInt64.self))
                let low = UInt32(truncatingIfNeeded: word) ^ crc
                let high = UInt32(truncatingIfNeeded: word >> 32)
                crc = t[7 * 256 + Int(low & 0xFF)] ^ t[6 * 256 + Int((low >> 8) & 0xFF)]
                    ^ t[5 * 256 + Int((low >> 16) & 0xFF)] ^ t[4 * 256 + Int(low >> 24)]
                    ^ t[3 * 256 + Int(high & 0xFF)] ^ t[2 * 256 + Int((high >> 8) & 0xFF)]
                    ^ t[1 * 256 + Int((high >> 16) & 0xFF)] ^ t[Int(high >> 24)]
                index += 8
            }
            while index < count {
                crc = t[Int((crc ^ UInt32(bytes[index])) & 0xFF)] ^ (crc >> 8)
                index += 1
            }
            return ~crc
        }
    }

    static func checksum(_ bytes: [UInt8]) -> UInt32 {
        bytes.withUnsafeBytes { checksum($0) }
    }
}
