import AppStoreServerAPI
import Foundation
import Logging
import PurchaseLedger

/// Checks the ledger against what Apple knows: for every original transaction the ledger
/// holds, Apple's current transaction history (App Store Server API), verified like a
/// notification; each difference reported, and with `apply` the missing facts appended as the
/// events a notification would have appended, under ids derived from Apple's (a second run
/// appends nothing).
public struct Reconciliation: Sendable {
    /// Apple in one environment: its API host and the verifier of what it signs there.
    public struct Side: Sendable {
        public var environment: StoreEnvironment
        public var client: AppStoreServerAPIClient
        public var verifier: AppStoreSignedDataVerifier

        public init(environment: StoreEnvironment, client: AppStoreServerAPIClient, verifier: AppStoreSignedDataVerifier) {
            self.environment = environment
            self.client = client
            self.verifier = verifier.only(environment)
        }
    }

    /// The environments reconciled, in order (Production first when both). A chain is asked of
    /// its reports' environment (a report naming none is Production's); one the store never
    /// reported on (only the device's queue holds it) is asked of each in turn until one knows
    /// it, as the receipt check asked production first and then the sandbox on status 21007.
    public let sides: [Side]
    /// The calls that close the loop with Apple, checked (and, with `apply`, made) for every
    /// account reconciled; nil: not checked.
    public var calls: AppStoreCallSettings?
    let ledger: Ledger
    let logger: Logger

    public init(sides: [Side], ledger: Ledger, logger: Logger = Logger(label: "Reconciliation")) {
        self.sides = sides
        self.ledger = ledger
        self.logger = logger
    }

    /// Reconciliation with one environment: the verifier's first.
    public init(client: AppStoreServerAPIClient, verifier: AppStoreSignedDataVerifier, ledger: Ledger, logger: Logger = Logger(label: "Reconciliation")) {
        self.init(sides: [Side(environment: verifier.environments[0], client: client, verifier: verifier)], ledger: ledger, logger: logger)
    }

    /// How many requests were sent to Apple, all environments together.
    public var requestCount: Int {
        sides.reduce(0) { $0 + $1.client.requestCount }
    }

    /// One way the ledger differs from Apple.
    public struct Difference: Sendable, Hashable {
        public enum Kind: String, Sendable, Hashable, CaseIterable {
            /// Apple has a purchase or renewal the ledger lacks (a dropped order, a missed DID_RENEW).
            case missingPurchase
            /// The ledger holds the transaction but not Apple's report of it.
            case missingReport
            /// Apple holds it refunded or revoked and the ledger does not, or the other way round.
            case revocationDiffers
            /// Apple's expiry differs from the report in force (an extension, a missed renewal date).
            case expiryDiffers
            /// Apple marks it upgraded and the ledger does not.
            case upgradeDiffers
            /// The ledger holds a transaction Apple's history of its subscription lacks.
            case unknownToApple
            /// Apple's `appAccountToken` names another account than the one holding it.
            case otherAccount
            /// Apple sent a notification whose events the ledger lacks (with `since`).
            case missedNotification
            /// Apple's renewal info of a subscription (auto-renew, billing retry, grace period,
            /// the product it renews to) differs from the ledger's, or the ledger has none.
            case renewalDiffers
            /// The entry the store's purchase opened (`appstore:<transactionId>`) still awaits its
            /// finish: a run cut short between the purchase and its finish.
            case unfinishedPurchase
            /// A call the ledger owes Apple (`calls`) that no `appStoreCall` records: a token
            /// Apple does not have, or a delivered StoreKit 2 transaction Apple still holds
            /// unfinished.
            case appStoreCallOwed
        }

        public var kind: Kind
        public var account: String
        public var originalTransaction: String
        public var transaction: String
        public var detail: String

        /// `{"kind": …, "account": …, "originalTransaction": …, "transaction": …, "detail": …}`.
        public var json: String {
            "{\"kind\": \(JSONString.quoted(kind.rawValue)), \"account\": \(JSONString.quoted(account)), "
                + "\"originalTransaction\": \(JSONString.quoted(originalTransaction)), \"transaction\": \(JSONString.quoted(transaction)), "
                + "\"detail\": \(JSONString.quoted(detail))}"
        }
    }

