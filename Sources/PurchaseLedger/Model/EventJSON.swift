/// Events as JSON Lines, the interchange format.
///
/// Decoding is strict about what the format names (types, required fields, ranges) and
/// ignores unknown fields. `null` is a value of the wrong type, not an absent field. Encoding is canonical:
/// fields in the spec's order, optional fields only when present, timestamps in UTC, so a
/// ledger exported, imported and exported again gives the same bytes.
extension Event {
    /// The longest JSON line `init(jsonLine:)` reads; a longer one is `invalidEvent`.
    public static let maximumJSONLineLength = EventLimits.maximumLineBytes

    /// Decodes one JSON line. Throws `invalidEvent` with a message naming the problem.
    public init(jsonLine: some StringProtocol) throws(LedgerError) {
        self = try Array(jsonLine.utf8).withUnsafeBufferPointer { buffer throws(LedgerError) in
            try Event(jsonLine: buffer)
        }
    }

    /// Decodes one JSON line from UTF-8 bytes (no trailing newline needed; `\r` is allowed).
    public init(jsonLine bytes: UnsafeBufferPointer<UInt8>) throws(LedgerError) {
        guard bytes.count <= EventLimits.maximumLineBytes else {
            throw .invalid("the line is longer than \(EventLimits.maximumLineBytes) bytes")
        }
        let value: JSONValue
        do {
            value = try JSONParser.parse(bytes)
        } catch {
            throw .invalid("not valid JSON: \(error)")
        }
        try self.init(json: value)
    }

