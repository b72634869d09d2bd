/// The projections in the interchange format's `ledger replay --json` shape.
extension LedgerState {
    /// `{"position": N, "accounts": {...}}`, accounts and balance items in UTF-8 order; with
    /// `account`, only that account (and `{}` when the log has no event of it).
    public func replayJSON(
        asOf time: Timestamp = .now(), account: String? = nil, excluding environments: Set<StoreEnvironment> = [],
        entitlements: [Catalog.Entitlement] = []
    ) -> String {
        var document: [UInt8] = []
        writeReplayJSON(asOf: time, account: account, excluding: environments, entitlements: entitlements) { document += $0 }
        return String(decoding: document, as: UTF8.self)
    }

    /// The same document, handed to `output` in pieces as it is written
    /// (`AccountProjection.writeReplayJSON`).
    public func writeReplayJSON(
        asOf time: Timestamp = .now(), account: String? = nil, excluding environments: Set<StoreEnvironment> = [],
        entitlements: [Catalog.Entitlement] = [], to output: ([UInt8]) throws -> Void
    ) rethrows {
        let selected = account.map { [UTF8Key($0)] } ?? accounts.keys.sorted()
        try AccountProjection.writeReplayJSON(
            position: position,
            selected.lazy.compactMap { projection(of: $0, asOf: time, excluding: environments, entitlements: entitlements) }, to: output)
    }
}

extension AccountProjection {
    /// `ledger replay --json`'s document: `{"position": N, "accounts": {…}}` with these
    /// projections, in the order given (computed as they are written, when lazy).
    public static func replayJSON(position: UInt64, _ projections: some Sequence<AccountProjection>) -> String {
        var document: [UInt8] = []
        writeReplayJSON(position: position, projections) { document += $0 }
        return String(decoding: document, as: UTF8.self)
    }

    /// The same document, handed to `output` in pieces of about `chunkSize` bytes as it is
    /// written: the replay of every account is never held whole, nor copied into a `String`.
    public static func writeReplayJSON(
        position: UInt64, _ projections: some Sequence<AccountProjection>, chunkSize: Int = 1 << 16, to output: ([UInt8]) throws -> Void
    ) rethrows {
        var writer = JSONWriter(spaced: true, capacity: chunkSize + 4096)
        writer.beginObject()
        writer.member("position", Int64(position))
        writer.key("accounts")
        writer.beginObject()
        for projection in projections {
            writer.key(projection.account)
            projection.write(to: &writer)
            if writer.bytes.count >= chunkSize {
                try output(writer.bytes)
                writer.removeAll()
            }
        }
        writer.endObject()
        writer.endObject()
        try output(writer.bytes)
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

    /// The account answer's object with more members after its own (a proof-carrying
    /// answer's `proof`).
    package func json(position: UInt64, appending extra: (inout JSONWriter) -> Void) -> String {
        var writer = JSONWriter(spaced: true)
        writer.beginObject()
        writer.member("account", account)
        writer.member("position", Int64(position))
        writeMembers(to: &writer)
        extra(&writer)
        writer.endObject()
        return writer.string
    }

    /// `ledger replay --json`'s document of this account alone, its object with more members.
    package func replayJSON(position: UInt64, appending extra: (inout JSONWriter) -> Void) -> String {
        var writer = JSONWriter(spaced: true)
        writer.beginObject()
        writer.member("position", Int64(position))
        writer.key("accounts")
        writer.beginObject()
        writer.key(account)
        writer.beginObject()
        writeMembers(to: &writer)
        extra(&writer)
        writer.endObject()
        writer.endObject()
        writer.endObject()
        return writer.string
    }

    /// The account answer's object (`json(position:)`), into `writer`.
    func write(to writer: inout JSONWriter, position: UInt64) {
        writer.beginObject()
        writer.member("account", account)
        writer.member("position", Int64(position))
        writeMembers(to: &writer)
        writer.endObject()
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
        if !namedEntitlements.isEmpty {
            // The catalog's names, right after the product-level answer they summarize.
            writer.key("namedEntitlements")
            writer.beginObject()
            for entitlement in namedEntitlements { entitlement.write(to: &writer) }
            writer.endObject()
        }
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
            writer.member("environment", ifPresent: entry.environment?.rawValue)
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
        // The store's side, only where the store reported: an account without store events keeps
        // the first version's shape.
        if !subscriptions.isEmpty {
            writer.key("subscriptions")
            writer.beginArray()
            for subscription in subscriptions { subscription.write(to: &writer) }
            writer.endArray()
        }
        if !storeTransactions.isEmpty {
            writer.key("storeTransactions")
            writer.beginArray()
            for purchase in storeTransactions { purchase.write(to: &writer) }
            writer.endArray()
        }
        writer.member("consumptionConsent", ifPresent: consumptionConsent)
        if let appTransaction {
            writer.key("appTransaction")
            writer.beginObject()
            writer.member("appTransaction", appTransaction.appTransaction)
            appTransaction.writeDetails(to: &writer)
            writer.endObject()
        }
        if let timeline {
            writer.key("timeline")
            writer.beginArray()
            for product in timeline { product.write(to: &writer) }
            writer.endArray()
        }
    }
}

extension NamedEntitlementStatus {
    /// `"pro": {"active": true, "product"?, "transaction"?, "expiresAt"?, "status"?,
    /// "willRenew"?}`, as a member of `namedEntitlements`; `status` by name.
    func write(to writer: inout JSONWriter) {
        writer.key(name)
        writer.beginObject()
        writer.member("active", isActive)
        writer.member("product", ifPresent: product)
        writer.member("transaction", ifPresent: transaction)
        writer.member("expiresAt", ifPresent: expiresAt)
        writer.member("status", ifPresent: status.map { "\($0)" })
        writer.member("willRenew", ifPresent: willRenew)
        writer.endObject()
    }
}

extension ProductTimeline {
    /// `{"product": …, "intervals": [{"from"?, "fromCause", "until"?, "untilCause"?,
    /// "transaction"?, "status"?}]}`; `status` by name.
    func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.member("product", product)
        writer.key("intervals")
        writer.beginArray()
        for interval in intervals {
            writer.beginObject()
            writer.member("from", ifPresent: interval.from)
            writer.member("fromCause", interval.fromCause.rawValue)
            writer.member("until", ifPresent: interval.until)
            writer.member("untilCause", ifPresent: interval.untilCause?.rawValue)
            writer.member("transaction", ifPresent: interval.transaction)
            writer.member("status", ifPresent: interval.status.map { "\($0)" })
            writer.endObject()
        }
        writer.endArray()
        writer.endObject()
    }
}

