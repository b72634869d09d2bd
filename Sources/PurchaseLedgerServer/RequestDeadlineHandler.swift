import NIOCore
import NIOHTTPTypes

/// Closes a connection whose request is not read whole (head to end) within `timeout`, and one
/// whose client closed its side while its answer is due.
///
/// The idle timeout cuts a client that sends nothing; this cuts one that starts a request and
/// then trickles or stops, which would otherwise hold its connection and a body buffer of up
/// to `limits.bodyBytes` for as long as it likes. The clock runs only while the client owes
/// bytes: from a request's head to its end, and for a pipelined request (one whose head came
/// while the server was still answering the one before) from the moment that answer is
/// written, since the server reads nothing more until then. The time the server takes to
/// answer is never the client's.
final class RequestDeadlineHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private let timeout: TimeAmount
    private var deadline: Scheduled<Void>?
    /// Requests whose head was read and whose answer is not written whole yet.
    private var unanswered = 0
    /// The request being read waits behind an unanswered one: its clock starts when that is.
    private var waitingToBeRead = false

    init(timeout: TimeAmount) {
        self.timeout = timeout
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head:
            unanswered += 1
            if unanswered == 1 {
                startClock(context)
            } else {
                waitingToBeRead = true
            }
        case .body:
            break
        case .end:
            stopClock()
            waitingToBeRead = false
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) {
            unanswered = max(0, unanswered - 1)
            if waitingToBeRead {
                waitingToBeRead = false
                startClock(context)
            }
        }
        context.write(data, promise: promise)
    }

    /// A client that closes its side while an answer is due has left (an HTTP/1.1 client does
    /// not half-close while it awaits one): the connection is closed, so that work for it (an
    /// expensive read, `ExpensiveReads`) sees it gone and stops.
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case ChannelEvent.inputClosed = event, unanswered > 0 {
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        stopClock()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        stopClock()
    }

    private func startClock(_ context: ChannelHandlerContext) {
        deadline?.cancel()
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        deadline = context.eventLoop.scheduleTask(in: timeout) {
            loopBound.value.close(promise: nil)
        }
    }

    private func stopClock() {
        deadline?.cancel()
        deadline = nil
    }
}