    /// Decodes an event from a parsed JSON value.
    init(json value: JSONValue) throws(LedgerError) {
        guard case .object(let fields) = value else {
            throw .invalid("the line must be a JSON object, not \(value.typeName)")
        }
        let reader = FieldReader(fields: fields)
        let id = try reader.string("id")
        let typeName = try reader.string("type")
        let account = try reader.string("account")
        let at = try reader.timestamp("at")
        guard let type = EventType(rawValue: typeName) else {
            let known = EventType.allCases.map(\.rawValue).joined(separator: ", ")
            throw .invalid("unknown `type` \"\(typeName)\"; expected one of \(known)")
        }
        let payload: Payload
        switch type {
        case .paymentAdded:
            payload = .paymentAdded(PaymentAdded(
                payment: try reader.string("payment"),
                product: try reader.string("product"),
                quantity: try reader.optionalInt("quantity")))
        case .transactionUpdated:
            let stateName = try reader.string("state")
            guard let state = TransactionState(rawValue: stateName) else {
                let known = TransactionState.allCases.map(\.rawValue).joined(separator: ", ")
                throw .invalid("unknown transaction `state` \"\(stateName)\"; expected one of \(known)")
            }
            payload = .transactionUpdated(TransactionUpdated(
                payment: try reader.string("payment"),
                state: state,
                transaction: try reader.optionalString("transaction"),
                originalTransaction: try reader.optionalString("originalTransaction"),
                error: try reader.optionalString("error"),
                expiresAt: try reader.optionalTimestamp("expiresAt"),
                product: try reader.optionalString("product"),
                quantity: try reader.optionalInt("quantity")))
        case .downloadUpdated:
            let stateName = try reader.string("state")
            guard let state = DownloadState(rawValue: stateName) else {
                let known = DownloadState.allCases.map(\.rawValue).joined(separator: ", ")
                throw .invalid("unknown download `state` \"\(stateName)\"; expected one of \(known)")
            }
            payload = .downloadUpdated(DownloadUpdated(
                payment: try reader.string("payment"),
                download: try reader.string("download"),
                state: state,
                progress: try reader.optionalDouble("progress", bounds: [0, 1]),
                timeRemaining: try reader.optionalDouble("timeRemaining", bounds: [-1, 0])))
        case .transactionFinished:
            payload = .transactionFinished(TransactionFinished(payment: try reader.string("payment")))
        case .consumed:
            guard let amount = try reader.optionalInt64("amount") else {
                throw .invalid("missing required field `amount`")
            }
            payload = .consumed(Consumed(item: try reader.string("item"), amount: amount))
        case .revoked:
            payload = .revoked(Revoked(
                transaction: try reader.string("transaction"),
                reason: try reader.optionalString("reason")))
        case .storeTransaction:
            var fact = StoreTransaction(
                transaction: try reader.string("transaction"),
                originalTransaction: try reader.optionalString("originalTransaction"),
                product: try reader.string("product"),
                quantity: try reader.optionalInt("quantity"),
                purchasedAt: try reader.optionalTimestamp("purchasedAt"),
                expiresAt: try reader.optionalTimestamp("expiresAt"),
                subscriptionGroup: try reader.optionalString("subscriptionGroup"),
                ownership: try reader.optionalEnumeration("ownership"),
                environment: try reader.optionalEnumeration("environment"),
                price: try reader.optionalInt64("price"),
                currency: try reader.optionalString("currency"),
                storefront: try reader.optionalString("storefront"),
                revokedAt: try reader.optionalTimestamp("revokedAt"),
                revocationReason: try reader.optionalInt("revocationReason"),
                revocationType: try reader.optionalEnumeration("revocationType"),
                revocationPercentage: try reader.optionalInt("revocationPercentage"),
                upgraded: try reader.optionalBool("upgraded"),
                source: try reader.optionalString("source"),
                signed: try reader.optionalString("signed"))
            try fact.readSaleDetails(from: reader)
            payload = .storeTransaction(fact)
        case .renewalInfo:
            var info = RenewalInfo(
                originalTransaction: try reader.string("originalTransaction"),
                product: try reader.optionalString("product"),
                renewsTo: try reader.optionalString("renewsTo"),
                willRenew: try reader.optionalBool("willRenew"),
                billingRetry: try reader.optionalBool("billingRetry"),
                gracePeriodEndsAt: try reader.optionalTimestamp("gracePeriodEndsAt"),
                expirationIntent: try reader.optionalInt("expirationIntent"),
                environment: try reader.optionalEnumeration("environment"),
                source: try reader.optionalString("source"),
                signed: try reader.optionalString("signed"))
            try info.readRenewalDetails(from: reader)
            payload = .renewalInfo(info)
        case .consumptionConsent:
            guard let consented = try reader.optionalBool("consented") else {
                throw .invalid("missing required field `consented`")
            }
            payload = .consumptionConsent(ConsumptionConsent(consented: consented))
        case .consumptionRequest:
            payload = .consumptionRequest(ConsumptionRequest(
                transaction: try reader.string("transaction"),
                reason: try reader.optionalString("reason"),
                environment: try reader.optionalEnumeration("environment")))
        case .appTransaction:
            payload = .appTransaction(AppTransactionInfo(
                appTransaction: try reader.string("appTransaction"),
                originalPurchasedAt: try reader.optionalTimestamp("originalPurchasedAt"),
                originalApplicationVersion: try reader.optionalString("originalApplicationVersion"),
                applicationVersion: try reader.optionalString("applicationVersion"),
                originalPlatform: try reader.optionalString("originalPlatform"),
                preorderedAt: try reader.optionalTimestamp("preorderedAt"),
                environment: try reader.optionalEnumeration("environment"),
                signed: try reader.optionalString("signed")))
        case .transferred, .shared:
            let transfer = Transferred(
                originalTransaction: try reader.string("originalTransaction"),
                from: try reader.string("from"), to: try reader.string("to"))
            payload = type == .shared ? .shared(transfer) : .transferred(transfer)
        case .forgotten:
            payload = .forgotten(Forgotten(requestedBy: try reader.string("requestedBy")))
        case .appStoreCall:
            guard let call: AppStoreCallKind = try reader.optionalEnumeration("call") else {
                throw .invalid("missing required field `call`")
            }
            guard let outcome: AppStoreCallOutcome = try reader.optionalEnumeration("outcome") else {
                throw .invalid("missing required field `outcome`")
            }
            payload = .appStoreCall(AppStoreCall(
                call: call, transaction: try reader.string("transaction"), outcome: outcome,
                appAccountToken: try reader.optionalString("appAccountToken"), environment: try reader.optionalEnumeration("environment"),
                status: try reader.optionalInt("status"), error: try reader.optionalString("error")))
        case .consumptionAnswer:
            guard let outcome: ConsumptionAnswerOutcome = try reader.optionalEnumeration("outcome") else {
                throw .invalid("missing required field `outcome`")
            }
            payload = .consumptionAnswer(ConsumptionAnswer(
                request: try reader.string("request"),
                transaction: try reader.string("transaction"),
                outcome: outcome,
                deliveryStatus: try reader.optionalString("deliveryStatus"),
                consumptionPercentage: try reader.optionalInt("consumptionPercentage"),
                refundPreference: try reader.optionalString("refundPreference"),
                sampleContentProvided: try reader.optionalBool("sampleContentProvided"),
                status: try reader.optionalInt("status"),
                error: try reader.optionalString("error")))
        }
        let event = Event(id: id, account: account, at: at, payload: payload)
        try event.validate()
        self = event
    }

