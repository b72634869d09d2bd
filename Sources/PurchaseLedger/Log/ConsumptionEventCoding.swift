/// The binary form of the refund-request events, as the store's events (`StoreEventCoding`):
/// the required fields, a varint presence mask, then the present optional fields in order.
extension ByteWriter {
    mutating func consumptionRequest(_ request: ConsumptionRequest) {
        string(request.transaction)
        varint(Self.mask([request.reason != nil, request.environment != nil]))
        if let value = request.reason { string(value) }
        if let value = request.environment { caseIndex(value) }
    }

    mutating func consumptionAnswer(_ answer: ConsumptionAnswer) {
        string(answer.request)
        string(answer.transaction)
        caseIndex(answer.outcome)
        varint(Self.mask([
            answer.deliveryStatus != nil, answer.consumptionPercentage != nil, answer.refundPreference != nil,
            answer.sampleContentProvided != nil, answer.status != nil, answer.error != nil,
        ]))
        if let value = answer.deliveryStatus { string(value) }
        if let value = answer.consumptionPercentage { signed(Int64(value)) }
        if let value = answer.refundPreference { string(value) }
        if let value = answer.sampleContentProvided { byte(value ? 1 : 0) }
        if let value = answer.status { signed(Int64(value)) }
        if let value = answer.error { string(value) }
    }
}

extension ByteReader {
    mutating func consumptionRequest() throws(Malformed) -> ConsumptionRequest {
        var request = ConsumptionRequest(transaction: try string())
        let mask = try varint()
        guard mask < 1 << 2 else { throw Malformed(reason: "unknown field mask") }
        if mask & 1 != 0 { request.reason = try string() }
        if mask & 2 != 0 { request.environment = try caseIndex() }
        return request
    }

    mutating func consumptionAnswer() throws(Malformed) -> ConsumptionAnswer {
        var answer = ConsumptionAnswer(request: try string(), transaction: try string(), outcome: try caseIndex())
        let mask = try varint()
        guard mask < 1 << 6 else { throw Malformed(reason: "unknown field mask") }
        func has(_ bit: UInt64) -> Bool { mask & 1 << bit != 0 }
        if has(0) { answer.deliveryStatus = try string() }
        if has(1) { answer.consumptionPercentage = try bounded(StoreLimits.consumptionPercentage) }
        if has(2) { answer.refundPreference = try string() }
        if has(3) { answer.sampleContentProvided = try flag() }
        if has(4) { answer.status = try bounded(StoreLimits.httpStatus) }
        if has(5) { answer.error = try string() }
        return answer
    }
}

