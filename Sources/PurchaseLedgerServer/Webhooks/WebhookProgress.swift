import Foundation
import PurchaseLedger

/// What one endpoint's deliveries left in the ledger's storage (`Ledger.updateFeedState`),
/// under `webhooks/<name>/…`: written by the ledger's writer, durable as events are, so that a
/// restart (or another server taking the lease) resumes where delivery was.
enum WebhookState {
    static func progressKey(_ endpoint: String) -> String { "webhooks/\(endpoint)/progress" }
    static func leaseKey(_ endpoint: String) -> String { "webhooks/\(endpoint)/lease" }
    static func parkedPrefix(_ endpoint: String) -> String { "webhooks/\(endpoint)/parked/" }
    /// Parked changes asked to be sent again (`ledger webhooks retry`), in the parked form.
    static func retryPrefix(_ endpoint: String) -> String { "webhooks/\(endpoint)/retry/" }

    /// Every change at or before `checkpoint` was acknowledged or parked; so were those in
    /// `done` (after it), which are not sent again.
    struct Progress: Codable, Sendable, Equatable {
        var checkpoint: String
        var done: [String]

        static let start = Progress(checkpoint: FeedCursor.start.description, done: [])
    }

    /// A change the endpoint did not acknowledge in `maxAttempts`: kept with the last error and
    /// its body, to be sent again (`ledger webhooks retry`) or dropped (`skip`).
    struct Parked: Codable, Sendable, Equatable {
        var id: String
        var account: String
        var attempts: Int
        var error: String
        var parkedAt: String
        var body: String
    }

    /// Which server delivers for the endpoint, until when (milliseconds since 1970).
    struct Lease: Codable, Sendable, Equatable {
        var holder: String
        var until: Int64
    }

    static func decode<Value: Decodable>(_ type: Value.Type, _ bytes: [UInt8]?, key: String) throws -> Value? {
        guard let bytes else { return nil }
        do {
            return try JSONDecoder().decode(Value.self, from: Data(bytes))
        } catch {
            throw StorageError(.damaged, "the stored \(key) cannot be read: \(error)")
        }
    }

    static func encode(_ value: some Encodable) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        // Encoding these plain structs cannot fail.
        return (try? Array(encoder.encode(value))) ?? []
    }
}