    /// The canonical JSON line of the event, without a newline.
    public var jsonLine: String {
        var writer = JSONWriter()
        write(to: &writer)
        return writer.string
    }

    func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writeMembers(to: &writer)
        writer.endObject()
    }

    /// The line's members, in the format's order, inside an object the caller opened (a leaf of
    /// the proof tree adds two after them).
    func writeMembers(to writer: inout JSONWriter) {
        writer.member("id", id)
        writer.member("type", type.rawValue)
        writer.member("account", account)
        writer.member("at", at)
        switch payload {
        case .paymentAdded(let added):
            writer.member("payment", added.payment)
            writer.member("product", added.product)
            writer.member("quantity", ifPresent: added.quantity)
        case .transactionUpdated(let update):
            writer.member("payment", update.payment)
            writer.member("state", update.state.rawValue)
            writer.member("transaction", ifPresent: update.transaction)
            writer.member("originalTransaction", ifPresent: update.originalTransaction)
            writer.member("error", ifPresent: update.error)
            writer.member("expiresAt", ifPresent: update.expiresAt)
            writer.member("product", ifPresent: update.product)
            writer.member("quantity", ifPresent: update.quantity)
        case .downloadUpdated(let download):
            writer.member("payment", download.payment)
            writer.member("download", download.download)
            writer.member("state", download.state.rawValue)
            writer.member("progress", ifPresent: download.progress)
            writer.member("timeRemaining", ifPresent: download.timeRemaining)
        case .transactionFinished(let finished):
            writer.member("payment", finished.payment)
        case .consumed(let consumed):
            writer.member("item", consumed.item)
            writer.member("amount", consumed.amount)
        case .revoked(let revoked):
            writer.member("transaction", revoked.transaction)
            writer.member("reason", ifPresent: revoked.reason)
        case .storeTransaction(let fact):
            fact.writeMembers(to: &writer)
            writer.member("source", ifPresent: fact.source)
            writer.member("signed", ifPresent: fact.signed)
        case .renewalInfo(let info):
            info.writeMembers(to: &writer)
            writer.member("source", ifPresent: info.source)
            writer.member("signed", ifPresent: info.signed)
        case .consumptionConsent(let consent):
            writer.member("consented", consent.consented)
        case .consumptionRequest(let request):
            writer.member("transaction", request.transaction)
            writer.member("reason", ifPresent: request.reason)
            writer.member("environment", ifPresent: request.environment?.rawValue)
        case .appTransaction(let info):
            writer.member("appTransaction", info.appTransaction)
            info.writeDetails(to: &writer)
            writer.member("signed", ifPresent: info.signed)
        case .transferred(let transfer), .shared(let transfer):
            writer.member("originalTransaction", transfer.originalTransaction)
            writer.member("from", transfer.from)
            writer.member("to", transfer.to)
        case .forgotten(let forgotten):
            writer.member("requestedBy", forgotten.requestedBy)
        case .appStoreCall(let call):
            writer.member("call", call.call.rawValue)
            writer.member("transaction", call.transaction)
            writer.member("outcome", call.outcome.rawValue)
            writer.member("appAccountToken", ifPresent: call.appAccountToken)
            writer.member("environment", ifPresent: call.environment?.rawValue)
            writer.member("status", ifPresent: call.status)
            writer.member("error", ifPresent: call.error)
        case .consumptionAnswer(let answer):
            writer.member("request", answer.request)
            writer.member("transaction", answer.transaction)
            writer.member("outcome", answer.outcome.rawValue)
            writer.member("deliveryStatus", ifPresent: answer.deliveryStatus)
            writer.member("consumptionPercentage", ifPresent: answer.consumptionPercentage)
            writer.member("refundPreference", ifPresent: answer.refundPreference)
            writer.member("sampleContentProvided", ifPresent: answer.sampleContentProvided)
            writer.member("status", ifPresent: answer.status)
            writer.member("error", ifPresent: answer.error)
        }
    }
}

