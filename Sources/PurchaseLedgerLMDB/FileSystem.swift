import PurchaseLedger
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The directory operations a ledger needs.
package enum Directory {
    package enum Status { case missing, empty, nonEmpty, notADirectory }

    package static func status(_ path: String) -> Status {
        var info = stat()
        guard stat(path, &info) == 0 else { return .missing }
        guard info.st_mode & S_IFMT == S_IFDIR else { return .notADirectory }
        guard let dir = opendir(path) else { return .nonEmpty }
        defer { closedir(dir) }
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.bindMemory(to: CChar.self).baseAddress!)
            }
            if name != "." && name != ".." { return .nonEmpty }
        }
        return .empty
    }

    package static func create(_ path: String) throws(FileSystemError) {
        guard mkdir(path, 0o755) == 0 || errno == EEXIST else {
            throw FileSystemError(path: path, operation: "mkdir", errno: errno)
        }
    }

    package static func fileExists(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0
    }

    /// Bytes available to this process on the file system holding `path`.
    package static func freeBytes(_ path: String) -> Int? {
        var info = statvfs()
        guard statvfs(path, &info) == 0 else { return nil }
        return Int(info.f_bavail) * Int(info.f_frsize)
    }

    /// Size in bytes of the file at `path`, nil when it does not exist.
    package static func fileSize(_ path: String) -> Int? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return Int(info.st_size)
    }
}

/// An exclusive advisory lock on a file, held until released or the process ends. It keeps two
/// processes from writing one ledger: each keeps its projections in memory, and a second writer
/// would validate against a state that no longer holds.
package final class ExclusiveFileLock: Sendable {
    private let fd: Atomic<Int32>

    /// Returns nil when another process holds the lock.
    package init?(path: String) throws(FileSystemError) {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw FileSystemError(path: path, operation: "open", errno: errno) }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let error = errno
            close(fd)
            if error == EWOULDBLOCK { return nil }
            throw FileSystemError(path: path, operation: "flock", errno: error)
        }
        self.fd = Atomic(fd)
    }

    deinit {
        release()
    }

    package func release() {
        let fd = fd.exchange(-1, ordering: .acquiringAndReleasing)
        if fd >= 0 { close(fd) }
    }
}
