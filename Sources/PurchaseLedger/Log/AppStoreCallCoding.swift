/// The binary form of `appStoreCall` and `appTransaction`, as the store's events
/// (`StoreEventCoding`): the required fields, a varint presence mask, the present optional fields.
extension ByteWriter {
    mutating func appStoreCall(_ call: AppStoreCall) {
        caseIndex(call.call)
        string(call.transaction)
        caseIndex(call.outcome)
        varint(Self.mask([call.appAccountToken != nil, call.environment != nil, call.status != nil, call.error != nil]))
        if let value = call.appAccountToken { string(value) }
        if let value = call.environment { caseIndex(value) }
        if let value = call.status { signed(Int64(value)) }
        if let value = call.error { string(value) }
    }

    mutating func appTransaction(_ info: AppTransactionInfo) {
        string(info.appTransaction)
        varint(Self.mask([
            info.originalPurchasedAt != nil, info.originalApplicationVersion != nil, info.applicationVersion != nil,
            info.originalPlatform != nil, info.preorderedAt != nil, info.environment != nil, info.signed != nil,
        ]))
        if let value = info.originalPurchasedAt { timestamp(value) }
        if let value = info.originalApplicationVersion { string(value) }
        if let value = info.applicationVersion { string(value) }
        if let value = info.originalPlatform { string(value) }
        if let value = info.preorderedAt { timestamp(value) }
        if let value = info.environment { caseIndex(value) }
        if let value = info.signed { string(value) }
    }
}

extension ByteReader {
    mutating func appStoreCall() throws(Malformed) -> AppStoreCall {
        var call = AppStoreCall(call: try caseIndex(), transaction: try string(), outcome: try caseIndex())
        let mask = try varint()
        guard mask < 1 << 4 else { throw Malformed(reason: "unknown field mask") }
        if mask & 1 != 0 { call.appAccountToken = try string() }
        if mask & 2 != 0 { call.environment = try caseIndex() }
        if mask & 4 != 0 { call.status = try bounded(StoreLimits.httpStatus) }
        if mask & 8 != 0 { call.error = try string() }
        return call
    }

    mutating func appTransaction() throws(Malformed) -> AppTransactionInfo {
        var info = AppTransactionInfo(appTransaction: try string())
        let mask = try varint()
        guard mask < 1 << 7 else { throw Malformed(reason: "unknown field mask") }
        func has(_ bit: UInt64) -> Bool { mask & 1 << bit != 0 }
        if has(0) { info.originalPurchasedAt = try timestamp() }
        if has(1) { info.originalApplicationVersion = try string() }
        if has(2) { info.applicationVersion = try string() }
        if has(3) { info.originalPlatform = try string() }
        if has(4) { info.preorderedAt = try timestamp() }
        if has(5) { info.environment = try caseIndex() }
        if has(6) { info.signed = try string() }
        return info
    }
}
