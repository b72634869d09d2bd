import PurchaseLedger
import Foundation
@testable import PurchaseLedgerAppStore
@testable import PurchaseLedgerServer
import Testing
import LedgerTestSupport

/// The server's verdict on signed App Store data, side by side with Apple's own verifier (the
/// Python `app-store-server-library`, `SignedDataVerifier` with online checks off) on generated
/// chains and payloads: the same cases accepted, the same refused.
///
/// `tools/test` installs the library with pip and sets `PURCHASE_LEDGER_REQUIRE_APPLE_VERIFIER`,
/// so that there the suite fails rather than skips when it is missing.
@Suite(.enabled(if: AppleVerifier.isRequired || AppleVerifier.isInstalled, "Apple's app-store-server-library (pip install app-store-server-library)"))
struct AppleVerifierParityTests {
    /// One signed payload, and the root its chain must end in.
    struct Case: Sendable {
        var name: String
        var kind: Kind
        var root: String
        var jws: String

        enum Kind: String, Sendable { case notification, transaction }
    }

    static let bundleId = "com.example"
    static let appAppleId: Int64 = 41234

    /// Whole seconds, as certificates keep their times.
    static func second(_ date: Date) -> Date {
        Date(timeIntervalSince1970: date.timeIntervalSince1970.rounded(.down))
    }

    static func milliseconds(_ date: Date) -> Double {
        date.timeIntervalSince1970 * 1000
    }

    static func notification(
        _ type: String = "TEST", signedDate: Double?, data: [String: Any]? = nil, extra: [String: Any] = [:]
    ) -> [String: Any] {
        var payload: [String: Any] = ["notificationType": type, "notificationUUID": UUID().uuidString.lowercased(), "version": "2.0"]
        if let signedDate { payload["signedDate"] = signedDate }
        payload["data"] = data ?? ["bundleId": bundleId, "appAppleId": appAppleId, "environment": "Sandbox"]
        for (key, value) in extra { payload[key] = value is NSNull ? nil : value }
        return payload
    }