    public struct Report: Sendable {
        public var differences: [Difference] = []
        /// Events appended (with `apply`).
        public var appended = 0
        public var originalTransactions = 0
        /// Original transactions whose history could not be read or verified, with why.
        public var failures: [(originalTransaction: String, reason: String)] = []
    }

    /// With `since` (milliseconds since 1970), first every notification Apple sent since then
    /// that the ledger lacks; then every original transaction the ledger holds.
    ///
    /// Accounts are taken one at a time from the ledger's index of store transactions, never the
    /// whole ledger at once: Apple's side of the next `concurrentReads` accounts is read ahead
    /// (the calls wait on the network), and each account is compared and mended in order, chain
    /// by chain, so a run's outcome does not depend on timing and its memory on the ledger's size.
    public func run(apply: Bool, since: Int64? = nil) async throws -> Report {
        var report = Report()
        if let since {
            for side in sides {
                try await missedNotifications(since: since, from: side, apply: apply, into: &report)
            }
        }
        let accounts = try ledger.accountsHoldingStoreTransactions()
        var owners: Set<String> = []
        try await Self.inOrder(accounts, readingAhead: Self.concurrentReads) { account in
            await fetchCustomer(of: account)
        } process: { account, fetched in
            try await reconcile(account, fetched: fetched, apply: apply, into: &report)
            owners.formUnion(try ledger.owners(ofChainsTransferredAwayBy: account))
        }
        // A chain transferred to an account that holds none of its transactions in the index
        // (its device restored the first account's) is that account's to reconcile.
        let joined = owners.subtracting(accounts).sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        try await Self.inOrder(joined, readingAhead: Self.concurrentReads) { account in
            await fetchCustomer(of: account)
        } process: { account, fetched in
            try await reconcile(account, fetched: fetched, apply: apply, into: &report)
        }
        return report
    }

    /// Compares one account's chains with what Apple said of them, and mends them, chain by chain.
    private func reconcile(
        _ account: String, fetched: [String: Result<AppleSide, any Error>], apply: Bool, into report: inout Report
    ) async throws {
        // Read again now: the appends of the accounts before may have changed it.
        let (held, renewals) = try ledger.heldTransactions(of: account)
        var chains: [String: [HeldTransaction]] = [:]
        for transaction in held { chains[transaction.chain, default: []].append(transaction) }
        for original in chains.keys.sorted(by: { $0.utf8.lexicographicallyPrecedes($1.utf8) }) {
            guard let ours = chains[original], let side = fetched[original] else { continue }
            if case .failure(let error) = side, error is NotReconciled { continue }
            report.originalTransactions += 1
            let apple: AppleSide
            switch side {
            case .success(let read):
                apple = read
            case .failure(let error as AppStoreServerAPIError) where error.code == .notFound:
                // Apple has never heard of it: a credit the ledger holds that Apple does not know.
                for transaction in ours {
                    report.differences.append(Difference(
                        kind: .unknownToApple, account: transaction.account, originalTransaction: original,
                        transaction: transaction.transaction, detail: "Apple does not know the transaction (\(error.message))"))
                }
                continue
            case .failure(let error):
                report.failures.append((original, "\(error)"))
                continue
            }
            var recordings = compare(ours: ours, apple: apple.history, account: account, original: original, into: &report.differences)
            if let renewal = apple.renewal, let event = renewalEvent(
                renewal.payload, signed: renewal.signed, original: original, account: account,
                current: renewals[original], into: &report.differences) {
                recordings.append(AppStoreRecording(purchase: nil, reports: [event], action: .record))
            }
            if apply, !recordings.isEmpty {
                report.appended += try await record(recordings)
            }
        }
        if let calls {
            try await checkCalls(of: account, settings: calls, apply: apply, into: &report)
        }
    }

    /// The calls `account` owes Apple that no event records; with `apply`, made (and recorded)
    /// as `AppStoreCaller` makes them. A call Apple cannot answer now stays owed.
    private func checkCalls(of account: String, settings: AppStoreCallSettings, apply: Bool, into report: inout Report) async throws {
        let held = try ledger.heldTransactions(of: account).held
        let caller = AppStoreCaller(
            settings: settings, clients: sides.map { ($0.environment, $0.client) }, verifier: sides.first?.verifier, ledger: ledger, logger: logger)
        for call in try DueAppStoreCall.owed(by: account, held: held, settings: settings, handle: ledger.accountHandle(of:))
        where sides.contains(where: { $0.environment == call.environment }) {
            guard try ledger.position(ofEventID: call.eventID) == nil else { continue }
            report.differences.append(Difference(
                kind: .appStoreCallOwed, account: account, originalTransaction: held.first { $0.transaction == call.transaction }?.chain ?? call.transaction,
                transaction: call.transaction, detail: "\(call.call.rawValue) was never made"))
            if apply, try await caller.make(call) { report.appended += 1 }
        }
    }

