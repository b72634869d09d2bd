/// The log's records from a position on, as an async sequence. Records are read in chunks, each
/// in its own short read transaction; the sequence ends at the last record committed when
/// iteration reaches it.
public struct LogRecords: AsyncSequence, Sendable {
    public typealias Element = LogRecord

    let log: LogReader
    let start: UInt64

    public struct AsyncIterator: AsyncIteratorProtocol {
        let log: LogReader
        var next: UInt64
        var buffer: [LogRecord] = []
        var index = 0
        var finished = false

        public mutating func next() async throws -> LogRecord? {
            if index == buffer.count {
                guard !finished else { return nil }
                let last = try log.lastPosition()
                guard next <= last else {
                    finished = true
                    return nil
                }
                let end = Swift.min(last, next + UInt64(LogReader.chunkSize) - 1)
                var chunk: [LogRecord] = []
                try log.forEachRecord(from: next, through: end) { chunk.append($0) }
                buffer = chunk
                index = 0
                next = end + 1
            }
            defer { index += 1 }
            return buffer[index]
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(log: log, next: Swift.max(start, 1))
    }
}
