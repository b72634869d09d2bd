/// The results of `Ledger.submit(lines:)`: one per line of the request or file, in order, once
/// the commit that holds the lines' events is durable. A line that did not decode keeps the
/// rejection it got before the ledger; the others get the ledger's outcome.
public struct PendingLines: Sendable {
    /// Each line's rejection before the ledger, or nil for a line whose event went to it.
    let rejections: [LedgerError?]
    /// How many lines went to the ledger.
    let events: Int
    let appends: PendingAppends

    /// Throws as `PendingAppends.results()` does: nothing of the lines was appended then.
    public func results() async throws -> [AppendResult] {
        let outcomes = try await appends.results()
        guard outcomes.count == events else {
            throw StorageError(.io, "the ledger answered \(outcomes.count) outcomes for \(events) events")
        }
        var results: [AppendResult] = []
        results.reserveCapacity(rejections.count)
        var next = outcomes.makeIterator()
        for rejection in rejections {
            if let rejection {
                results.append(.failure(rejection))
            } else if let outcome = next.next() {
                results.append(outcome)
            }
        }
        return results
    }
}

extension Ledger {
    /// Appends the lines of a request or a file: each decoded into an event, or already
    /// rejected (it did not decode). The events go to the ledger in one submission, in order;
    /// the answer has one result per line. `submit(lines:)` to pipeline.
    public func append(lines: [Result<Event, LedgerError>]) async throws -> [AppendResult] {
        try await submit(lines: lines).results()
    }

    /// Queues the lines' events as `submit(contentsOf:)` does; `results()` merges the ledger's
    /// outcomes with the lines rejected before it.
    public func submit(lines: [Result<Event, LedgerError>]) async throws -> PendingLines {
        var events: [Event] = []
        events.reserveCapacity(lines.count)
        let rejections = lines.map { line -> LedgerError? in
            switch line {
            case .success(let event):
                events.append(event)
                return nil
            case .failure(let error):
                return error
            }
        }
        return PendingLines(rejections: rejections, events: events.count, appends: try await submit(contentsOf: events))
    }
}