    /// Runs `fetch` on up to `window` items at once, and `process` on each result in the
    /// items' order: at most `window` results wait at any time.
    static func inOrder<Fetched: Sendable>(
        _ items: [String], readingAhead window: Int, fetch: @escaping @Sendable (String) async -> Fetched,
        process: (String, Fetched) async throws -> Void
    ) async throws {
        try await withThrowingTaskGroup(of: (Int, Fetched).self) { group in
            var started = 0
            func startNext() {
                guard started < items.count else { return }
                let index = started
                group.addTask { (index, await fetch(items[index])) }
                started += 1
            }
            for _ in 0..<max(1, window) { startNext() }
            var ready: [Int: Fetched] = [:]
            var processed = 0
            while processed < items.count, let (index, fetched) = try await group.next() {
                ready[index] = fetched
                while let next = ready.removeValue(forKey: processed) {
                    try await process(items[processed], next)
                    processed += 1
                    startNext()
                }
            }
        }
    }

    /// The notifications Apple sent since `since` whose events the ledger lacks (its event ids
    /// come from the notification, so a received one is found by them); with `apply`, appended
    /// as the server would have appended them.
    private func missedNotifications(since: Int64, from side: Side, apply: Bool, into report: inout Report) async throws {
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        let verifier = side.verifier
        let items: [NotificationHistoryPage.Item]
        do {
            items = try await side.client.allNotifications(from: since, to: now)
        } catch {
            report.failures.append(("notification history", "\(error)"))
            return
        }
        for item in items {
            guard let signed = item.signedPayload else { continue }
            let notification: AppStoreNotificationPayload
            let transaction: AppStoreTransactionPayload?
            let renewal: AppStoreRenewalPayload?
            do {
                notification = try await verifier.verifyNotification(signed)
                transaction = try await notification.data?.signedTransactionInfo.asyncMap(verifier.verifyTransaction)
                renewal = try await notification.data?.signedRenewalInfo.asyncMap(verifier.verifyRenewalInfo)
            } catch {
                report.failures.append(("notification", "\(error)"))
                continue
            }
            let action = try AppStoreRecorder.action(
                for: notification, transaction: transaction, renewal: renewal,
                accountHolding: { try ledger.account(holdingTransaction: $0) }, customerAccount: { try ledger.account(ofAppTransaction: $0) },
                chainOwner: { try ledger.account(owningChain: $1, namedBy: $0) })
            let original = transaction?.originalTransactionId ?? renewal?.originalTransactionId ?? ""
            let about = transaction?.transactionId ?? original
            let label = notification.notificationType + (notification.subtype.map { " " + $0 } ?? "")
            switch action {
            case .ignored:
                continue
            case .refused(let reason):
                report.failures.append(("notification \(notification.notificationUUID)", reason))
            case .unattributed(let reason):
                report.differences.append(Difference(
                    kind: .missedNotification, account: "", originalTransaction: original, transaction: about,
                    detail: "\(label) \(notification.notificationUUID): \(reason)"))
            case .record(let recording):
                let events = (recording.purchase.map { [$0.event, $0.finish] } ?? []) + recording.reports
                var missing = false
                for event in events where try ledger.position(ofEventID: event.id) == nil { missing = true }
                guard missing, let account = events.first?.account else { continue }
                report.differences.append(Difference(
                    kind: .missedNotification, account: account, originalTransaction: original, transaction: about,
                    detail: "\(label) \(notification.notificationUUID)"))
                if apply {
                    for case .success(.appended) in try await AppStoreRecorder(ledger: ledger).record(recording) { report.appended += 1 }
                }
            }
        }
    }

    /// What Apple says of one chain: its customer's history, each transaction verified, and for
    /// a subscription its renewal info (Get All Subscription Statuses), verified.
    struct AppleSide: Sendable {
        var history: [(signed: String, payload: AppStoreTransactionPayload)]
        var renewal: (signed: String, payload: AppStoreRenewalPayload)?
    }