    /// The generated cases: the validity edges of the leaf and the intermediate, each strict
    /// X.509 rule Apple's library applies, the notification kinds Apple sends, and payloads for
    /// another app or environment.
    static func cases() throws -> [Case] {
        var cases: [Case] = []
        let now = second(Date())
        func add(_ name: String, _ signer: TestAppStoreSigner, _ payload: [String: Any], kind: Case.Kind = .notification) throws {
            cases.append(Case(name: name, kind: kind, root: try TestAppStoreSigner.der(signer.root), jws: try signer.sign(payload)))
        }

        let plain = try TestAppStoreSigner()
        try add("conforming chain", plain, notification(signedDate: milliseconds(now)))
        try add("no signedDate (checked now)", plain, notification(signedDate: nil))
        try add("fractional signedDate", plain, notification(signedDate: milliseconds(now) - 0.25))

        // The leaf valid from `start` to `end` (whole seconds), well inside the window.
        let start = now.addingTimeInterval(-20 * 86_400), end = now.addingTimeInterval(-10 * 86_400)
        let leafWindow = try TestAppStoreSigner(chain: .init(leafValidity: start...end))
        let edges: [(String, Double)] = [
            ("1 ms before the leaf's notBefore", milliseconds(start) - 1),
            ("at the leaf's notBefore", milliseconds(start)),
            ("999 ms after the leaf's notBefore", milliseconds(start) + 999),
            ("1 ms before the leaf's notAfter", milliseconds(end) - 1),
            ("500 ms before the leaf's notAfter", milliseconds(end) - 500),
            ("at the leaf's notAfter", milliseconds(end)),
            ("500 ms after the leaf's notAfter", milliseconds(end) + 500),
            ("1 s after the leaf's notAfter", milliseconds(end) + 1000),
        ]
        for (name, signedDate) in edges {
            try add(name, leafWindow, notification(signedDate: signedDate))
        }
        let caEnd = now.addingTimeInterval(-86_400)
        let caWindow = try TestAppStoreSigner(chain: .init(validity: start...caEnd, leafValidity: start...now.addingTimeInterval(86_400 * 30)))
        try add("1 ms before the intermediate's notAfter", caWindow, notification(signedDate: milliseconds(caEnd) - 1))
        try add("at the intermediate's notAfter", caWindow, notification(signedDate: milliseconds(caEnd)))

        let strict: [(String, TestAppStoreSigner.Chain)] = [
            ("intermediate without keyUsage", .init(intermediateKeyUsage: false)),
            ("intermediate without a subject key identifier", .init(intermediateSubjectKeyIdentifier: false)),
            ("leaf without an authority key identifier", .init(leafAuthorityKeyIdentifier: false)),
            ("leaf that claims keyCertSign", .init(leafSignsCertificates: true)),
            ("leaf without the receipt-signing OID", .init(leafOID: false)),
            ("intermediate without the WWDR OID", .init(intermediateOID: false)),
            ("intermediate whose key usage lacks keyCertSign", .init(intermediateSignsCertificates: false)),
            ("leaf whose authority key identifier names another key", .init(leafNamesAnotherIssuerKey: true)),
            ("leaf with a critical extended key usage", .init(leafCriticalExtendedKeyUsage: true)),
            ("intermediate whose basicConstraints is not critical", .init(intermediateBasicConstraintsCritical: false)),
            ("root whose basicConstraints is not critical", .init(rootBasicConstraintsCritical: false)),
        ]
        for (name, chain) in strict {
            try add(name, try TestAppStoreSigner(chain: chain), notification(signedDate: milliseconds(now)))
        }

        // Years Apple's verifier cannot represent, and times before any certificate.
        for (name, signedDate) in [("signedDate 1e15", 1e15), ("signedDate in year 10000", 253_402_300_800_000), ("signedDate -1", -1), ("signedDate 0", 0)] {
            try add(name, plain, notification(signedDate: signedDate))
        }

        // The kinds of notification Apple sends, as its library reads them.
        let signed = milliseconds(now)
        var rescind = try AppleFixtures.model("signedRescindConsentNotification")
        rescind["signedDate"] = signed
        rescind["appData"] = ["appAppleId": appAppleId, "bundleId": bundleId, "environment": "Sandbox", "signedAppTransactionInfo": "x"]
        try add("RESCIND_CONSENT with appData", plain, rescind)
        var summary = try AppleFixtures.model("signedSummaryNotification")
        summary["signedDate"] = signed
        var summaryBody = try #require(summary["summary"] as? [String: Any])
        summaryBody["environment"] = "Sandbox"
        summary["summary"] = summaryBody
        try add("RENEWAL_EXTENSION/SUMMARY with summary", plain, summary)
        try add("notification for another app", plain, notification(signedDate: signed, data: ["bundleId": "com.other", "appAppleId": appAppleId, "environment": "Sandbox"]))
        try add("notification for production", plain, notification(signedDate: signed, data: ["bundleId": bundleId, "appAppleId": appAppleId, "environment": "Production"]))
        try add("notification without data, summary or appData", plain, notification(signedDate: signed, extra: ["data": NSNull()]))
        try add("notification whose appData is for another app", plain, notification(
            "RESCIND_CONSENT", signedDate: signed, extra: ["data": NSNull(), "appData": ["bundleId": "com.other", "environment": "Sandbox"]]))

        // Apple's own signed samples, under Apple's test root.
        let testCA = try TestAppStoreSigner.der(try AppleFixtures.testCA)
        for sample in ["testNotification", "wrongBundleId", "missingX5CHeaderClaim"] {
            cases.append(Case(name: "Apple's \(sample)", kind: .notification, root: testCA, jws: try AppleFixtures.signedData(sample)))
        }
        cases.append(Case(name: "Apple's transactionInfo", kind: .transaction, root: testCA, jws: try AppleFixtures.signedData("transactionInfo")))

        var transaction = try AppleFixtures.model("signedTransaction")
        transaction["environment"] = "Sandbox"
        transaction["signedDate"] = signed
        try add("transaction", plain, transaction, kind: .transaction)
        transaction["bundleId"] = "com.other"
        try add("transaction for another app", plain, transaction, kind: .transaction)
        transaction["bundleId"] = bundleId
        transaction["environment"] = "Production"
        try add("transaction for production", plain, transaction, kind: .transaction)
        return cases
    }

