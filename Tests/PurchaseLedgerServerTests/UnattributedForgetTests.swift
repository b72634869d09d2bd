import Foundation
import LedgerTestSupport
import PurchaseLedger
import PurchaseLedgerLMDB
@testable import PurchaseLedgerAppStore
import Testing

/// Forgetting a customer removes the audit file's lines that name her, and only those: a short
/// or common account id inside another line's text is not that line naming her.
struct UnattributedForgetTests {
    static func jws(_ payload: [String: Any]) throws -> String {
        let json = try JSONSerialization.data(withJSONObject: payload)
        let base64 = json.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
        return "eyJhbGciOiJFUzI1NiJ9.\(base64).c2lnbmF0dXJl"
    }

    static func line(transaction: String, token: String?, appTransaction: String, reason: String) throws -> String {
        var signed: [String: Any] = ["transactionId": transaction, "appTransactionId": appTransaction, "productId": "com.example.tenhints"]
        if let token { signed["appAccountToken"] = token }
        let notification = try jws(["notificationType": "ONE_TIME_CHARGE", "data": ["signedTransactionInfo": try jws(signed)]])
        let object: [String: Any] = [
            "receivedAt": "2026-11-28T10:00:00Z", "notificationUUID": "5b3f0c2a-0000-4000-8000-00000000\(transaction)",
            "notificationType": "ONE_TIME_CHARGE", "transactionId": transaction, "productId": "com.example.tenhints",
            "reason": reason, "signedPayload": notification,
        ]
        return String(decoding: try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]), as: UTF8.self)
    }

    @Test func aForgetTakesHerLinesAndNoOneElses() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("unattributed-\(UUID())").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let herToken = "9F1C2B3A-4D5E-4F60-8A7B-1C2D3E4F5A6B"
        let others = try [
            Self.line(transaction: "9500", token: nil, appTransaction: "704293114400", reason: "ONE_TIME_CHARGE for transaction 9500 has no appAccountToken"),
            Self.line(transaction: "9501", token: nil, appTransaction: "704293114401", reason: "ONE_TIME_CHARGE for transaction 9501 has no appAccountToken"),
        ]
        let hers = try [
            // Her token inside the transaction's JWS, in another case.
            Self.line(transaction: "9502", token: herToken.lowercased(), appTransaction: "704293114402", reason: "refused"),
            // Her customer id (app transaction id) inside the JWS.
            Self.line(transaction: "9503", token: nil, appTransaction: "704293114499", reason: "no account"),
            // Her account quoted in a message.
            Self.line(transaction: "9504", token: nil, appTransaction: "704293114404", reason: "payment \"x\" is not in account \"Example\"'s queue"),
        ]
        let log = UnattributedNotificationLog(path: directory + "/unattributed-notifications.jsonl")
        try Data((others + hers).map { $0 + "\n" }.joined().utf8).write(to: URL(fileURLWithPath: log.path))

        // Names that occur inside the other lines' values (their reason, date, uuid, payload):
        // none of those lines names them.
        let removed = try log.forget(["Example", herToken, "704293114499", "a", "for", "2026", "9500", "ONE_TIME"])
        #expect(removed == hers.count)
        let left = try String(contentsOfFile: log.path, encoding: .utf8).split(separator: "\n").map(String.init)
        #expect(left == others)
    }

    /// A notification handled while its customer is forgotten: the forget may have cleared the
    /// audit file before the notification's line is written, so the line is not written when it
    /// names a name a forget since the notification came in renamed (a review found the line
    /// written after the clearing). Others' lines are written as before.
    @Test func aLineNamingACustomerForgottenMeanwhileIsNotWritten() async throws {
        try await withTemporaryDirectory { directory in
            let ledger = try Ledger.open(at: directory + "/ledger", catalog: serverTestCatalog)
            _ = try await ledger.append(contentsOf: [
                .paymentAdded(id: "a1", account: "acct-42", at: .now(), payment: "p1", product: "com.example.tenhints"),
            ])
            let log = UnattributedNotificationLog(path: directory + "/unattributed-notifications.jsonl")
            let notification = try JSONDecoder().decode(AppStoreNotificationPayload.self, from: Data(
                #"{"notificationType": "ONE_TIME_CHARGE", "notificationUUID": "5b3f0c2a-0000-4000-8000-000000000042"}"#.utf8))
            let forgetsSince = ledger.forgetMailbox()
            #expect(try await ledger.forget("acct-42", requestedBy: "test") != nil)
            let hers = try log.record(
                notification, transaction: nil, reason: "transaction 9 is held by account \"acct-42\"", signedPayload: "x.y.z", forgetsSince: forgetsSince)
            let others = try log.record(
                notification, transaction: nil, reason: "transaction 8 is held by account \"acct-7\"", signedPayload: "x.y.z", forgetsSince: forgetsSince)
            #expect(!hers && others)
            let written = try String(contentsOfFile: log.path, encoding: .utf8)
            #expect(!written.contains("acct-42") && written.contains("acct-7"))
            await ledger.close()
        }
    }
}