    /// What Apple says of one customer: the history (every product's transactions) and the
    /// renewal info of each subscription, by original transaction.
    struct CustomerSide: Sendable {
        var history: [(signed: String, payload: AppStoreTransactionPayload)]
        var renewals: [String: (signed: String, payload: AppStoreRenewalPayload)]
    }

    /// A chain of an environment this reconciliation does not ask Apple about.
    struct NotReconciled: Error, CustomStringConvertible {
        var environment: StoreEnvironment?
        var description: String { "no App Store Server API is configured for \(environment?.rawValue ?? "any environment")" }
    }

    /// How many accounts are read from Apple at once.
    static let concurrentReads = 8

    /// Apple's side of each chain `account` holds, read once per customer: Apple's history of
    /// one chain is its customer's whole history, so it answers for every chain it names; a
    /// chain it does not name (another Apple account's purchase) is read on its own.
    private func fetchCustomer(of account: String) async -> [String: Result<AppleSide, any Error>] {
        var environments: [String: StoreEnvironment?] = [:]
        do {
            for held in try ledger.heldTransactions(of: account).held {
                // A report decides the chain's environment; the device's entries name none.
                let reported = held.report.map { $0.environment ?? .production }
                if environments[held.chain] == nil || reported != nil { environments[held.chain] = .some(reported) }
            }
        } catch {
            return [:]
        }
        let originals = environments.keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        var results: [String: Result<AppleSide, any Error>] = [:]
        var pending = originals
        while let first = pending.first {
            switch await fetch(first, environment: environments[first] ?? nil) {
            case .failure(let error):
                results[first] = .failure(error)
            case .success(let customer):
                let named = Set(customer.history.compactMap { $0.payload.originalTransactionId ?? $0.payload.transactionId })
                for original in pending where original == first || named.contains(original) {
                    results[original] = .success(AppleSide(history: customer.history, renewal: customer.renewals[original]))
                }
            }
            pending.removeAll { results[$0] != nil }
        }
        return results
    }

    /// Apple's side of the chain `original`, from the environment its reports name, else from
    /// each environment in turn until one knows it. A chain of an environment not reconciled
    /// (Xcode, or Sandbox on a Production-only server) is not asked at all.
    private func fetch(_ original: String, environment: StoreEnvironment?) async -> Result<CustomerSide, any Error> {
        let asked = sides.filter { environment == nil || $0.environment == environment }
        var outcome: Result<CustomerSide, any Error> = .failure(NotReconciled(environment: environment))
        for side in asked {
            outcome = await fetch(original, from: side)
            guard case .failure(let error as AppStoreServerAPIError) = outcome, error.code == .notFound else { break }
        }
        return outcome
    }

    private func fetch(_ original: String, from side: Side) async -> Result<CustomerSide, any Error> {
        let (client, verifier) = (side.client, side.verifier)
        do {
            let history = try await self.history(of: original, from: side)
            var renewals: [String: (signed: String, payload: AppStoreRenewalPayload)] = [:]
            // A subscription's renewal info is not in its history.
            if history.contains(where: { $0.payload.expiresDate != nil }) {
                let statuses = try await client.subscriptionStatuses(of: original)
                // The envelope's `originalTransactionId` is not signed: each renewal info is
                // the chain's that its verified payload names.
                for signed in statuses.data?.flatMap({ $0.lastTransactions ?? [] }).compactMap(\.signedRenewalInfo) ?? [] {
                    let payload = try await verifier.verifyRenewalInfo(signed)
                    if let chain = payload.originalTransactionId, renewals[chain] == nil { renewals[chain] = (signed, payload) }
                }
            }
            return .success(CustomerSide(history: history, renewals: renewals))
        } catch {
            return .failure(error)
        }
    }

