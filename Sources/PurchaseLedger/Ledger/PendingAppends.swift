import Synchronization

/// Appends submitted to the ledger, awaiting their commit. Submitted in order, applied in
/// that order: a producer that submits several batches one after the other can wait for
/// their results later and still have them checked and logged in submission order.
public final class PendingAppends: Sendable {
    private enum State {
        case pending
        case waiting(CheckedContinuation<[AppendResult], any Error>)
        case done(Result<[AppendResult], any Error>)
        case taken
    }

    private let state = Mutex(State.pending)
    /// Where to withdraw the submission from when the waiting task is cancelled.
    private let withdraw: (@Sendable () -> Void)?

    init(withdraw: (@Sendable () -> Void)? = nil) {
        self.withdraw = withdraw
    }

    init(failure: any Error) {
        withdraw = nil
        state.withLock { $0 = .done(.failure(failure)) }
    }

    init(results: [AppendResult]) {
        withdraw = nil
        state.withLock { $0 = .done(.success(results)) }
    }

    /// The results of `parts`, in order, once each is complete; the first failure otherwise
    /// (the parts before it are committed: a submission that holds a forget commits in parts).
    convenience init(joining parts: [PendingAppends]) {
        self.init()
        Task { [self] in
            var results: [AppendResult] = []
            do {
                for part in parts { results += try await part.results() }
                complete(.success(results))
            } catch {
                complete(.failure(error))
            }
        }
    }

    /// One result per submitted event, once the commit that holds them is durable. Throws when
    /// the storage failed (nothing of the submission was written) or the ledger was closed.
    ///
    /// If the waiting task is cancelled before the writer took the submission, the submission
    /// is withdrawn and this throws `CancellationError`: nothing of it was appended. Once the
    /// writer took it, cancellation changes nothing and the results are returned: an event is
    /// never appended without its outcome being reported, nor reported twice. Call it once.
    public func results() async throws -> [AppendResult] {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let ready: Result<[AppendResult], any Error>? = state.withLock { state in
                    switch state {
                    case .pending:
                        state = .waiting(continuation)
                        return nil
                    case .done(let result):
                        state = .taken
                        return result
                    case .waiting, .taken:
                        preconditionFailure("PendingAppends.results() called twice")
                    }
                }
                if let ready { continuation.resume(with: ready) }
            }
        } onCancel: {
            withdraw?()
        }
    }

    /// Completes the submission; false when it was already completed (withdrawn).
    @discardableResult
    func complete(_ result: Result<[AppendResult], any Error>) -> Bool {
        let (completed, waiting): (Bool, CheckedContinuation<[AppendResult], any Error>?) = state.withLock { state in
            switch state {
            case .pending:
                state = .done(result)
                return (true, nil)
            case .waiting(let continuation):
                state = .taken
                return (true, continuation)
            case .done, .taken:
                return (false, nil)
            }
        }
        waiting?.resume(with: result)
        return completed
    }
}
