/// The projections in the interchange format's `ledger replay --json` shape.
extension LedgerState {
    /// `{"position": N, "accounts": {...}}`, accounts and balance items in UTF-8 order; with
    /// `account`, only that account (and `{}` when the log has no event of it).
    public func replayJSON(asOf time: Timestamp = .now(), account: String? = nil) -> String {
        var writer = JSONWriter(spaced: true, capacity: 4096)
        writer.beginObject()
        writer.member("position", Int64(position))
        writer.key("accounts")
        writer.beginObject()
        let selected = account.map { [UTF8Key($0)] } ?? accounts.keys.sorted()
        for id in selected {
            guard let projection = projection(of: id, asOf: time) else { continue }
            writer.key(id.string)
            projection.write(to: &writer)
        }
        writer.endObject()
        writer.endObject()
        return writer.string
    }
}

extension AccountProjection {
    /// What an account with no event owns: nothing.
    public static func empty(account: String) -> AccountProjection {
        AccountProjection(account: account, entitlements: [], balances: [:], unfinished: [])
    }

    /// `{"account": "u1", "position": 42, "entitlements": [...], "balances": {...}, "unfinished": [...]}`.
    public func json(position: UInt64) -> String {
        var writer = JSONWriter(spaced: true)
        writer.beginObject()
        writer.member("account", account)
        writer.member("position", Int64(position))
        writeMembers(to: &writer)
        writer.endObject()
        return writer.string
    }

    /// `{"entitlements": [...], "balances": {...}, "unfinished": [...]}`.
    public var json: String {
        var writer = JSONWriter(spaced: true)
        write(to: &writer)
        return writer.string
    }

    func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writeMembers(to: &writer)
        writer.endObject()
    }

    private func writeMembers(to writer: inout JSONWriter) {
        writer.key("entitlements")
        writer.beginArray()
        for product in entitlements { writer.string(product) }
        writer.endArray()
        writer.key("balances")
        writer.beginObject()
        for item in balances.keys.sorted(by: utf8Order) {
            writer.member(item, balances[item]!)
        }
        writer.endObject()
        writer.key("unfinished")
        writer.beginArray()
        for entry in unfinished {
            writer.beginObject()
            writer.member("payment", entry.payment)
            writer.member("product", entry.product)
            writer.member("state", entry.state.rawValue)
            writer.member("transaction", ifPresent: entry.transaction)
            writer.key("downloads")
            writer.beginArray()
            for download in entry.downloads {
                writer.beginObject()
                writer.member("id", download.id)
                writer.member("state", download.state.rawValue)
                writer.member("progress", download.progress)
                writer.endObject()
            }
            writer.endArray()
            writer.endObject()
        }
        writer.endArray()
    }
}
