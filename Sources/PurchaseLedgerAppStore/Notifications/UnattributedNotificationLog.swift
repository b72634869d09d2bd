import Foundation
import PurchaseLedger
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The audit file of notifications the ledger could not give to an account (no
/// `appAccountToken`): one JSON line each, with the signed payload itself as evidence. A line is
/// on disk (fsync) before the notification is acknowledged, so none is lost.
///
/// The server appends while `ledger attribute`, another process, moves the file aside: both
/// hold an exclusive `flock` of `<path>.lock` for the whole of each step (open, write, fsync;
/// rename), so no line is written into a file after it was moved aside and read.
public final class UnattributedNotificationLog: Sendable {
    public let path: String
    private let lock = Mutex(())

    public init(path: String) {
        self.path = path
    }

    /// Appends the notification's line, unless a forget in `forgetsSince` (taken when the
    /// notification came in) names a name the line holds: that forget may have cleared the file
    /// already, and nothing written after it may name its customer. Whether it was written.
    @discardableResult
    func record(
        _ notification: AppStoreNotificationPayload, transaction: AppStoreTransactionPayload?, reason: String, signedPayload: String,
        forgetsSince: ForgetMailbox? = nil
    ) throws -> Bool {
        var line = "{\"receivedAt\": \(JSONString.quoted(ISO8601DateFormatter().string(from: Date())))"
        line += ", \"notificationUUID\": \(JSONString.quoted(notification.notificationUUID))"
        line += ", \"notificationType\": \(JSONString.quoted(notification.notificationType))"
        if let subtype = notification.subtype { line += ", \"subtype\": \(JSONString.quoted(subtype))" }
        if let id = transaction?.transactionId { line += ", \"transactionId\": \(JSONString.quoted(id))" }
        if let id = transaction?.originalTransactionId { line += ", \"originalTransactionId\": \(JSONString.quoted(id))" }
        if let product = transaction?.productId { line += ", \"productId\": \(JSONString.quoted(product))" }
        line += ", \"reason\": \(JSONString.quoted(reason))"
        line += ", \"signedPayload\": \(JSONString.quoted(signedPayload))}\n"
        return try lock.withLock { _ in
            try withFileLock {
                // Under the lock a forget's clearing takes too: it is either done, and in the mail, or waits for this line.
                let forgotten = Set((forgetsSince?.take() ?? []).flatMap(\.renames).map { $0.old.lowercased() }.filter { !$0.isEmpty })
                if !forgotten.isEmpty, Self.names(forgotten, in: line) { return false }
                try append(Array(line.utf8))
                return true
            }
        }
    }

    /// Where the processes sharing the file take turns.
    var lockPath: String { path + ".lock" }

    /// Runs `body` holding the exclusive lock of `lockPath` (waiting for another process's).
    func withFileLock<R>(_ body: () throws -> R) throws -> R {
        let descriptor = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o640)
        guard descriptor >= 0 else { throw failure("open the lock of") }
        defer { close(descriptor) }
        while flock(descriptor, LOCK_EX) != 0 {
            guard errno == EINTR else { throw failure("lock") }
        }
        defer { flock(descriptor, LOCK_UN) }
        return try body()
    }

    // MARK: Attribution

    /// Where lines being attributed wait: the file is renamed here first, so that the server
    /// may go on appending new lines to a new file meanwhile, and a run cut short resumes here.
    var attributingPath: String { path + ".attributing" }

    /// The lines to attribute: those a previous run left, else the whole file, moved aside
    /// (nil without either).
    func takeForAttribution() throws -> [String]? {
        if access(attributingPath, F_OK) != 0 {
            let moved = try withFileLock { () throws -> Bool in
                guard access(path, F_OK) == 0 else { return false }
                guard rename(path, attributingPath) == 0 else { throw failure("rename") }
                try syncDirectory()
                return true
            }
            guard moved else { return nil }
        }
        let text: String
        do {
            text = try String(contentsOfFile: attributingPath, encoding: .utf8)
        } catch {
            throw StorageError(.io, "cannot read \(attributingPath): \(error)")
        }
        return text.split(separator: "\n", omittingEmptySubsequences: true).map(String.init)
    }

    /// Puts back the lines still without an account (after the rest was appended to the
    /// ledger), then removes the moved-aside file: until then a crash loses nothing.
    func finishAttribution(keeping lines: [String]) throws {
        if !lines.isEmpty {
            try lock.withLock { _ in try withFileLock { try append(Array(lines.map { $0 + "\n" }.joined().utf8)) } }
        }
        guard unlink(attributingPath) == 0 || errno == ENOENT else { throw failure("remove") }
        try syncDirectory()
    }

    // MARK: Forgetting

    /// Forgetting a customer (`ForgetNotice`): removes every line that names one of `names` (the
    /// forgotten account, its tokens, its app transaction ids) in whatever form the line holds
    /// it: a customer field inside Apple's signed payload (the notification's JWS, and the
    /// transaction's and renewal info's JWS inside it, base64url JSON each), or quoted in its
    /// reason, compared without regard to case (Apple's tokens are UUIDs). A name inside another
    /// value (`a` in "for", `2026` in a date), or equal to a field that names no customer (a
    /// transaction id), is not the line naming her: other lines stay. Both the file and a moved-aside one being
    /// attributed are rewritten, each as a copy put in its place, under the file lock. Returns
    /// how many lines went.
    @discardableResult
    public func forget(_ names: [String]) throws -> Int {
        let wanted = Set(names.filter { !$0.isEmpty }.map { $0.lowercased() })
        guard !wanted.isEmpty else { return 0 }
        return try lock.withLock { _ in
            try withFileLock {
                try [path, attributingPath].reduce(0) { removed, file in removed + (try forget(wanted, in: file)) }
            }
        }
    }

    private func forget(_ wanted: Set<String>, in file: String) throws -> Int {
        guard access(file, F_OK) == 0 else { return 0 }
        let text: String
        do {
            text = try String(contentsOfFile: file, encoding: .utf8)
        } catch {
            throw StorageError(.io, "cannot read \(file): \(error)")
        }
        let lines = text.split(separator: "\n", omittingEmptySubsequences: true)
        let kept = lines.filter { !Self.names(wanted, in: String($0)) }
        guard kept.count < lines.count else { return 0 }
        let copy = file + ".forget"
        let bytes = Array(kept.map { $0 + "\n" }.joined().utf8)
        let descriptor = open(copy, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o640)
        guard descriptor >= 0 else { throw failure("open a copy of") }
        var written = 0
        while written < bytes.count {
            let count = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress! + written, bytes.count - written) }
            if count < 0 {
                if errno == EINTR { continue }
                close(descriptor)
                throw failure("write a copy of")
            }
            written += count
        }
        guard fsync(descriptor) == 0 else {
            close(descriptor)
            throw failure("fsync a copy of")
        }
        close(descriptor)
        guard rename(copy, file) == 0 else { throw failure("put a copy in place of") }
        try syncDirectory()
        return lines.count - kept.count
    }

    /// Whether a line names one of `wanted` (lowercased): as the value of a field that names a
    /// customer (`appAccountToken`, `appTransactionId`), in the line or in the JSON inside the
    /// JWS it carries (and in theirs, a few levels down), or quoted in its reason (a refusal's
    /// message quotes the ids it names). Never a mere substring, nor another field's value:
    /// forgetting `a`, `2026` or an account named like a transaction id must not take other
    /// customers' notifications with it (Apple does not send them again).
    static func names(_ wanted: Set<String>, in line: String) -> Bool {
        guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) else {
            // Not a line this log wrote: removed only when it quotes a name.
            return quotes(wanted, in: line)
        }
        return mentions(wanted, in: object, depth: 0)
    }

    /// The fields of Apple's payloads that name a customer (docs/FORMAT.md, personal fields).
    private static let customerFields: Set<String> = ["appAccountToken", "appTransactionId"]

    private static func quotes(_ wanted: Set<String>, in text: String) -> Bool {
        let text = text.lowercased()
        return wanted.contains { text.contains("\"\($0)\"") }
    }

    private static func mentions(_ wanted: Set<String>, in value: Any, depth: Int) -> Bool {
        guard depth < 8 else { return false }
        switch value {
        case let text as String:
            // A compact JWS: its payload, base64url JSON, may name them.
            let parts = text.split(separator: ".", omittingEmptySubsequences: false)
            guard parts.count == 3, let payload = Base64URL.decode(String(parts[1])),
                  let object = try? JSONSerialization.jsonObject(with: Data(payload)) else { return false }
            return mentions(wanted, in: object, depth: depth + 1)
        case let object as [String: Any]:
            return object.contains { key, value in
                if customerFields.contains(key), let text = value as? String, wanted.contains(text.lowercased()) { return true }
                if key == "reason", let text = value as? String, depth == 0 { return quotes(wanted, in: text) }
                return mentions(wanted, in: value, depth: depth + 1)
            }
        case let array as [Any]:
            return array.contains { mentions(wanted, in: $0, depth: depth + 1) }
        default:
            return false
        }
    }

    private func append(_ bytes: [UInt8]) throws {
        let creating = access(path, F_OK) != 0
        let descriptor = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o640)
        guard descriptor >= 0 else { throw failure("open") }
        defer { close(descriptor) }
        var written = 0
        while written < bytes.count {
            let count = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress! + written, bytes.count - written) }
            if count < 0 {
                if errno == EINTR { continue }
                throw failure("write")
            }
            written += count
        }
        guard fsync(descriptor) == 0 else { throw failure("fsync") }
        // A new file's name is durable once its directory is.
        if creating { try syncDirectory() }
    }

    private func syncDirectory() throws {
        let directory = (path as NSString).deletingLastPathComponent
        let descriptor = open(directory.isEmpty ? "." : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { throw failure("open the directory of") }
        defer { close(descriptor) }
        guard fsync(descriptor) == 0 else { throw failure("fsync the directory of") }
    }

    private func failure(_ call: String) -> StorageError {
        StorageError(.io, "cannot \(call) \(path): \(String(cString: strerror(errno)))")
    }
}
