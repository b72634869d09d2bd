import PurchaseLedger
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The LMDB environments open in this process. LMDB must not open one environment twice in a
/// process (closing the second would drop the first's file locks), so the second open is
/// refused with a clear error instead.
enum OpenEnvironments {
    fileprivate struct Identity: Hashable {
        var device: UInt64
        var inode: UInt64
    }

    private static let open = Mutex<Set<Identity>>([])

    final class Claim: Sendable {
        private let identity: Mutex<Identity?>

        fileprivate init(_ identity: Identity) {
            self.identity = Mutex(identity)
        }

        func release() {
            guard let identity = identity.withLock({ $0.take() }) else { return }
            _ = OpenEnvironments.open.withLock { $0.remove(identity) }
        }
    }

    static func claim(_ directory: String) throws -> Claim {
        var info = stat()
        guard stat(directory, &info) == 0 else {
            throw StorageError(.notALedger, "\(directory) does not exist")
        }
        let identity = Identity(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
        guard open.withLock({ $0.insert(identity).inserted }) else {
            throw StorageError(.ledgerInUse, "the ledger at \(directory) is already open in this process; share that instance")
        }
        return Claim(identity)
    }
}
