import Foundation
import LedgerTestSupport
import PurchaseLedger
@testable import PurchaseLedgerAppStore
@testable import PurchaseLedgerServer

/// Makes hostile `POST /v1/appstore/notifications` bodies from real signed ones: mutated
/// headers, payloads and signatures, numbers at the edges of Int64 and Double, wrong types,
/// missing fields, huge strings, JWS forged inside a validly signed one, and base64 variants.
/// Payload mutations are re-signed with the test chain's leaf half of the time, so that they
/// reach the code behind the signature check too.
struct NotificationMutator {
    /// A signed JWS split into its parts, with the header and payload as JSON text.
    struct Token {
        var header: String
        var payload: String
        var signature: [UInt8]

        init?(_ jws: String) {
            let parts = jws.split(separator: ".", omittingEmptySubsequences: false)
            guard parts.count == 3, let header = Base64URL.decode(parts[0]), let payload = Base64URL.decode(parts[1]),
                  let signature = Base64URL.decode(parts[2])
            else { return nil }
            self.header = String(decoding: header, as: UTF8.self)
            self.payload = String(decoding: payload, as: UTF8.self)
            self.signature = signature
        }

        var jws: String {
            Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(payload.utf8)) + "." + Base64URL.encode(signature)
        }
    }

    let seeds: [String]
    let signer: TestAppStoreSigner
    /// A chain nobody trusts, for forgeries.
    let stranger: TestAppStoreSigner

    /// Raw JSON values at the edges: numbers JSON can spell that Int64, UInt64 and Double
    /// cannot hold, wrong types, control characters, depth.
    static let hostileValues: [String] = [
        "9223372036854775807", "-9223372036854775808", "9223372036854775808", "18446744073709551615", "-1", "0", "-0",
        "0.5", "1e15", "1e308", "-1e308", "1e400", "-1e400", "4.9e-324", "253402300800000", "253402300799999",
        "-62135769600000", "9007199254740993", "1.0e+19", "true", "false", "null", "\"\"", "\"1681314324000\"",
        "[]", "{}", "[1681314324000]", "{\"a\": 1}", "\"\\u0000\"", "\"\\ud800\"", "\"line\\nforged=1\"",
        "\"\(String(repeating: "A", count: 70_000))\"", String(repeating: "[", count: 600) + String(repeating: "]", count: 600),
    ]

    static let fields = [
        "signedDate", "notificationType", "subtype", "notificationUUID", "version", "data", "summary", "appData",
        "externalPurchaseToken", "bundleId", "appAppleId", "environment", "signedTransactionInfo", "transactionId",
        "purchaseDate", "expiresDate", "quantity", "appAccountToken", "revocationDate", "revocationReason",
    ]

    func body(_ random: inout SeededGenerator) -> String {
        let seed = seeds[Int(random.next() % UInt64(seeds.count))]
        let jws: String
        switch random.next() % 10 {
        case 0: jws = mutateBytes(seed, &random)
        case 1: jws = mutateBase64(seed, &random)
        case 2, 3: jws = mutateHeader(seed, &random)
        case 4: jws = mutateSignature(seed, &random)
        case 5: jws = nestForgery(&random)
        default: jws = mutatePayload(seed, &random)
        }
        switch random.next() % 20 {
        case 0: return "{\"signedPayload\": \(Self.pick(Self.hostileValues, &random))}"
        case 1: return String(jws.prefix(Int(random.next() % UInt64(jws.count + 1))))
        case 2: return "{\"signedPayload\": \"\(jws)\", \"signedPayload\": 1}"
        default: return "{\"signedPayload\": \(JSONString.quoted(jws))}"
        }
    }

    static func pick<T>(_ values: [T], _ random: inout SeededGenerator) -> T {
        values[Int(random.next() % UInt64(values.count))]
    }

    /// Sets `field` (anywhere it occurs as a key, or at the top) to `value`, as JSON text.
    static func replacing(_ field: String, in json: String, with value: String) -> String {
        guard let range = json.range(of: "\"\(field)\":") else {
            guard json.hasPrefix("{") else { return json }
            return "{\"\(field)\":\(value)," + json.dropFirst()
        }
        // The old value runs to the next comma or closing brace at the same depth.
        var depth = 0
        var inString = false
        var escaped = false
        var end = range.upperBound
        while end < json.endIndex {
            let character = json[end]
            if inString {
                if escaped { escaped = false } else if character == "\\" { escaped = true } else if character == "\"" { inString = false }
            } else if character == "\"" {
                inString = true
            } else if character == "{" || character == "[" {
                depth += 1
            } else if character == "}" || character == "]" {
                if depth == 0 { break }
                depth -= 1
            } else if character == ",", depth == 0 {
                break
            }
            end = json.index(after: end)
        }
        return json.replacingCharacters(in: range.upperBound..<end, with: value)
    }

    /// `token` signed by the test chain's leaf: under the chain's own header (a payload
    /// mutation that then verifies up to its content), or under its own (mutated) header.
    func resign(_ token: Token, keepingHeader: Bool = false) -> String {
        let header = keepingHeader ? token.header : ((try? signer.header()) ?? token.header)
        return (try? signer.sign(rawHeader: header, rawPayload: token.payload)) ?? token.jws
    }

    func mutatePayload(_ seed: String, _ random: inout SeededGenerator) -> String {
        guard var token = Token(seed) else { return seed }
        for _ in 0...(random.next() % 3) {
            let field = Self.pick(Self.fields, &random)
            switch random.next() % 4 {
            case 0: token.payload = token.payload.replacingOccurrences(of: "\"\(field)\"", with: "\"_\(field)\"")
            default: token.payload = Self.replacing(field, in: token.payload, with: Self.pick(Self.hostileValues, &random))
            }
        }
        return random.next() % 2 == 0 ? resign(token) : token.jws
    }

    func mutateHeader(_ seed: String, _ random: inout SeededGenerator) -> String {
        guard var token = Token(seed) else { return seed }
        let chain = [try? TestAppStoreSigner.der(signer.leaf), try? TestAppStoreSigner.der(signer.intermediate), try? TestAppStoreSigner.der(signer.root)]
            .compactMap { $0 }
        let variants: [String] = [
            "{\"alg\":\"none\"}", "{\"alg\":\"HS256\",\"x5c\":[]}", "{\"alg\":5}", "{\"alg\":\"ES256\",\"x5c\":\"\(chain[0])\"}",
            "{\"alg\":\"ES256\",\"x5c\":[\"\(chain[0])\"]}", "{\"alg\":\"ES256\",\"x5c\":[\"\(chain[0])\",\"\(chain[1])\",\"\(chain[2])\",\"\(chain[2])\"]}",
            "{\"alg\":\"ES256\",\"x5c\":[\"\(chain[2])\",\"\(chain[1])\",\"\(chain[0])\"]}",
            "{\"alg\":\"ES256\",\"x5c\":[\"\(chain[0].prefix(40))\",\"\(chain[1])\",\"\(chain[2])\"]}",
            "{\"alg\":\"ES256\",\"x5c\":[\"\(chain[0].dropLast(8))\",\"\(chain[1])\",\"\(chain[2])\"]}",
            "{\"alg\":\"ES256\",\"x5c\":[1,2,3]}", "{\"alg\":\"ES256\",\"x5c\":[null,null,null]}", "[]", "null", "",
            "{\"alg\":\"ES256\",\"x5c\":[\"\(String(repeating: "QUFB", count: 20_000))\",\"\(chain[1])\",\"\(chain[2])\"]}",
            "{\"alg\":\"ES256\",\"x5c\":[\"\(chain[0])\",\"\(chain[1])\",\"\(chain[2])\"],\"crit\":[\"b64\"],\"b64\":false}",
            "{\"alg\":\"ES256\",\"x5c\":[\"\(chain[1])\",\"\(chain[1])\",\"\(chain[2])\"]}",
        ]
        if random.next() % 2 == 0 {
            token.header = Self.pick(variants, &random)
        } else {
            token.header = Self.replacing(Self.pick(["alg", "x5c", "kid"], &random), in: token.header, with: Self.pick(Self.hostileValues, &random))
        }
        return random.next() % 2 == 0 ? resign(token, keepingHeader: true) : token.jws
    }

    func mutateSignature(_ seed: String, _ random: inout SeededGenerator) -> String {
        guard var token = Token(seed) else { return seed }
        switch random.next() % 5 {
        case 0: if !token.signature.isEmpty { token.signature[Int(random.next() % UInt64(token.signature.count))] ^= 0x80 }
        case 1: token.signature = Array(token.signature.prefix(Int(random.next() % 64)))
        case 2: token.signature += [0x00]
        case 3: token.signature = [0x30, 0x44, 0x02, 0x20] + token.signature.prefix(32) + [0x02, 0x20] + token.signature.suffix(32)
        default: token.signature = Array(repeating: 0, count: 64)
        }
        return token.jws
    }

    /// A validly signed outer notification whose `signedTransactionInfo` is forged.
    func nestForgery(_ random: inout SeededGenerator) -> String {
        let transaction: [String: Any] = [
            "transactionId": "forged-\(random.next() % 1000)", "originalTransactionId": "forged", "bundleId": "com.example",
            "productId": "com.example.coins", "purchaseDate": 1_698_148_900_000, "quantity": 1, "type": "Consumable",
            "appAccountToken": "7e3fb20b-4cdb-47cc-936d-99d65f608138", "environment": "Sandbox", "signedDate": 1_698_148_900_000,
        ]
        let inner: String
        switch random.next() % 5 {
        case 0: inner = (try? stranger.sign(transaction)) ?? ""
        case 1: inner = (try? signer.sign(transaction, header: ["alg": "none"])) ?? ""
        case 2: inner = (try? signer.sign(["transactionId": "x", "signedDate": 1e15, "bundleId": "com.example", "environment": "Sandbox"])) ?? ""
        case 3: inner = String(repeating: "a.", count: Int(random.next() % 5000))
        default: inner = seeds[0]
        }
        let outer: [String: Any] = [
            "notificationType": Self.pick(["ONE_TIME_CHARGE", "SUBSCRIBED", "REFUND", "DID_RENEW"], &random),
            "notificationUUID": UUID().uuidString, "signedDate": 1_698_148_900_000, "version": "2.0",
            "data": ["bundleId": "com.example", "appAppleId": 41234, "environment": "Sandbox", "signedTransactionInfo": inner],
        ]
        return (try? signer.sign(outer)) ?? ""
    }

    func mutateBytes(_ seed: String, _ random: inout SeededGenerator) -> String {
        var bytes = Array(seed.utf8)
        for _ in 0...(random.next() % 8) where !bytes.isEmpty {
            let index = Int(random.next() % UInt64(bytes.count))
            switch random.next() % 3 {
            case 0: bytes[index] = UInt8(truncatingIfNeeded: random.next())
            case 1: bytes.remove(at: index)
            default: bytes.insert(Self.pick(Array(".=+/-_ \n\\\"%".utf8), &random), at: index)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    func mutateBase64(_ seed: String, _ random: inout SeededGenerator) -> String {
        let parts = seed.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 3 else { return seed }
        let index = Int(random.next() % 3)
        var part = parts[index]
        switch random.next() % 5 {
        case 0: part = part.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        case 1: part += String(repeating: "=", count: Int(random.next() % 4))
        case 2: part.insert(Self.pick([" ", "\n", "\t", "%", "é"], &random), at: part.index(part.startIndex, offsetBy: Int(random.next() % UInt64(part.count + 1))))
        case 3: part = String(part.dropLast(Int(random.next() % 3) + 1))
        default: part = Data(part.utf8).base64EncodedString()
        }
        var mutated = parts
        mutated[index] = part
        return mutated.joined(separator: ".")
    }
}
