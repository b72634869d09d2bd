import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import NIOPosix
@testable import PurchaseLedgerServer
import Testing
import LedgerTestSupport

/// Streams of the feed and long polls hold their connections while they wait: a key's readers
/// that never read cannot take every connection (`limits.heldReads`, `limits.heldReadsPerKey`);
/// and a cursor past the log's end is refused rather than waited on.
struct HeldReadsTests {
    static let mirror = "mirror-key-0123456789abcdef0123456789"

    @Test func slotsAreCountedPerKeyAndInAllAndGivenBack() {
        let reads = HeldReads(limit: 3, limitPerKey: 2)
        let first = reads.tryAcquire(key: "feed"), second = reads.tryAcquire(key: "feed")
        #expect(first != nil && second != nil)
        #expect(reads.tryAcquire(key: "feed") == nil)
        var mirror = reads.tryAcquire(key: "mirror")
        #expect(mirror != nil && reads.count() == 3 && reads.count(of: "feed") == 2)
        #expect(reads.tryAcquire(key: "other") == nil)
        second?.release()
        second?.release()
        #expect(reads.count(of: "feed") == 1 && reads.count() == 2)
        mirror = nil
        #expect(reads.count(of: "mirror") == 0 && reads.count() == 1)
        #expect(reads.tryAcquire(key: "feed") != nil)
        _ = first
    }

    /// A client that left before its route asked has left: its expensive read stops at once
    /// instead of running to its end in the key's slot.
    @Test func aClientThatLeftBeforeTheRouteAskedHasLeft() async throws {
        let channel = try await DatagramBootstrap(group: MultiThreadedEventLoopGroup.singleton).bind(host: "127.0.0.1", port: 0).get()
        let context = LedgerRequestContext(source: .init(channel: channel, logger: Logger(label: "test")))
        #expect(context.clientLeft() == false)
        try await channel.close()
        #expect(context.clientLeft())
    }

