#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The physical limit of a durable commit: one 4 KiB page written in place and `fdatasync`ed,
/// as often as the disk allows. A durable LMDB commit costs at least this (it syncs its data
/// pages, then its meta page).
public final class DiskFloor: @unchecked Sendable {
    private let fd: Int32
    private var page = [UInt8](repeating: 0x5A, count: 4096)
    private var counter: UInt8 = 0
    public let directory: String

    public init(directory: String) {
        self.directory = directory
        fd = open(directory + "/sync-floor", O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        precondition(fd >= 0, "cannot create the fdatasync floor's file in \(directory)")
    }

    deinit {
        close(fd)
    }

    /// Writes the page (changed, so that it is really written) and waits until it is durable.
    public func commit() {
        counter &+= 1
        page[0] = counter
        let written = page.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        precondition(written == 4096 && fdatasync(fd) == 0, "the fdatasync floor failed: \(errno)")
    }
}
