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
@Suite(.serialized)
struct StopUnderLoadTests {
    /// The clients, in a child process: opening hundreds of sockets in this process while
    /// another test launches a process races Foundation's `Process.run`, which walks the open
    /// descriptors. It opens `count` connections one after another (one the server does not take
    /// in 100 ms is given up), sending each all, half or a few bytes of a request; sends SIGTERM
    /// to the server after `delay` seconds of it; hangs up a second later.
    static let clients = #"""
        import os, signal, socket, sys, time
        port, pid, count, delay, key = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
        start, signalled, sockets = time.monotonic(), False, []
        for index in range(count):
            if not signalled and time.monotonic() - start >= delay:
                os.kill(pid, signal.SIGTERM); signalled = True
            try:
                s = socket.create_connection(("127.0.0.1", port), timeout=0.1)
            except OSError:
                continue
            body = '{"id":"s%d","type":"paymentAdded","account":"stop-%d","at":"2026-03-14T08:00:00Z","payment":"P%d","product":"com.example.tenhints"}' % (index, index % 7, index)
            crlf = chr(13) + chr(10)
            request = crlf.join(["POST /v1/events HTTP/1.1", "Host: localhost", "Authorization: Bearer " + key,
                                 "Content-Type: application/json", "Content-Length: %d" % len(body), "", body]).encode()
            try:
                s.sendall(request[: [len(request), len(request) // 2, 10][index % 3]])
            except OSError:
                pass
            sockets.append(s)
        if not signalled:
            os.kill(pid, signal.SIGTERM)
        print(len(sockets))
        time.sleep(1)
        for s in sockets:
            s.close()
        """#

    @Test(arguments: 0..<3)
    func sigtermWhileHundredsOfConnectionsOpenStopsCleanly(round: Int) async throws {
        try await withTemporaryDirectory { directory in
            let (process, port) = try LedgerServerTests.launch(in: directory, logLevel: "error")
            defer { process.kill() }
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

            let clients = try await awaitCommand(URL(fileURLWithPath: "/usr/bin/env"), [
                "python3", "-c", Self.clients, "\(port)", "\(process.pid)", "400", "\(0.05 + 0.05 * Double(round))", TestKeys.writer,
            ])
            #expect(clients.status == 0, "\(clients.error)")
            #expect((Int(clients.text.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0) > 0, "no connection opened: \(clients.text)")
            let exited = await withCheckedContinuation { continuation in
                DispatchQueue.global().async {
                    let deadline = Date().addingTimeInterval(60)
                    while process.isRunning, Date() < deadline { usleep(20_000) }
                    continuation.resume(returning: !process.isRunning)
                }
            }
            #expect(exited, "ledger-server did not stop within 60 s of SIGTERM")
            if !exited { process.send(SIGKILL) }
            let stderr = String(decoding: process.error?.readDataToEndOfFile() ?? Data(), as: UTF8.self)
            let termination = await process.exit()
            #expect(termination == .exited(0), "\(termination): \(stderr.suffix(2000))")
            #expect(!stderr.contains("NIOAsyncWriter"))
        }
    }
}