/// Typed access to the members of a JSON object, with the spec's messages for missing and
/// mistyped fields. `null` is a value of the wrong type, not an absent field.
struct FieldReader {
    let fields: [UTF8Key: JSONValue]

    func string(_ name: String) throws(LedgerError) -> String {
        guard let value = try optionalString(name) else { throw .invalid("missing required field `\(name)`") }
        return value
    }

    func optionalString(_ name: String) throws(LedgerError) -> String? {
        guard let value = fields[UTF8Key(name)] else { return nil }
        guard case .string(let text) = value else {
            throw .invalid("`\(name)` must be a string, not \(value.typeName)")
        }
        return text
    }

    func optionalBool(_ name: String) throws(LedgerError) -> Bool? {
        guard let value = fields[UTF8Key(name)] else { return nil }
        guard case .bool(let flag) = value else {
            throw .invalid("`\(name)` must be true or false, not \(value.typeName)")
        }
        return flag
    }

    /// An array of strings.
    func optionalStrings(_ name: String) throws(LedgerError) -> [String]? {
        guard let value = fields[UTF8Key(name)] else { return nil }
        guard case .array(let elements) = value else {
            throw .invalid("`\(name)` must be an array of strings, not \(value.typeName)")
        }
        var strings: [String] = []
        for element in elements {
            guard case .string(let text) = element else {
                throw .invalid("`\(name)` must be an array of strings, not of \(element.typeName)")
            }
            strings.append(text)
        }
        return strings
    }

    /// A string naming one of `Value`'s cases.
    func optionalEnumeration<Value: RawRepresentable<String> & CaseIterable>(_ name: String) throws(LedgerError) -> Value? {
        guard let text = try optionalString(name) else { return nil }
        guard let value = Value(rawValue: text) else {
            let known = Value.allCases.map(\.rawValue).joined(separator: ", ")
            throw .invalid("unknown `\(name)` \"\(text)\"; expected one of \(known)")
        }
        return value
    }

    func timestamp(_ name: String) throws(LedgerError) -> Timestamp {
        guard let value = try optionalTimestamp(name) else { throw .invalid("missing required field `\(name)`") }
        return value
    }

    func optionalTimestamp(_ name: String) throws(LedgerError) -> Timestamp? {
        guard let text = try optionalString(name) else { return nil }
        guard let time = Timestamp(rfc3339: text) else {
            throw .invalid("`\(name)` must be an RFC 3339 timestamp such as 2026-01-31T12:00:00Z (got \"\(text)\")")
        }
        return time
    }

    func optionalInt(_ name: String) throws(LedgerError) -> Int? {
        try optionalInt64(name).map { Int($0) }
    }

    /// An integer is judged by its value: `2`, `2.0` and `2e0` are all 2. Values beyond the
    /// 64-bit range saturate (no field accepts them anyway: they fail its range or balance check).
    func optionalInt64(_ name: String) throws(LedgerError) -> Int64? {
        guard let value = fields[UTF8Key(name)] else { return nil }
        guard case .number(let number) = value else {
            throw .invalid("`\(name)` must be an integer, not \(value.typeName)")
        }
        guard let integer = number.integer else {
            throw .invalid("`\(name)` must be an integer (got \(number.literal))")
        }
        return integer
    }

    /// A number, nudged so that comparisons with `bounds` agree with its exact decimal value;
    /// finite even for literals beyond a double's range.
    func optionalDouble(_ name: String, bounds: [Int]) throws(LedgerError) -> Double? {
        guard let value = fields[UTF8Key(name)] else { return nil }
        guard case .number(let number) = value else {
            throw .invalid("`\(name)` must be a number, not \(value.typeName)")
        }
        let double = number.double(keepingOrderAgainst: bounds)
        return double.isFinite ? double : (double < 0 ? -.greatestFiniteMagnitude : .greatestFiniteMagnitude)
    }
}