    /// Apple's renewal info of the subscription as the event that would record it when it
    /// differs from `current` (what the ledger has in force); nil when they agree.
    private func renewalEvent(
        _ payload: AppStoreRenewalPayload, signed: String, original: String, account: String, current: RenewalInfo?,
        into differences: inout [Difference]
    ) -> Event? {
        guard let signedAt = payload.signedDate.map(AppStoreRecorder.timestamp) else {
            differences.append(Difference(
                kind: .renewalDiffers, account: account, originalTransaction: original, transaction: original,
                detail: "Apple's renewal info has no signedDate: not recorded"))
            return nil
        }
        var info = AppStoreRecorder.renewalInfo(payload, original: original, source: "reconcile")
        let same = current.map { current in
            current.willRenew == info.willRenew && current.renewsTo == info.renewsTo && current.billingRetry == info.billingRetry
                && current.gracePeriodEndsAt == info.gracePeriodEndsAt && current.expirationIntent == info.expirationIntent
        } ?? false
        guard !same else { return nil }
        differences.append(Difference(
            kind: .renewalDiffers, account: account, originalTransaction: original, transaction: original,
            detail: current.map { "Apple: \(Self.describe(info)); the ledger: \(Self.describe($0))" } ?? "the ledger has no renewal info"))
        // The signing time is part of the id: the same state signed again later (a refund
        // reversed, a renewal turned back on) is a new report, which supersedes the ones before.
        // Nor the customer's ids: an id stays in the log after a forget, and a digest of them
        // would let anyone who knows them find the customer's events again.
        var content = info
        (content.appAccountToken, content.appTransaction) = (nil, nil)
        let id = "appstore-api:renewal:" + String(decoding: original.utf8.prefix(64), as: UTF8.self) + "/" + Self.hash(
            Event.renewalInfo(id: "x", account: "x", signedAt: signedAt, content).jsonLine)
        // The proof goes in after the id: ECDSA signatures differ at each signing.
        info.signed = signed
        return .renewalInfo(id: id, account: account, signedAt: signedAt, info)
    }

    private static func describe(_ info: RenewalInfo) -> String {
        var parts: [String] = []
        if let willRenew = info.willRenew { parts.append(willRenew ? "renews" : "will not renew") }
        if let renewsTo = info.renewsTo { parts.append("to \(renewsTo)") }
        if info.billingRetry == true { parts.append("billing retry") }
        if let grace = info.gracePeriodEndsAt { parts.append("grace until \(grace)") }
        return parts.isEmpty ? "nothing" : parts.joined(separator: ", ")
    }

    /// Apple's history of the subscription or purchase, each transaction verified.
    private func history(of original: String, from side: Side) async throws -> [(signed: String, payload: AppStoreTransactionPayload)] {
        var verified: [(String, AppStoreTransactionPayload)] = []
        for signed in try await side.client.allTransactions(of: original) {
            verified.append((signed, try await side.verifier.verifyTransaction(signed)))
        }
        return verified
    }

