import Synchronization

/// One extension of the proof tree at a time, the others waiting their turn in order: two
/// would work out the same leaves, and all but one would find its batch stale. A turn is one
/// batch, so that a follower chasing a busy log never keeps a checkpoint's signing waiting for
/// more than that.
final class ProofTreeTurns: Sendable {
    private struct State {
        var taken = false
        var waiting: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Mutex(State())

    /// Runs `body` in its turn.
    func inTurn<Result: Sendable>(_ body: () async throws -> Result) async throws -> Result {
        await take()
        defer { release() }
        return try await body()
    }

    private func take() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state in
                if state.taken {
                    state.waiting.append(continuation)
                    return false
                }
                state.taken = true
                return true
            }
            if now { continuation.resume() }
        }
    }

    private func release() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard !state.waiting.isEmpty else {
                state.taken = false
                return nil
            }
            return state.waiting.removeFirst()
        }
        next?.resume()
    }
}
