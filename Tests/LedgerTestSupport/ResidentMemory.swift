#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The bytes of `path` this process has mapped and resident (Linux: the `Rss` of its mappings
/// in /proc/self/smaps). Per file, so tests running alongside do not count.
public func residentBytes(ofMappingsOf path: String) throws -> Int {
    guard let file = fopen("/proc/self/smaps", "r") else { throw TestFailure("cannot read /proc/self/smaps: \(errno)") }
    defer { fclose(file) }
    var resident = 0
    var inMapping = false
    var line = [CChar](repeating: 0, count: 4096)
    while fgets(&line, Int32(line.count), file) != nil {
        let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        // A mapping's first line: "start-end perms offset dev inode path".
        if let first = text.first, first.isHexDigit, text.contains("-") {
            inMapping = text.hasSuffix(" " + path + "\n")
        } else if inMapping, text.hasPrefix("Rss:") {
            resident += (Int(text.split(separator: " ")[1]) ?? 0) * 1024
        }
    }
    return resident
}
