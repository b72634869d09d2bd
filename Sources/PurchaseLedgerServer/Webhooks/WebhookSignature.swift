import Crypto
import Foundation

/// Standard Webhooks' signature (https://www.standardwebhooks.com): the headers
/// `webhook-id`, `webhook-timestamp` (seconds since 1970) and `webhook-signature`
/// (`v1,` and the base64 of HMAC-SHA256 over `id.timestamp.body` with the secret's bytes), so
/// that a consumer verifies a delivery with the library for its language.
struct WebhookSignature {
    let key: SymmetricKey

    init(key: [UInt8]) {
        self.key = SymmetricKey(data: key)
    }

    func headers(id: String, timestamp: Int64, body: [UInt8]) -> [(String, String)] {
        var message = Array("\(id).\(timestamp).".utf8)
        message += body
        let mac = HMAC<SHA256>.authenticationCode(for: message, using: key)
        return [
            ("webhook-id", id),
            ("webhook-timestamp", String(timestamp)),
            ("webhook-signature", "v1," + Data(mac).base64EncodedString()),
        ]
    }
}
