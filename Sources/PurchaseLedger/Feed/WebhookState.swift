/// What one webhook endpoint's deliveries (the server's) left in the ledger's storage
/// (`Ledger.updateFeedState`), under `webhooks/<name>/…`: written by the ledger's writer,
/// durable as events are, so that a restart (or another server taking the lease) resumes where
/// delivery was. The server writes it and `ledger webhooks` reads it: the layout is here, once.
package enum WebhookState {
    package static let prefix = "webhooks/"
    package static func progressKey(_ endpoint: String) -> String { "webhooks/\(endpoint)/progress" }
    package static func leaseKey(_ endpoint: String) -> String { "webhooks/\(endpoint)/lease" }
    package static func parkedPrefix(_ endpoint: String) -> String { "webhooks/\(endpoint)/parked/" }
    /// Parked changes asked to be sent again (`ledger webhooks retry`), in the parked form.
    package static func retryPrefix(_ endpoint: String) -> String { "webhooks/\(endpoint)/retry/" }

    /// Whether `key` is an endpoint's lease: the server holding it is the source's, so a copy
    /// of the ledger leaves it out.
    package static func isLeaseKey(_ key: String) -> Bool {
        key.hasPrefix(prefix) && key.hasSuffix("/lease")
    }

    /// Whether `key` holds a change to deliver (parked, or asked to be sent again): its body
    /// names its account, so forgetting the account removes it (`Forgetting`).
    package static func isDelivery(_ key: String) -> Bool {
        let parts = key.split(separator: "/", maxSplits: 3, omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "webhooks" && (parts[2] == "parked" || parts[2] == "retry")
    }

    /// The endpoint of a parked change's key, nil for any other key.
    package static func parkedEndpoint(ofKey key: String) -> String? {
        let parts = key.split(separator: "/", maxSplits: 3, omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0] == "webhooks", parts[2] == "parked" else { return nil }
        return String(parts[1])
    }

    /// Every change at or before `checkpoint` was acknowledged or parked; so were those in
    /// `done` (after it), which are not sent again.
    package struct Progress: Sendable, Equatable {
        package var checkpoint: String
        package var done: [String]

        package init(checkpoint: String, done: [String]) {
            self.checkpoint = checkpoint
            self.done = done
        }

        package static let start = Progress(checkpoint: FeedCursor.start.description, done: [])
    }

    /// A change the endpoint did not acknowledge in `maxAttempts`: kept with the last error and
    /// its body, to be sent again (`ledger webhooks retry`) or dropped (`skip`).
    package struct Parked: Sendable, Equatable {
        package var id: String
        package var account: String
        package var attempts: Int
        package var error: String
        package var parkedAt: String
        package var body: String

        package init(id: String, account: String, attempts: Int, error: String, parkedAt: String, body: String) {
            self.id = id
            self.account = account
            self.attempts = attempts
            self.error = error
            self.parkedAt = parkedAt
            self.body = body
        }
    }

    /// Which server delivers for the endpoint, until when (milliseconds since 1970).
    package struct Lease: Sendable, Equatable {
        package var holder: String
        package var until: Int64

        package init(holder: String, until: Int64) {
            self.holder = holder
            self.until = until
        }
    }

    /// The value stored under `key` (nil when none is); a value that does not decode is damage.
    package static func decode<Value: WebhookStateRecord>(_ type: Value.Type, _ bytes: [UInt8]?, key: String) throws -> Value? {
        guard let bytes else { return nil }
        guard let value = Value(storedBytes: bytes) else { throw StorageError(.damaged, "the stored \(key) cannot be read") }
        return value
    }

    package static func encode(_ value: some WebhookStateRecord) -> [UInt8] {
        value.storedBytes
    }
}

/// A record of `WebhookState`, stored as a JSON object.
package protocol WebhookStateRecord: Sendable {
    /// Nil when `storedBytes` is not such a record.
    init?(storedBytes: [UInt8])
    var storedBytes: [UInt8] { get }
}

/// The fields of a stored JSON object; nil when the bytes are not one.
private func storedObject(_ bytes: [UInt8]) -> [UTF8Key: JSONValue]? {
    guard case .object(let fields)? = try? JSONParser.parse(bytes) else { return nil }
    return fields
}

/// A JSON object whose members `write` writes.
private func storedJSON(_ write: (inout JSONWriter) -> Void) -> [UInt8] {
    var writer = JSONWriter()
    writer.beginObject()
    write(&writer)
    writer.endObject()
    return Array(writer.string.utf8)
}

extension [UTF8Key: JSONValue] {
    fileprivate func string(_ name: UTF8Key) -> String? {
        if case .string(let value)? = self[name] { value } else { nil }
    }

    fileprivate func integer(_ name: UTF8Key) -> Int64? {
        if case .number(let value)? = self[name] { value.integer } else { nil }
    }
}

extension WebhookState.Progress: WebhookStateRecord {
    package init?(storedBytes: [UInt8]) {
        guard let fields = storedObject(storedBytes) else { return nil }
        self.init(fields: fields)
    }

    package var storedBytes: [UInt8] { storedJSON { write(to: &$0) } }

    private init?(fields: [UTF8Key: JSONValue]) {
        guard let checkpoint = fields.string("checkpoint"), case .array(let done)? = fields["done"] else { return nil }
        var cursors: [String] = []
        for value in done {
            guard case .string(let cursor) = value else { return nil }
            cursors.append(cursor)
        }
        self.init(checkpoint: checkpoint, done: cursors)
    }

    private func write(to writer: inout JSONWriter) {
        writer.member("checkpoint", checkpoint)
        writer.key("done")
        writer.beginArray()
        for cursor in done { writer.string(cursor) }
        writer.endArray()
    }
}

extension WebhookState.Parked: WebhookStateRecord {
    package init?(storedBytes: [UInt8]) {
        guard let fields = storedObject(storedBytes) else { return nil }
        self.init(fields: fields)
    }

    package var storedBytes: [UInt8] { storedJSON { write(to: &$0) } }

    private init?(fields: [UTF8Key: JSONValue]) {
        guard let id = fields.string("id"), let account = fields.string("account"), let attempts = fields.integer("attempts"),
              let error = fields.string("error"), let parkedAt = fields.string("parkedAt"), let body = fields.string("body") else { return nil }
        self.init(id: id, account: account, attempts: Int(clamping: attempts), error: error, parkedAt: parkedAt, body: body)
    }

    private func write(to writer: inout JSONWriter) {
        writer.member("id", id)
        writer.member("account", account)
        writer.member("attempts", Int64(attempts))
        writer.member("error", error)
        writer.member("parkedAt", parkedAt)
        writer.member("body", body)
    }
}

extension WebhookState.Lease: WebhookStateRecord {
    package init?(storedBytes: [UInt8]) {
        guard let fields = storedObject(storedBytes) else { return nil }
        self.init(fields: fields)
    }

    package var storedBytes: [UInt8] { storedJSON { write(to: &$0) } }

    private init?(fields: [UTF8Key: JSONValue]) {
        guard let holder = fields.string("holder"), let until = fields.integer("until") else { return nil }
        self.init(holder: holder, until: until)
    }

    private func write(to writer: inout JSONWriter) {
        writer.member("holder", holder)
        writer.member("until", until)
    }
}

extension WebhookState {
    /// Forgetting (`Forgetting.perform`, in the forget's write): what the endpoints' records hold
    /// of the renamed names (`names`: new names by old bytes), whatever the form. A parked or
    /// retried delivery that is about a renamed account or mentions a renamed name anywhere (its
    /// body's projection names a customer's token, JSON-escaped; its id and key name the account
    /// in base64url) is removed: it cannot be delivered any more. A progress record's cursors
    /// that name a renamed account are lowered (`FeedCursor.lowered`): its changes are delivered
    /// again, under the pseudonym. `needles` (the old names' bytes) catch a record too damaged
    /// to read.
    static func forget(_ names: [UTF8Key: String], needles: [[UInt8]], writer: any LedgerStorageWriter) throws {
        func isRenamed(_ name: String?) -> Bool { name.map { names[UTF8Key($0)] != nil } ?? false }
        func cursorNames(_ text: some StringProtocol) -> Bool { FeedCursor(text).map { isRenamed($0.account) } ?? false }
        func mentions(_ value: JSONValue) -> Bool {
            switch value {
            case .string(let text): isRenamed(text)
            case .array(let values): values.contains(where: mentions)
            case .object(let members): members.contains { isRenamed($0.key.string) || mentions($0.value) }
            case .null, .bool, .number: false
            }
        }
        for (key, value) in try writer.feedStates(prefix: prefix) {
            if isDelivery(key) {
                let raw = needles.contains { needle in value.withUnsafeBytes { Forgetting.occurs(needle, in: $0) } }
                guard let parked = Parked(storedBytes: value) else {
                    // Unreadable: it cannot be shown to be free of the names.
                    try writer.setFeedState(key, nil)
                    continue
                }
                let body = try? JSONParser.parse(Array(parked.body.utf8))
                if raw || isRenamed(parked.account) || cursorNames(parked.id) || cursorNames(key.split(separator: "/").last ?? "")
                    || body.map(mentions) ?? true {
                    try writer.setFeedState(key, nil)
                }
            } else if key.hasSuffix("/progress"), let progress = Progress(storedBytes: value) {
                func lowered(_ text: String) -> String {
                    FeedCursor(text)?.lowered(unless: { !isRenamed($0) }).description ?? FeedCursor.start.description
                }
                let kept = Progress(checkpoint: lowered(progress.checkpoint), done: progress.done.filter { !cursorNames($0) })
                if kept != progress { try writer.setFeedState(key, encode(kept)) }
            }
        }
    }
}
