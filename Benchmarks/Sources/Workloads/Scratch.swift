#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where benchmark data goes: `BENCH_DATA` or /tmp/purchase-ledger-bench. Fixture ledgers are
/// kept there between runs (they take a while to build); scratch directories are removed.
public enum Scratch {
    public static var root: String {
        let root = getenv("BENCH_DATA").map { String(cString: $0) } ?? "/tmp/purchase-ledger-bench"
        mkdir(root, 0o755)
        return root
    }

    /// A new empty directory under the root.
    public static func directory(_ name: String) -> String {
        let path = "\(root)/\(name)-\(getpid())-\(UInt64.random(in: 0..<UInt64.max))"
        mkdir(path, 0o755)
        return path
    }

    public static func remove(_ path: String) {
        var info = stat()
        guard lstat(path, &info) == 0 else { return }
        if info.st_mode & S_IFMT == S_IFDIR, let dir = opendir(path) {
            while let entry = readdir(dir) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
                if name != "." && name != ".." { remove(path + "/" + name) }
            }
            closedir(dir)
            rmdir(path)
        } else {
            unlink(path)
        }
    }

    public static func exists(_ path: String) -> Bool {
        access(path, F_OK) == 0
    }

    public static func touch(_ path: String) {
        let fd = open(path, O_WRONLY | O_CREAT, 0o644)
        if fd >= 0 { close(fd) }
    }
}

/// Creates a directory (and its parents).
public func mkdirPath(_ path: String) {
    var current = ""
    for component in path.split(separator: "/", omittingEmptySubsequences: true) {
        current += "/" + component
        mkdir(current, 0o755)
    }
}
