import Foundation
import LedgerTestSupport
import PurchaseLedger
import PurchaseLedgerLMDB
@testable import PurchaseLedgerServer
import Testing

/// `/dashboard` in a real browser (docs/SERVER.md, "The dashboard"): Debian's Chromium, headless,
/// driven by Selenium (`Scripts/dashboard_check.py`) against the built `ledger-server`, shows the
/// figures `GET /v1/books` answers and an account's timeline as the API gives it, and keeps the
/// key in the tab. tools/test installs Chromium and Selenium; without them the test says so and
/// passes only when they are not required (`PURCHASE_LEDGER_REQUIRE_BROWSER`).
struct DashboardBrowserTests {
    static let scripts = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Scripts").path
    static let key = "dashboard-key-0123456789abcdef0123456"
    static let environment = ProcessInfo.processInfo.environment

    static var browserIsRequired: Bool { environment["PURCHASE_LEDGER_REQUIRE_BROWSER"] == "1" }

    /// Chromium, its driver and a Python with Selenium, when all are there.
    static func browser() async -> (chromium: String, driver: String, python: String)? {
        let chromium = environment["PURCHASE_LEDGER_CHROMIUM"] ?? "/usr/bin/chromium"
        let driver = environment["PURCHASE_LEDGER_CHROMEDRIVER"] ?? "/usr/bin/chromedriver"
        guard FileManager.default.isExecutableFile(atPath: chromium), FileManager.default.isExecutableFile(atPath: driver),
            let python = await LedgerTestSupport.python(importing: "selenium")
        else { return nil }
        return (chromium, driver, python)
    }

    /// Monthly renewals of a subscription bought four months ago, one refunded, the last running; a
    /// book in euros.
    static func events(now: Timestamp) -> [Event] {
        func daysAgo(_ days: Int64) -> Timestamp { Timestamp(seconds: now.seconds - days * 86_400) }
        var events: [Event] = []
        for month in 0..<4 {
            let start = daysAgo(Int64(120 - 30 * month))
            events.append(.storeTransaction(id: "s\(month)", account: "ana", signedAt: start, StoreTransaction(
                transaction: "S\(month)", originalTransaction: "S0", product: "pro.monthly", purchasedAt: start,
                expiresAt: Timestamp(seconds: start.seconds + 31 * 86_400), environment: .production, price: 9990, currency: "USD")))
        }
        events.append(.storeTransaction(id: "s1/refund", account: "ana", signedAt: daysAgo(80), StoreTransaction(
            transaction: "S1", originalTransaction: "S0", product: "pro.monthly", purchasedAt: daysAgo(90),
            expiresAt: daysAgo(60), environment: .production, price: 9990, currency: "USD", revokedAt: daysAgo(80),
            revocationType: .refundFull)))
        events.append(.storeTransaction(id: "b1", account: "ben", signedAt: daysAgo(10), StoreTransaction(
            transaction: "B1", product: "book", purchasedAt: daysAgo(10), environment: .production, price: 4990, currency: "EUR")))
        return events
    }

    @Test func theDashboardShowsWhatTheAPIAnswers() async throws {
        guard let browser = await Self.browser() else {
            try #require(!Self.browserIsRequired, "Chromium, chromedriver or Selenium is missing (tools/test installs them)")
            print("DashboardBrowserTests: skipped: no Chromium, chromedriver or Selenium here (tools/test installs them)")
            return
        }
        try await withTemporaryDirectory { directory in
            var configuration = try LedgerServerTests.configuration(in: directory, port: try LedgerServerTests.freePort())
            let catalogPath = try #require(configuration.catalog)
            try #"{"products": [{"id": "pro.monthly", "type": "autoRenewable", "group": "pro", "period": "P1M"}, {"id": "book", "type": "nonConsumable"}]}"#
                .write(toFile: catalogPath, atomically: true, encoding: .utf8)
            configuration.keys.append(.init(name: "dashboard", key: Self.key, scopes: [.booksRead, .accountsRead]))
            let ledger = try Ledger.open(at: configuration.ledger, catalog: try Catalog(contentsOfFile: catalogPath))
            let outcomes = try await ledger.append(contentsOf: Self.events(now: .now()))
            await ledger.close()
            try #require(outcomes.allSatisfy { if case .success(.appended) = $0 { true } else { false } })
            let server = try await BuiltServer.start(configuration, in: directory)
            defer { server.kill() }

            let check = try ChildProcess(
                browser.python, [Self.scripts + "/dashboard_check.py", browser.chromium, browser.driver,
                                 "http://127.0.0.1:\(configuration.bind.port)", Self.key, "ana", directory + "/dashboard.png"],
                output: .file(directory + "/check.txt"), error: .file(directory + "/check.err"))
            let termination = await check.exit()
            let output = (try? String(contentsOfFile: directory + "/check.txt", encoding: .utf8)) ?? ""
            let errors = (try? String(contentsOfFile: directory + "/check.err", encoding: .utf8)) ?? ""
            #expect(termination == .exited(0), "the browser's check \(termination):\n\(output)\n\(errors.suffix(4000))")
            if let keep = Self.environment["PURCHASE_LEDGER_DASHBOARD_SCREENSHOT"] {
                try? FileManager.default.removeItem(atPath: keep)
                try FileManager.default.copyItem(atPath: directory + "/dashboard.png", toPath: keep)
            }
        }
    }
}