    /// Opens a stream of the feed with `key`, and once it is answered 200 (its slot taken: a
    /// request asked after it cannot take the slot first), reads no more of it.
    static func unreadStream(key: String, port: Int) async throws -> any Channel {
        let head = StatusLineReader()
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelInitializer { channel in channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(head) } }
            .connect(host: "127.0.0.1", port: port).get()
        let statusLine = try await channel.eventLoop.submit { head.statusLine(on: channel.eventLoop) }.get()
        try await channel.writeAndFlush(ByteBuffer(string:
            "GET /v1/changes/stream HTTP/1.1\r\nHost: ledger\r\nAuthorization: Bearer \(key)\r\n\r\n")).get()
        let status = try await statusLine.get()
        guard status == "HTTP/1.1 200 OK" else { throw TestFailure("the stream was answered \(status)") }
        return channel
    }

    /// Gives the status line a connection reads, then stops reading it.
    final class StatusLineReader: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = ByteBuffer
        private var text = ""
        private var promise: EventLoopPromise<String>?

        /// On the channel's event loop.
        func statusLine(on loop: any EventLoop) -> EventLoopFuture<String> {
            let promise = loop.makePromise(of: String.self)
            self.promise = promise
            return promise.futureResult
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard let promise else { return }
            text += String(buffer: unwrapInboundIn(data))
            // "\r\n" is one `Character`.
            if let end = text.firstIndex(of: "\r\n") {
                self.promise = nil
                promise.succeed(String(text[..<end]))
                context.channel.setOption(ChannelOptions.autoRead, value: false).whenComplete { _ in }
            }
        }

        func channelInactive(context: ChannelHandlerContext) {
            promise?.fail(ChannelError.eof)
            promise = nil
            context.fireChannelInactive()
        }
    }

    /// The status line of `path` asked with `key` on a connection of its own, which is closed
    /// once the line is read (a stream's answer never ends).
    static func status(_ path: String, key: String, port: Int, lastEventID: String? = nil) async throws -> String {
        let resume = lastEventID.map { "Last-Event-ID: \($0)\r\n" } ?? ""
        return try await SlowClientTests.exchange(
            "GET \(path) HTTP/1.1\r\nHost: ledger\r\nAuthorization: Bearer \(key)\r\n\(resume)Connection: close\r\n\r\n",
            port: port, statusLineOnly: true)
    }

    /// Asks until the status line is `expected` (the server takes the streams' requests on its
    /// own time); false if it never is.
    static func eventually(_ expected: String, _ path: String, key: String, port: Int) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            if try await status(path, key: key, port: port) == expected { return true }
            try await Task.sleep(for: .milliseconds(50))
        }
        return false
    }

    @Test func unreadStreamsTakeTheirKeysSlotsNotTheServersConnections() async throws {
        try await withTemporaryDirectory { directory in
            var configuration = try LedgerServerTests.configuration(in: directory)
            configuration.keys.append(.init(name: "mirror", key: Self.mirror, scopes: [.changesRead]))
            configuration.limits.heldReads = 3
            configuration.limits.heldReadsPerKey = 2
            var logger = Logger(label: "test")
            logger.logLevel = .critical
            let app = try await LedgerServer.application(configuration: configuration, logger: logger)
            try await app.test(.live) { client in
                let port = try #require(client.port)
                let busy = "HTTP/1.1 503 Service Unavailable", ok = "HTTP/1.1 200 OK"
                var feedStreams = [try await Self.unreadStream(key: TestKeys.feed, port: port),
                                   try await Self.unreadStream(key: TestKeys.feed, port: port)]
                // The key's two slots taken: its next stream and long poll wait their turn.
                #expect(try await Self.eventually(busy, "/v1/changes?wait=1", key: TestKeys.feed, port: port))
                #expect(try await Self.status("/v1/changes/stream", key: TestKeys.feed, port: port) == busy)
                // A page that does not wait holds nothing; another key has its own slots.
                #expect(try await Self.status("/v1/changes", key: TestKeys.feed, port: port) == ok)
                #expect(try await Self.status("/v1/changes?wait=1", key: Self.mirror, port: port) == ok)
                // Three held in all: the server's last slot goes to the mirror's stream.
                let mirrorStream = try await Self.unreadStream(key: Self.mirror, port: port)
                #expect(try await Self.eventually(busy, "/v1/changes?wait=1", key: Self.mirror, port: port))
                // Everything else is answered: the health check, appends, reads.
                #expect(try await client.send(.get, "/v1/health").status == .ok)
                let outcomes = try await client.post(events: [Lines.added("e1", "ana", payment: "A1", product: "com.example.tenhints")])
                #expect(outcomes.map { $0["position"] as? Int } == [1])
                #expect(try await client.send(.get, "/v1/accounts/ana", key: TestKeys.reader).status == .ok)
                // A stream whose client left gives its slot back.
                try await feedStreams.removeFirst().close()
                #expect(try await Self.eventually(ok, "/v1/changes?wait=1", key: TestKeys.feed, port: port))
                for channel in feedStreams + [mirrorStream] { try await channel.close() }
            }
        }
    }

    @Test func aCursorPastTheLogsEndIsRefused() async throws {
        try await withTemporaryDirectory { directory in
            var logger = Logger(label: "test")
            logger.logLevel = .critical
            let app = try await LedgerServer.application(configuration: try LedgerServerTests.configuration(in: directory), logger: logger)
            try await app.test(.live) { client in
                _ = try await client.post(events: [Lines.added("e1", "ana", payment: "A1", product: "com.example.tenhints")])
                #expect(try await client.send(.get, "/v1/changes?after=1", key: TestKeys.feed).status == .ok)
                #expect(try await client.send(.get, "/v1/changes?after=1@1767225600.000000000.YW5h", key: TestKeys.feed).status == .ok)
                for cursor in ["2", "18446744073709551615", "2.YW5h", "2@1767225600.000000000.YW5h"] {
                    let page = try await client.send(.get, "/v1/changes?after=\(cursor)", key: TestKeys.feed)
                    #expect(page.status == .badRequest, "\(cursor)")
                    #expect(page.errorCode == "badRequest")
                }
                let port = try #require(client.port)
                #expect(try await Self.status("/v1/changes/stream", key: TestKeys.feed, port: port, lastEventID: "9.YW5h") == "HTTP/1.1 400 Bad Request")
                #expect(try await Self.status("/v1/changes/stream", key: TestKeys.feed, port: port, lastEventID: "1.YW5h") == "HTTP/1.1 200 OK")
            }
        }
    }
}
