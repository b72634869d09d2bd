/// Runs `body`, failing if it takes longer than `limit`; `onTimeout` then makes it end (it is
/// awaited before this returns).
public func withTimeout<R: Sendable>(
    _ limit: Duration, onTimeout: @escaping @Sendable () -> Void = {}, _ body: @escaping @Sendable () async throws -> R
) async throws -> R {
    try await withThrowingTaskGroup(of: R?.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: limit)
            onTimeout()
            return nil
        }
        defer { group.cancelAll() }
        guard let result = try await group.next(), let value = result else {
            throw TestFailure("took longer than \(limit)")
        }
        return value
    }
}