    /// The server's verdict: "accepted" or "refused: CODE".
    static func serverVerdict(_ testCase: Case) async throws -> String {
        let root = try TestAppStoreSigner.certificate(base64: testCase.root)
        let verifier = AppStoreSignedDataVerifier(trustedRoots: [root], bundleId: bundleId, appAppleId: appAppleId, environment: .sandbox)
        do throws(AppStoreVerificationError) {
            switch testCase.kind {
            case .notification: _ = try await verifier.verifyNotification(testCase.jws)
            case .transaction: _ = try await verifier.verifyTransaction(testCase.jws)
            }
            return "accepted"
        } catch {
            return "refused: \(error.code)"
        }
    }

    @Test func theServerAcceptsExactlyWhatApplesVerifierAccepts() async throws {
        let cases = try Self.cases()
        let apple = try AppleVerifier.verdicts(cases, bundleId: Self.bundleId, appAppleId: Self.appAppleId)
        #expect(apple.count == cases.count)
        var accepted = 0
        for testCase in cases {
            let server = try await Self.serverVerdict(testCase)
            let theirs = try #require(apple[testCase.name], "Apple's verifier gave no verdict on \(testCase.name)")
            #expect(server.hasPrefix("accepted") == theirs.hasPrefix("accepted"), "\(testCase.name): server \(server), Apple \(theirs)")
            if theirs == "accepted" { accepted += 1 }
        }
        // Both verdicts occur: a suite where Apple accepted nothing (or everything) proves little.
        #expect(accepted >= 10 && accepted < cases.count - 10, "Apple accepted \(accepted) of \(cases.count)")
        print("Apple's verifier and the server: \(cases.count) cases, \(accepted) accepted by Apple")
    }

    /// The one place the server is stricter, by design: a `signedDate` more than a day ahead of
    /// its clock is refused before any certificate is looked at. Apple's verifier accepts it when
    /// the chain happens to be valid then; no notification Apple sends is dated in the future.
    @Test func aSignedDateMoreThanADayAheadIsRefusedWhereApplesVerifierChecksTheChain() async throws {
        let signer = try TestAppStoreSigner()
        let ahead = Self.milliseconds(Date()) + 2 * 86_400_000
        let future = Case(
            name: "two days ahead", kind: .notification, root: try TestAppStoreSigner.der(signer.root),
            jws: try signer.sign(Self.notification(signedDate: ahead)))
        let apple = try AppleVerifier.verdicts([future], bundleId: Self.bundleId, appAppleId: Self.appAppleId)
        #expect(apple[future.name] == "accepted")
        #expect(try await Self.serverVerdict(future) == "refused: INVALID_JWT_FORMAT")
    }
}

/// Runs `Scripts/apple_verdicts.py` with the Python that has Apple's library:
/// `PURCHASE_LEDGER_APPLE_VERIFIER_PYTHON` (tools/test's virtual environment), else `python3`.
enum AppleVerifier {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Scripts/apple_verdicts.py").path

    static var isRequired: Bool { ProcessInfo.processInfo.environment["PURCHASE_LEDGER_REQUIRE_APPLE_VERIFIER"] == "1" }

    static let isInstalled: Bool = (try? run(["-c", "import appstoreserverlibrary"]).status) == 0

    static func run(_ arguments: [String]) throws -> (status: Int32, output: String) {
        let child = if let python = ProcessInfo.processInfo.environment["PURCHASE_LEDGER_APPLE_VERIFIER_PYTHON"] {
            try ChildProcess(python, arguments, output: .pipe)
        } else {
            try ChildProcess("/usr/bin/env", ["python3"] + arguments, output: .pipe)
        }
        let data = child.output?.readDataToEndOfFile() ?? Data()
        return (child.waitUntilExit().status, String(decoding: data, as: UTF8.self))
    }

    /// Apple's verdict on each case, by name.
    static func verdicts(_ cases: [AppleVerifierParityTests.Case], bundleId: String, appAppleId: Int64) throws -> [String: String] {
        let spec: [String: Any] = [
            "bundleId": bundleId, "appAppleId": appAppleId, "environment": "Sandbox",
            "cases": cases.map { ["name": $0.name, "kind": $0.kind.rawValue, "root": $0.root, "jws": $0.jws] },
        ]
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("apple-verdicts-\(UUID().uuidString).json").path
        try JSONSerialization.data(withJSONObject: spec).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let (status, output) = try run([script, path])
        guard status == 0, let verdicts = try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: String] else {
            throw TestFailure("apple_verdicts.py exited \(status): \(output)")
        }
        return verdicts
    }
}
