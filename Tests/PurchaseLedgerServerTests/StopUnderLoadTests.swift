import Foundation
import LedgerTestSupport
@testable import PurchaseLedgerServer
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// SIGTERM while hundreds of connections are opening, some with half a request sent: the
/// server stops cleanly (exit 0, no trap). A loaded run once hit swift-nio's "Deinited
/// NIOAsyncWriter without calling finish()" here: Hummingbird wraps each accepted connection
/// in an `NIOAsyncChannel` whose writer traps when it is dropped unfinished, which a connection
/// accepted while the server stops can be (docs/SERVER.md, "Shutdown").
struct StopUnderLoadTests {
    /// Opens `count` connections to `port`, one after another without waiting for any (a
    /// connection the server does not take in 100 ms is given up), sending each all, half or a
    /// few bytes of a request; returns their descriptors, open.
    static func openConnections(port: Int, count: Int) -> [Int32] {
        var open: [Int32] = []
        for index in 0..<count {
            let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard descriptor >= 0 else { continue }
            _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            address.sin_port = UInt16(port).bigEndian
            _ = withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            var ready = pollfd(fd: descriptor, events: Int16(POLLOUT), revents: 0)
            guard poll(&ready, 1, 100) == 1, ready.revents & Int16(POLLOUT) != 0 else {
                close(descriptor)
                continue
            }
            let body = Lines.added("s\(index)", "stop-\(index % 7)", payment: "P\(index)", product: "com.example.tenhints")
            let request = Array(("POST /v1/events HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer \(TestKeys.writer)\r\n"
                + "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)").utf8)
            let sent = [request.count, request.count / 2, 10][index % 3]
            _ = request.withUnsafeBytes { send(descriptor, $0.baseAddress, sent, Int32(MSG_NOSIGNAL)) }
            open.append(descriptor)
        }
        return open
    }

    @Test(arguments: 0..<3)
    func sigtermWhileHundredsOfConnectionsOpenStopsCleanly(round: Int) async throws {
        try await withTemporaryDirectory { directory in
            let (process, port, errors) = try LedgerServerTests.launch(in: directory, logLevel: "error")
            defer { if process.isRunning { process.terminate() } }
            var up = false
            for _ in 0..<200 where !up {
                let probe = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
                var address = sockaddr_in()
                address.sin_family = sa_family_t(AF_INET)
                address.sin_addr.s_addr = inet_addr("127.0.0.1")
                address.sin_port = UInt16(port).bigEndian
                up = withUnsafePointer(to: &address) { pointer in
                    pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(probe, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
                }
                close(probe)
                if !up { try await Task.sleep(for: .milliseconds(50)) }
            }
            try #require(up, "ledger-server did not start")

            let opening = Task.detached { Self.openConnections(port: port, count: 400) }
            try await Task.sleep(for: .milliseconds(50 + 50 * round))
            kill(process.processIdentifier, SIGTERM)
            let descriptors = await opening.value
            #expect(!descriptors.isEmpty)
            // The clients that stay hang up after a while (the server would cut them off at its
            // request timeout).
            try await Task.sleep(for: .seconds(1))
            for descriptor in descriptors { close(descriptor) }
            let exited = await withCheckedContinuation { continuation in
                DispatchQueue.global().async {
                    let deadline = Date().addingTimeInterval(60)
                    while process.isRunning, Date() < deadline { usleep(20_000) }
                    continuation.resume(returning: !process.isRunning)
                }
            }
            #expect(exited, "ledger-server did not stop within 60 s of SIGTERM")
            if !exited { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
            let status = (process.terminationReason, process.terminationStatus)
            let stderr = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            #expect(status.0 == .exit && status.1 == 0, "\(stderr.suffix(2000))")
            #expect(!stderr.contains("NIOAsyncWriter"))
        }
    }
}