extension StoreTransaction {
    /// The report's fields in the format's order, all but `source` and `signed` (the event adds
    /// them; an account's projection shows the report without).
    func writeMembers(to writer: inout JSONWriter) {
        writer.member("transaction", transaction)
        writer.member("originalTransaction", ifPresent: originalTransaction)
        writer.member("product", product)
        writer.member("quantity", ifPresent: quantity)
        writer.member("purchasedAt", ifPresent: purchasedAt)
        writer.member("expiresAt", ifPresent: expiresAt)
        writer.member("subscriptionGroup", ifPresent: subscriptionGroup)
        writer.member("ownership", ifPresent: ownership?.rawValue)
        writer.member("environment", ifPresent: environment?.rawValue)
        writer.member("price", ifPresent: price)
        writer.member("currency", ifPresent: currency)
        writer.member("storefront", ifPresent: storefront)
        writer.member("revokedAt", ifPresent: revokedAt)
        writer.member("revocationReason", ifPresent: revocationReason)
        writer.member("revocationType", ifPresent: revocationType?.rawValue)
        writer.member("revocationPercentage", ifPresent: revocationPercentage)
        writer.member("upgraded", ifPresent: upgraded)
        writer.member("originalPurchasedAt", ifPresent: originalPurchasedAt)
        writer.member("webOrderLineItem", ifPresent: webOrderLineItem)
        writer.member("storefrontId", ifPresent: storefrontId)
        writer.member("transactionReason", ifPresent: transactionReason)
        writer.member("offerType", ifPresent: offerType)
        writer.member("offerIdentifier", ifPresent: offerIdentifier)
        writer.member("offerDiscountType", ifPresent: offerDiscountType)
        writer.member("offerPeriod", ifPresent: offerPeriod)
        writer.member("appTransaction", ifPresent: appTransaction)
        writer.member("appAccountToken", ifPresent: appAccountToken)
        writer.member("billingPlanType", ifPresent: billingPlanType)
        writer.member("commitmentBillingPeriod", ifPresent: commitmentBillingPeriod)
        writer.member("commitmentBillingPeriods", ifPresent: commitmentBillingPeriods)
        writer.member("commitmentExpiresAt", ifPresent: commitmentExpiresAt)
        writer.member("commitmentPrice", ifPresent: commitmentPrice)
    }

    /// The fields Apple added in API 1.15–1.21, all optional.
    mutating func readSaleDetails(from reader: FieldReader) throws(LedgerError) {
        originalPurchasedAt = try reader.optionalTimestamp("originalPurchasedAt")
        webOrderLineItem = try reader.optionalString("webOrderLineItem")
        storefrontId = try reader.optionalString("storefrontId")
        transactionReason = try reader.optionalString("transactionReason")
        offerType = try reader.optionalInt("offerType")
        offerIdentifier = try reader.optionalString("offerIdentifier")
        offerDiscountType = try reader.optionalString("offerDiscountType")
        offerPeriod = try reader.optionalString("offerPeriod")
        appTransaction = try reader.optionalString("appTransaction")
        appAccountToken = try reader.optionalString("appAccountToken")
        billingPlanType = try reader.optionalString("billingPlanType")
        commitmentBillingPeriod = try reader.optionalInt("commitmentBillingPeriod")
        commitmentBillingPeriods = try reader.optionalInt("commitmentBillingPeriods")
        commitmentExpiresAt = try reader.optionalTimestamp("commitmentExpiresAt")
        commitmentPrice = try reader.optionalInt64("commitmentPrice")
    }
}

