import Synchronization

/// A forget this process learned of, its own or another process's (on shared storage): where
/// the `forgotten` record is and which names it renamed. A component that keeps names in memory
/// (a feed's window, a webhook queue, a file of its own) renames or drops what it holds under
/// the old ones: "forgetting" means every byte this process writes or answers afterwards.
public struct ForgetNotice: Sendable, Hashable {
    /// A name the forget renamed: an account's id or a customer's token or app transaction id.
    public struct Rename: Sendable, Hashable {
        public let old: String
        public let new: String
    }

    public let position: UInt64
    public let renames: [Rename]

    /// The renamed names, by their old bytes.
    package var newNames: [UTF8Key: String] {
        Dictionary(renames.map { (UTF8Key($0.old), $0.new) }, uniquingKeysWith: { first, _ in first })
    }
}

/// The forgets from the moment it was made, kept until taken. Each is in the mailbox before
/// `Ledger.forgetGeneration` moves: a component that takes its mail whenever it is asked for
/// something never answers with a name that a forget, as far as its asker can know, renamed.
/// (A stream of notices cannot promise that: its reader may not have run yet.)
public final class ForgetMailbox: Sendable {
    private let pending = Mutex<[ForgetNotice]>([])
    /// Wakes a component that renames what it holds without waiting to be asked; at most one
    /// wake-up is kept, however many forgets came.
    public let arrivals: AsyncStream<Void>
    private let arrived: AsyncStream<Void>.Continuation

    init() {
        (arrivals, arrived) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    deinit {
        arrived.finish()
    }

    fileprivate func deliver(_ notice: ForgetNotice) {
        pending.withLock { $0.append(notice) }
        arrived.yield()
    }

    /// The forgets not taken yet, oldest first; the mailbox is empty afterwards.
    public func take() -> [ForgetNotice] {
        pending.withLock { pending in
            defer { pending.removeAll() }
            return pending
        }
    }
}

/// Hands each forget to every subscriber and mailbox, and counts them: a component that only
/// needs to know whether a forget happened since it last looked compares `generation`.
final class ForgetNotices: Sendable {
    private struct WeakMailbox {
        weak var mailbox: ForgetMailbox?
    }

    private struct State {
        var generation: UInt64 = 0
        var subscribers: [UInt64: AsyncStream<ForgetNotice>.Continuation] = [:]
        var nextSubscriber: UInt64 = 0
        var mailboxes: [WeakMailbox] = []
    }

    private let state = Mutex(State())

    /// How many forgets this process learned of: it moves after the renames are in memory.
    var generation: UInt64 { state.withLock { $0.generation } }

    func publish(position: UInt64, renames: [Forgetting.Rename]) {
        let notice = ForgetNotice(position: position, renames: renames.map { ForgetNotice.Rename(old: $0.old, new: $0.new) })
        let subscribers = state.withLock { state in
            // The mail first: whoever sees the generation move finds the notice in every mailbox.
            state.mailboxes.removeAll { $0.mailbox == nil }
            for box in state.mailboxes { box.mailbox?.deliver(notice) }
            state.generation += 1
            return Array(state.subscribers.values)
        }
        for subscriber in subscribers { subscriber.yield(notice) }
    }

    /// A mailbox for the forgets from now on, until it is dropped.
    func mailbox() -> ForgetMailbox {
        let mailbox = ForgetMailbox()
        state.withLock { $0.mailboxes.append(WeakMailbox(mailbox: mailbox)) }
        return mailbox
    }

    /// The forgets from now on, until the stream is dropped.
    func stream() -> AsyncStream<ForgetNotice> {
        let (stream, continuation) = AsyncStream.makeStream(of: ForgetNotice.self, bufferingPolicy: .unbounded)
        let id = state.withLock { state in
            state.nextSubscriber += 1
            state.subscribers[state.nextSubscriber] = continuation
            return state.nextSubscriber
        }
        continuation.onTermination = { [weak self] _ in
            self?.state.withLock { _ = $0.subscribers.removeValue(forKey: id) }
        }
        return stream
    }
}

extension Ledger {
    /// The forgets this process learns of from now on (its own, and on shared storage another
    /// process's), each once its renames are in the projections: for a component that keeps
    /// names of its own (a feed's window, a queue of deliveries, an audit file).
    public func forgets() -> AsyncStream<ForgetNotice> {
        live.forgets.stream()
    }

    /// A mailbox for the forgets this process learns of from now on: each is in it before
    /// `forgetGeneration` moves (`ForgetMailbox`). For a component that must never answer with
    /// a name a forget renamed once its asker could know of the forget (the feed's window).
    public func forgetMailbox() -> ForgetMailbox {
        live.forgets.mailbox()
    }

    /// How many forgets this process learned of: compared before writing out what was read
    /// earlier (a page of the feed, a delivery), it says whether a name in it may be stale.
    public var forgetGeneration: UInt64 {
        live.forgets.generation
    }

    /// The names the `forgotten` record at `position` renamed, as this process knew them.
    public func renames(ofForgetAt position: UInt64) throws -> [ForgetNotice.Rename] {
        try log.renames(ofForgetAt: position).map { ForgetNotice.Rename(old: $0.old, new: $0.new) }
    }
}