extension SubscriptionStatus {
    /// `{"group": …, "originalTransaction": …, "transaction": …, "product": …, "status": 1,
    /// "statusName": "active", "expiresAt": …, "gracePeriodEndsAt": …, "willRenew": …,
    /// "renewsTo": …, "environment": …, "billingPlanType": …, "commitment": {"period",
    /// "periods", "expiresAt", "price", "renewsTo", "willRenew"}, "renewal": {…the renewal
    /// info's fields as in the event…}}`, the optional members only when known.
    func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.member("group", group)
        writer.member("originalTransaction", originalTransaction)
        writer.member("transaction", transaction)
        writer.member("product", product)
        writer.member("status", Int64(status.rawValue))
        writer.member("statusName", "\(status)")
        writer.member("expiresAt", ifPresent: expiresAt)
        writer.member("gracePeriodEndsAt", ifPresent: gracePeriodEndsAt)
        writer.member("willRenew", ifPresent: willRenew)
        writer.member("renewsTo", ifPresent: renewsTo)
        writer.member("environment", ifPresent: environment?.rawValue)
        writer.member("billingPlanType", ifPresent: billingPlanType)
        if let commitment {
            writer.key("commitment")
            writer.beginObject()
            writer.member("period", ifPresent: commitment.period)
            writer.member("periods", ifPresent: commitment.periods)
            writer.member("expiresAt", ifPresent: commitment.expiresAt)
            writer.member("price", ifPresent: commitment.price)
            writer.member("renewsTo", ifPresent: commitment.renewsTo)
            writer.member("willRenew", ifPresent: commitment.willRenew)
            writer.endObject()
        }
        if let renewal {
            // Nested, not beside the status's members: the renewal's `billingPlanType`,
            // `offerType`, … are the next period's, not the transaction in force's.
            writer.key("renewal")
            writer.beginObject()
            renewal.writeMembers(to: &writer)
            writer.endObject()
        }
        writer.endObject()
    }
}

extension StorePurchase {
    /// The report's fields as in the event (without `source`), then `revoked`.
    func write(to writer: inout JSONWriter) {
        writer.beginObject()
        report.writeMembers(to: &writer)
        writer.member("revoked", isRevoked)
        writer.endObject()
    }
}