extension RenewalInfo {
    /// The renewal info's fields in the format's order, all but `source` and `signed` (the
    /// event adds them; an account's subscription shows the info without).
    func writeMembers(to writer: inout JSONWriter) {
        writer.member("originalTransaction", originalTransaction)
        writer.member("product", ifPresent: product)
        writer.member("renewsTo", ifPresent: renewsTo)
        writer.member("willRenew", ifPresent: willRenew)
        writer.member("billingRetry", ifPresent: billingRetry)
        writer.member("gracePeriodEndsAt", ifPresent: gracePeriodEndsAt)
        writer.member("expirationIntent", ifPresent: expirationIntent)
        writer.member("environment", ifPresent: environment?.rawValue)
        writeRenewalDetails(to: &writer)
    }

    /// The fields Apple added in API 1.15–1.21, in the format's order.
    func writeRenewalDetails(to writer: inout JSONWriter) {
        writer.member("renewalPrice", ifPresent: renewalPrice)
        writer.member("currency", ifPresent: currency)
        writer.member("renewsAt", ifPresent: renewsAt)
        writer.member("recentSubscriptionStartedAt", ifPresent: recentSubscriptionStartedAt)
        writer.member("priceIncreaseStatus", ifPresent: priceIncreaseStatus)
        writer.member("offerType", ifPresent: offerType)
        writer.member("offerIdentifier", ifPresent: offerIdentifier)
        writer.member("offerDiscountType", ifPresent: offerDiscountType)
        writer.member("offerPeriod", ifPresent: offerPeriod)
        if let eligibleWinBackOffers {
            writer.key("eligibleWinBackOffers")
            writer.beginArray()
            for offer in eligibleWinBackOffers { writer.string(offer) }
            writer.endArray()
        }
        writer.member("appTransaction", ifPresent: appTransaction)
        writer.member("appAccountToken", ifPresent: appAccountToken)
        writer.member("billingPlanType", ifPresent: billingPlanType)
        writer.member("commitmentRenewsTo", ifPresent: commitmentRenewsTo)
        writer.member("commitmentWillRenew", ifPresent: commitmentWillRenew)
        writer.member("commitmentBillingPlanType", ifPresent: commitmentBillingPlanType)
        writer.member("commitmentRenewsAt", ifPresent: commitmentRenewsAt)
        writer.member("commitmentRenewalPrice", ifPresent: commitmentRenewalPrice)
    }

    mutating func readRenewalDetails(from reader: FieldReader) throws(LedgerError) {
        renewalPrice = try reader.optionalInt64("renewalPrice")
        currency = try reader.optionalString("currency")
        renewsAt = try reader.optionalTimestamp("renewsAt")
        recentSubscriptionStartedAt = try reader.optionalTimestamp("recentSubscriptionStartedAt")
        priceIncreaseStatus = try reader.optionalInt("priceIncreaseStatus")
        offerType = try reader.optionalInt("offerType")
        offerIdentifier = try reader.optionalString("offerIdentifier")
        offerDiscountType = try reader.optionalString("offerDiscountType")
        offerPeriod = try reader.optionalString("offerPeriod")
        eligibleWinBackOffers = try reader.optionalStrings("eligibleWinBackOffers")
        appTransaction = try reader.optionalString("appTransaction")
        appAccountToken = try reader.optionalString("appAccountToken")
        billingPlanType = try reader.optionalString("billingPlanType")
        commitmentRenewsTo = try reader.optionalString("commitmentRenewsTo")
        commitmentWillRenew = try reader.optionalBool("commitmentWillRenew")
        commitmentBillingPlanType = try reader.optionalString("commitmentBillingPlanType")
        commitmentRenewsAt = try reader.optionalTimestamp("commitmentRenewsAt")
        commitmentRenewalPrice = try reader.optionalInt64("commitmentRenewalPrice")
    }
}

extension AppTransactionInfo {
    /// The fields after `appTransaction`, all but `signed` (the event adds it; an account's
    /// projection shows the info without).
    func writeDetails(to writer: inout JSONWriter) {
        writer.member("originalPurchasedAt", ifPresent: originalPurchasedAt)
        writer.member("originalApplicationVersion", ifPresent: originalApplicationVersion)
        writer.member("applicationVersion", ifPresent: applicationVersion)
        writer.member("originalPlatform", ifPresent: originalPlatform)
        writer.member("preorderedAt", ifPresent: preorderedAt)
        writer.member("environment", ifPresent: environment?.rawValue)
    }
}