    /// The differences of one chain, and the events that would mend them, in order.
    private func compare(
        ours: [HeldTransaction], apple: [(signed: String, payload: AppStoreTransactionPayload)], account: String, original: String,
        into differences: inout [Difference]
    ) -> [AppStoreRecording] {
        var byTransaction: [String: HeldTransaction] = [:]
        for transaction in ours where transaction.account == account { byTransaction[transaction.transaction] = transaction }
        var recordings: [AppStoreRecording] = []
        var seen: Set<String> = []
        for (signed, payload) in apple {
            // Apple's history of a customer may hold other products' chains: only this one counts.
            guard let id = payload.transactionId, (payload.originalTransactionId ?? id) == original else { continue }
            seen.insert(id)
            func note(_ kind: Difference.Kind, _ detail: String) {
                differences.append(Difference(kind: kind, account: account, originalTransaction: original, transaction: id, detail: detail))
            }
            // The token names the account that bought it; the chain's transfers may have moved it since.
            if let token = payload.appAccountToken.flatMap(AppStoreRecorder.account(fromToken:)),
               ((try? ledger.account(owningChain: original, namedBy: token)) ?? token) != account {
                note(.otherAccount, "Apple's appAccountToken is \(token)")
                continue
            }
            // A report dated by this machine's clock could supersede a later one of Apple's.
            guard let signedAt = payload.signedDate.map(AppStoreRecorder.timestamp) else {
                note(.missingReport, "Apple's transaction has no signedDate: not recorded")
                continue
            }
            var fact = AppStoreRecorder.storeTransaction(payload, id: id, source: "reconcile")
            // Apple's history says refunded by `revocationDate` alone.
            fact.revokedAt = payload.revocationDate.map(AppStoreRecorder.timestamp)
            let reportID = Self.eventID(for: fact, signedAt: signedAt)
            fact.signed = signed
            let reportEvent = Event.storeTransaction(id: reportID, account: account, signedAt: signedAt, fact)
            guard let held = byTransaction[id] else {
                note(.missingPurchase, "\(payload.productId ?? "a product") bought \(payload.purchaseDate.map { "\(AppStoreRecorder.timestamp($0))" } ?? "at an unknown time")")
                let purchase = AppStoreRecorder.purchase(payload, id: id, account: account, uuid: Self.purchaseID(of: id), at: signedAt)
                recordings.append(AppStoreRecording(purchase: purchase, reports: [reportEvent], action: .purchase))
                continue
            }
            var mending: [Event] = []
            // The store's own entry waits for no app: a run cut short after the purchase
            // finishes it now (a finish appended before is a duplicate).
            if held.unfinishedPayment == AppStoreRecorder.payment(forTransaction: id) {
                note(.unfinishedPurchase, "the store's entry of \(id) awaits its finish")
                mending.append(.transactionFinished(
                    id: Self.purchaseID(of: id) + "/finish", account: account, at: signedAt, payment: AppStoreRecorder.payment(forTransaction: id)))
            }
            guard let current = held.report else {
                note(.missingReport, "the ledger has the purchase, not Apple's report of it")
                recordings.append(AppStoreRecording(purchase: nil, reports: mending + [reportEvent], action: .record))
                continue
            }
            var differs = false
            if (current.revokedAt != nil) != (fact.revokedAt != nil) {
                note(.revocationDiffers, fact.revokedAt == nil ? "Apple no longer holds it refunded" : "Apple holds it refunded")
                differs = true
            }
            if current.expiresAt != fact.expiresAt {
                note(.expiryDiffers, "Apple: \(fact.expiresAt.map { "\($0)" } ?? "none"), the ledger: \(current.expiresAt.map { "\($0)" } ?? "none")")
                differs = true
            }
            if (current.upgraded == true) != (fact.upgraded == true) {
                note(.upgradeDiffers, "Apple: \(fact.upgraded == true ? "upgraded" : "not upgraded")")
                differs = true
            }
            if differs { mending.append(reportEvent) }
            if !mending.isEmpty { recordings.append(AppStoreRecording(purchase: nil, reports: mending, action: .record)) }
        }
        for transaction in ours where !seen.contains(transaction.transaction) {
            differences.append(Difference(
                kind: .unknownToApple, account: transaction.account, originalTransaction: original, transaction: transaction.transaction,
                detail: "Apple's history of \(original) does not have it"))
        }
        return recordings
    }

    /// Records each in turn; returns how many events were appended.
    private func record(_ recordings: [AppStoreRecording]) async throws -> Int {
        var appended = 0
        let recorder = AppStoreRecorder(ledger: ledger)
        for recording in recordings {
            for outcome in try await recorder.record(recording) {
                switch outcome {
                case .success(.appended): appended += 1
                case .success: break
                case .failure(let error): logger.notice("reconciliation event refused", metadata: ["error": "\(error)"])
                }
            }
        }
        return appended
    }

    /// The purchase reconciliation records for a transaction Apple has and the ledger lacks.
    static func purchaseID(of transaction: String) -> String {
        "appstore-api:" + transaction
    }

    /// `appstore-api:<transaction>/<hash>` of the report and Apple's signing time: the same
    /// report gets the same id, so a run cut short and run again appends it once; the same
    /// content signed at another time (a refund reversed after a refund) is a new report, which
    /// supersedes the ones signed before it.
    static func eventID(for fact: StoreTransaction, signedAt: Timestamp) -> String {
        var content = fact
        content.signed = nil  // ECDSA signatures differ at each signing; the content does not.
        // Nor the customer's ids: an id stays in the log after a forget, and a digest of them
        // would let anyone who knows them find the customer's events again.
        (content.appAccountToken, content.appTransaction) = (nil, nil)
        let line = Event.storeTransaction(id: "x", account: "x", signedAt: signedAt, content).jsonLine
        return "appstore-api:" + String(decoding: fact.transaction.utf8.prefix(80), as: UTF8.self) + "/" + hash(line)
    }

    /// FNV-1a, 64 bits, in hexadecimal: names a report by its content.
    static func hash(_ text: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        return String(hash, radix: 16)
    }
}

private extension Optional {
    func asyncMap<T>(_ transform: (Wrapped) async throws -> T) async rethrows -> T? {
        guard let value = self else { return nil }
        return try await transform(value)
    }
}
