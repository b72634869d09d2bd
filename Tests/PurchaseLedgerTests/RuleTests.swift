import Testing
@testable import PurchaseLedger

/// Every rule and every error code of the interchange format, and the order of precedence when
/// an event breaks several: each case appends its setup (all of which must be appended), then
/// the probe event, and checks the probe's outcome, and that a rejected probe changed nothing.
struct RuleTests {
    enum Expected: Sendable, CustomStringConvertible {
        case appended
        /// A duplicate of the setup event at this index (its position is index + 1).
        case duplicate(ofSetup: Int)
        case rejected(LedgerError.Code)

        var description: String {
            switch self {
            case .appended: "appended"
            case .duplicate(let index): "duplicate of setup[\(index)]"
            case .rejected(let code): code.rawValue
            }
        }
    }

    struct Case: Sendable, CustomTestStringConvertible {
        let name: String
        let expected: Expected
        /// Builds the setup and the probe with two accounts' scripts, u1 and u2.
        let build: @Sendable (inout Script, inout Script) -> (setup: [Event], probe: Event)

        init(_ name: String, _ expected: Expected, _ build: @escaping @Sendable (inout Script, inout Script) -> ([Event], Event)) {
            self.name = name
            self.expected = expected
            self.build = build
        }

        var testDescription: String { "\(name) → \(expected)" }
    }

    static let tenHints = "com.example.tenhints"
    static let hardWords = "com.example.hardwords"
    static let pro = "com.example.pro.month"
    static let season = "com.example.season"

    /// A purchased, unfinished entry p1 of `product` with transaction t1.
    static func purchased(_ s: inout Script, _ product: String = tenHints, payment: String = "p1", transaction: String = "t1") -> [Event] {
        [s.add(payment, product), s.update(payment, .purchasing), s.purchased(payment, transaction)]
    }

    static let cases: [Case] = [
        // invalidEvent: the event on its own.
        Case("empty id", .rejected(.invalidEvent)) { s, _ in
            var event = s.add("p1", tenHints); event.id = ""; return ([], event)
        },
        Case("id of 129 bytes", .rejected(.invalidEvent)) { s, _ in
            var event = s.add("p1", tenHints); event.id = String(repeating: "x", count: 129); return ([], event)
        },
        Case("id of 128 bytes", .appended) { s, _ in
            var event = s.add("p1", tenHints); event.id = String(repeating: "é", count: 64); return ([], event)
        },
        Case("empty account", .rejected(.invalidEvent)) { s, _ in
            var event = s.add("p1", tenHints); event.account = ""; return ([], event)
        },
        Case("payment of 129 bytes", .rejected(.invalidEvent)) { s, _ in
            ([], s.finish(String(repeating: "p", count: 129)))
        },
        Case("quantity 0", .rejected(.invalidEvent)) { s, _ in ([], s.add("p1", tenHints, quantity: 0)) },
        Case("quantity 11", .rejected(.invalidEvent)) { s, _ in ([], s.add("p1", tenHints, quantity: 11)) },
        Case("quantity 10 of a consumable", .appended) { s, _ in ([], s.add("p1", tenHints, quantity: 10)) },
        Case("quantity 3 of a non-renewing subscription", .appended) { s, _ in ([], s.add("p1", season, quantity: 3)) },
        Case("quantity 2 of a non-consumable", .rejected(.invalidEvent)) { s, _ in ([], s.add("p1", hardWords, quantity: 2)) },
        Case("quantity 2 of an auto-renewable", .rejected(.invalidEvent)) { s, _ in ([], s.add("p1", pro, quantity: 2)) },
        Case("purchased without transaction", .rejected(.invalidEvent)) { s, _ in
            ([s.add("p1", tenHints)], s.update("p1", .purchased))
        },
        Case("restored without originalTransaction", .rejected(.invalidEvent)) { s, _ in
            ([], s.update("p1", .restored, transaction: "t1", product: hardWords))
        },
        Case("failed without error", .rejected(.invalidEvent)) { s, _ in
            ([s.add("p1", tenHints)], s.update("p1", .failed))
        },
        Case("progress above 1", .rejected(.invalidEvent)) { s, _ in
            (purchased(&s), s.download("p1", "d1", .active, progress: 1.5))
        },
        Case("progress below 0", .rejected(.invalidEvent)) { s, _ in
            (purchased(&s), s.download("p1", "d1", .active, progress: -0.1))
        },
        Case("timeRemaining below -1", .rejected(.invalidEvent)) { s, _ in
            (purchased(&s), s.download("p1", "d1", .active, remaining: -2))
        },
        Case("amount 0", .rejected(.invalidEvent)) { s, _ in ([], s.consume("hints", 0)) },
        Case("quantity out of range on a known payment", .rejected(.invalidEvent)) { s, _ in
            ([s.add("p1", tenHints)], s.update("p1", .purchasing, quantity: 11))
        },
        Case("invalidEvent before duplicate id", .rejected(.invalidEvent)) { s, _ in
            let first = s.add("p1", tenHints)
            var probe = s.add("p2", tenHints, quantity: 0); probe.id = first.id
            return ([first], probe)
        },
        Case("new entry of an auto-renewable with quantity 3", .rejected(.invalidEvent)) { s, _ in
            ([], s.update("p1", .purchased, transaction: "t1", product: pro, quantity: 3))
        },

        // duplicate: by id, and the redeliveries the spec names.
        Case("same id, other content", .duplicate(ofSetup: 0)) { s, _ in
            let first = s.add("p1", tenHints)
            var probe = s.add("p2", hardWords); probe.id = first.id
            return ([first], probe)
        },
        Case("duplicate id before unknownPayment", .duplicate(ofSetup: 0)) { s, _ in
            let first = s.add("p1", tenHints)
            var probe = s.finish("nowhere"); probe.id = first.id
            return ([first], probe)
        },
        Case("same id in another account", .duplicate(ofSetup: 0)) { s, t in
            let first = s.add("p1", tenHints)
            var probe = t.add("p1", tenHints); probe.id = first.id
            return ([first], probe)
        },
        Case("purchased redelivered with the same transaction", .duplicate(ofSetup: 2)) { s, _ in
            let setup = purchased(&s)
            return (setup, s.again(setup[2]))
        },
        Case("purchasing redelivered", .duplicate(ofSetup: 1)) { s, _ in
            ([s.add("p1", tenHints), s.update("p1", .purchasing)], s.update("p1", .purchasing))
        },
        Case("deferred redelivered", .duplicate(ofSetup: 1)) { s, _ in
            ([s.add("p1", tenHints), s.update("p1", .deferred)], s.update("p1", .deferred))
        },
        Case("failed redelivered with another error", .duplicate(ofSetup: 1)) { s, _ in
            ([s.add("p1", tenHints), s.update("p1", .failed, error: "paymentCancelled")], s.update("p1", .failed, error: "unknown"))
        },
        Case("redelivery points at the update that set the state", .duplicate(ofSetup: 3)) { s, _ in
            ([s.add("p1", tenHints), s.update("p1", .deferred), s.update("p1", .purchasing), s.update("p1", .deferred)],
             s.update("p1", .deferred))
        },
        Case("redelivery of an entry opened by transactionUpdated", .duplicate(ofSetup: 0)) { s, _ in
            ([s.purchased("p1", "t1", product: hardWords)], s.purchased("p1", "t1", product: hardWords))
        },
        Case("purchased redelivered after finish", .duplicate(ofSetup: 2)) { s, _ in
            (purchased(&s) + [s.finish("p1")], s.purchased("p1", "t1"))
        },
        Case("restored redelivered after finish", .duplicate(ofSetup: 0)) { s, _ in
            ([s.update("p1", .restored, transaction: "t2", original: "t1", product: hardWords), s.finish("p1")],
             s.update("p1", .restored, transaction: "t2", original: "t1"))
        },
        Case("finish repeated", .duplicate(ofSetup: 3)) { s, _ in
            (purchased(&s) + [s.finish("p1")], s.finish("p1"))
        },
        Case("revocation repeated", .duplicate(ofSetup: 3)) { s, _ in
            (purchased(&s, hardWords) + [s.revoke("t1")], s.revoke("t1"))
        },
        Case("revocation repeated by another account that holds it", .duplicate(ofSetup: 3)) { s, t in
            (purchased(&s, hardWords) + [s.revoke("t1"), t.update("r1", .restored, transaction: "t9", original: "t1", product: hardWords)],
             t.revoke("t1"))
        },

        // unknownProduct
        Case("paymentAdded of an unknown product", .rejected(.unknownProduct)) { s, _ in ([], s.add("p1", "com.example.nothing")) },
        Case("unknownProduct before the quantity rule", .rejected(.unknownProduct)) { s, _ in
            ([], s.add("p1", "com.example.nothing", quantity: 5))
        },
        Case("new entry of an unknown product", .rejected(.unknownProduct)) { s, _ in
            ([], s.purchased("p1", "t1", product: "com.example.nothing"))
        },
        Case("empty product id", .rejected(.unknownProduct)) { s, _ in ([], s.add("p1", "")) },

        // unknownPayment
        Case("update of an unknown payment without product", .rejected(.unknownPayment)) { s, _ in
            ([], s.update("p1", .purchasing))
        },
        Case("download of an unknown payment", .rejected(.unknownPayment)) { s, _ in
            ([], s.download("p1", "d1", .active))
        },
        Case("finish of an unknown payment", .rejected(.unknownPayment)) { s, _ in ([], s.finish("p1")) },
        Case("payment known only in another account", .rejected(.unknownPayment)) { s, t in
            (purchased(&s), t.finish("p1"))
        },
        Case("unknownPayment before a bad timeRemaining", .rejected(.unknownPayment)) { s, _ in
            ([], s.download("p1", "d1", .active, remaining: -0.5))
        },

        // duplicatePayment
        Case("payment added twice", .rejected(.duplicatePayment)) { s, _ in
            ([s.add("p1", tenHints)], s.add("p1", hardWords))
        },
        Case("payment id of a finished entry", .rejected(.duplicatePayment)) { s, _ in
            (purchased(&s) + [s.finish("p1")], s.add("p1", tenHints))
        },
        Case("quantity rule before duplicatePayment", .rejected(.invalidEvent)) { s, _ in
            ([s.add("p1", tenHints)], s.add("p1", hardWords, quantity: 2))
        },
        Case("same payment id in another account", .appended) { s, t in
            ([s.add("p1", tenHints)], t.add("p1", tenHints))
        },

        // illegalTransition and the legal moves of the state machine
        Case("added → restored", .rejected(.illegalTransition)) { s, _ in
            ([s.add("p1", hardWords)], s.update("p1", .restored, transaction: "t1", original: "t0"))
        },
        Case("added → purchased", .appended) { s, _ in ([s.add("p1", tenHints)], s.purchased("p1", "t1")) },
        Case("deferred → purchasing", .appended) { s, _ in
            ([s.add("p1", tenHints), s.update("p1", .deferred)], s.update("p1", .purchasing))
        },
        Case("purchasing → deferred", .appended) { s, _ in
            ([s.add("p1", tenHints), s.update("p1", .purchasing)], s.update("p1", .deferred))
        },
        Case("purchasing → purchasing → … is not a transition", .duplicate(ofSetup: 1)) { s, _ in
            ([s.add("p1", tenHints), s.update("p1", .purchasing)], s.update("p1", .purchasing))
        },
        Case("purchased → failed", .rejected(.illegalTransition)) { s, _ in
            (purchased(&s), s.update("p1", .failed, error: "unknown"))
        },
        Case("purchased again with another transaction", .rejected(.illegalTransition)) { s, _ in
            (purchased(&s), s.purchased("p1", "t2"))
        },
        Case("failed → purchased", .rejected(.illegalTransition)) { s, _ in
            ([s.add("p1", tenHints), s.update("p1", .failed, error: "paymentCancelled")], s.purchased("p1", "t1"))
        },

        // notRestorable
        Case("restore of a consumable", .rejected(.notRestorable)) { s, _ in
            ([], s.update("p1", .restored, transaction: "t2", original: "t1", product: tenHints))
        },
        Case("restore of a non-renewing subscription", .rejected(.notRestorable)) { s, _ in
            ([], s.update("p1", .restored, transaction: "t2", original: "t1", product: season))
        },
        Case("restore of a non-consumable", .appended) { s, _ in
            ([], s.update("p1", .restored, transaction: "t2", original: "t1", product: hardWords))
        },
        Case("restore of an auto-renewable", .appended) { s, _ in
            ([], s.update("p1", .restored, transaction: "t2", original: "t1", product: pro))
        },
        Case("notRestorable before transactionAlreadyCredited", .rejected(.notRestorable)) { s, t in
            (purchased(&s), t.update("p2", .restored, transaction: "t1", original: "t1", product: tenHints))
        },

        // transactionAlreadyCredited: store transaction ids are global; another account never
        // takes one. Another entry of the same account does, without a second credit (1.1).
        Case("transaction held by another account's entry", .rejected(.transactionAlreadyCredited)) { s, t in
            (purchased(&s), t.purchased("p1", "t1", product: tenHints))
        },
        Case("transaction held by another account's finished entry", .rejected(.transactionAlreadyCredited)) { s, t in
            (purchased(&s) + [s.finish("p1")], t.purchased("p2", "t1", product: tenHints))
        },
        Case("restored with a transaction another account holds", .rejected(.transactionAlreadyCredited)) { s, t in
            (purchased(&s, hardWords), t.update("p2", .restored, transaction: "t1", original: "t1", product: hardWords))
        },
        Case("illegalTransition before transactionAlreadyCredited", .rejected(.illegalTransition)) { s, t in
            (purchased(&s) + [t.add("p1", tenHints), t.update("p1", .failed, error: "x")], t.purchased("p1", "t1"))
        },
        Case("1.1: transaction held by another entry of the account", .appended) { s, _ in
            (purchased(&s) + [s.add("p2", tenHints)], s.purchased("p2", "t1"))
        },
        Case("1.1: transaction held by a finished entry of the account", .appended) { s, _ in
            (purchased(&s) + [s.finish("p1")], s.purchased("p2", "t1", product: tenHints))
        },
        Case("1.1: restored with a transaction the account holds", .appended) { s, _ in
            (purchased(&s, hardWords), s.update("p2", .restored, transaction: "t1", original: "t1", product: hardWords))
        },
        Case("1.1: the second entry's repeated update is a duplicate", .duplicate(ofSetup: 4)) { s, _ in
            (purchased(&s) + [s.add("p2", tenHints), s.purchased("p2", "t1")], s.purchased("p2", "t1"))
        },
        // The store's reports: kept whatever came before, but a transaction grants once.
        Case("store: a report of a transaction another account holds", .rejected(.transactionAlreadyCredited)) { s, t in
            (purchased(&s, hardWords), t.store("t1", hardWords))
        },
        Case("store: a report of a transaction the account holds", .appended) { s, _ in
            (purchased(&s, hardWords), s.store("t1", hardWords))
        },
        Case("store: a refund before its purchase is kept", .appended) { s, _ in
            ([], s.store("t1", tenHints, revoked: true))
        },
        Case("store: a report older than the one in force is kept", .appended) { s, t in
            let older = t.store("t1", hardWords)
            return ([s.store("t1", hardWords)], Event(id: "older", account: s.account, at: newYear, payload: older.payload))
        },
        Case("store: unknownProduct", .rejected(.unknownProduct)) { s, _ in
            ([], s.store("t1", "com.example.unknown"))
        },
        Case("store: unknownProduct before transactionAlreadyCredited", .rejected(.unknownProduct)) { s, t in
            (purchased(&s, hardWords), t.store("t1", "com.example.unknown"))
        },
        Case("store: quantity must be 1 for a non-consumable", .rejected(.invalidEvent)) { s, _ in
            ([], s.store("t1", hardWords, quantity: 2))
        },
        Case("store: renewal info names products outside the catalog", .appended) { s, _ in
            ([], .renewalInfo(id: "r1", account: s.account, signedAt: newYear, RenewalInfo(
                originalTransaction: "t1", product: "com.example.gone", renewsTo: "com.example.unknown")))
        },
        Case("a renewal: new entry, new transaction, same original", .appended) { s, _ in
            (purchased(&s, pro), s.purchased("p2", "t2", product: pro, original: "t1"))
        },

        // illegalDownload
        Case("download before purchase", .rejected(.illegalDownload)) { s, _ in
            ([s.add("p1", tenHints)], s.download("p1", "d1", .waiting))
        },
        Case("download of a failed entry", .rejected(.illegalDownload)) { s, _ in
            ([s.add("p1", tenHints), s.update("p1", .failed, error: "x")], s.download("p1", "d1", .waiting))
        },
        Case("download of a restored entry", .appended) { s, _ in
            ([s.update("p1", .restored, transaction: "t2", original: "t1", product: hardWords)], s.download("p1", "d1", .active, progress: 0.2))
        },
        Case("update of a finished download", .rejected(.illegalDownload)) { s, _ in
            (purchased(&s) + [s.download("p1", "d1", .finished, progress: 1)], s.download("p1", "d1", .finished, progress: 1))
        },
        Case("update of a cancelled download", .rejected(.illegalDownload)) { s, _ in
            (purchased(&s) + [s.download("p1", "d1", .cancelled, progress: 0.3)], s.download("p1", "d1", .active, progress: 0.3))
        },
        Case("progress going back", .rejected(.illegalDownload)) { s, _ in
            (purchased(&s) + [s.download("p1", "d1", .active, progress: 0.5)], s.download("p1", "d1", .active, progress: 0.4))
        },
        Case("progress omitted after 0.5 (defaults to 0)", .rejected(.illegalDownload)) { s, _ in
            (purchased(&s) + [s.download("p1", "d1", .active, progress: 0.5)], s.download("p1", "d1", .paused))
        },
        Case("progress unchanged", .appended) { s, _ in
            (purchased(&s) + [s.download("p1", "d1", .active, progress: 0.5)], s.download("p1", "d1", .paused, progress: 0.5))
        },
        Case("timeRemaining between -1 and 0", .rejected(.illegalDownload)) { s, _ in
            (purchased(&s), s.download("p1", "d1", .active, remaining: -0.5))
        },
        Case("timeRemaining -1 means unknown", .appended) { s, _ in
            (purchased(&s), s.download("p1", "d1", .active, remaining: -1))
        },

        // notFinishable
        Case("finish of an added entry", .rejected(.notFinishable)) { s, _ in ([s.add("p1", tenHints)], s.finish("p1")) },
        Case("finish while purchasing", .rejected(.notFinishable)) { s, _ in
            ([s.add("p1", tenHints), s.update("p1", .purchasing)], s.finish("p1"))
        },
        Case("finish while deferred (Ask to Buy)", .rejected(.notFinishable)) { s, _ in
            ([s.add("p1", tenHints), s.update("p1", .deferred)], s.finish("p1"))
        },
        Case("finish of a failed entry", .appended) { s, _ in
            ([s.add("p1", tenHints), s.update("p1", .failed, error: "x")], s.finish("p1"))
        },

        // downloadsPending
        Case("finish with an active download", .rejected(.downloadsPending)) { s, _ in
            (purchased(&s) + [s.download("p1", "d1", .active, progress: 0.5)], s.finish("p1"))
        },
        Case("finish with a paused download", .rejected(.downloadsPending)) { s, _ in
            (purchased(&s) + [s.download("p1", "d1", .paused, progress: 0.5)], s.finish("p1"))
        },
        Case("finish with a waiting download", .rejected(.downloadsPending)) { s, _ in
            (purchased(&s) + [s.download("p1", "d1", .finished, progress: 1), s.download("p1", "d2", .waiting)], s.finish("p1"))
        },
        Case("finish after downloads failed or were cancelled", .appended) { s, _ in
            (purchased(&s) + [s.download("p1", "d1", .failed, progress: 0.2), s.download("p1", "d2", .cancelled)], s.finish("p1"))
        },

        // entryFinished
        Case("download on a finished entry", .rejected(.entryFinished)) { s, _ in
            (purchased(&s) + [s.finish("p1")], s.download("p1", "d1", .active))
        },
        Case("new state on a finished entry", .rejected(.entryFinished)) { s, _ in
            (purchased(&s) + [s.finish("p1")], s.update("p1", .purchasing))
        },
        Case("another transaction on a finished entry", .rejected(.entryFinished)) { s, _ in
            (purchased(&s) + [s.finish("p1")], s.purchased("p1", "t2"))
        },

        // insufficientBalance
        Case("consume with no balance", .rejected(.insufficientBalance)) { s, _ in ([], s.consume("hints", 1)) },
        Case("consume more than the balance", .rejected(.insufficientBalance)) { s, _ in
            (purchased(&s), s.consume("hints", 11))
        },
        Case("consume the whole balance", .appended) { s, _ in (purchased(&s), s.consume("hints", 10)) },
        Case("consume after a refund", .rejected(.insufficientBalance)) { s, _ in
            (purchased(&s) + [s.revoke("t1")], s.consume("hints", 1))
        },
        Case("balances are per account", .rejected(.insufficientBalance)) { s, t in
            (purchased(&s), t.consume("hints", 1))
        },

        // unknownTransaction
        Case("revoke of an unknown transaction", .rejected(.unknownTransaction)) { s, _ in
            (purchased(&s), s.revoke("t9"))
        },
        Case("revoke of another account's transaction", .rejected(.unknownTransaction)) { s, t in
            (purchased(&s) + [t.add("p1", tenHints)], t.revoke("t1"))
        },
        Case("unknownTransaction before duplicate", .rejected(.unknownTransaction)) { s, t in
            (purchased(&s) + [s.revoke("t1"), t.add("p1", tenHints)], t.revoke("t1"))
        },
        Case("revoke by original transaction", .appended) { s, _ in
            (purchased(&s, pro) + [s.purchased("p2", "t2", product: pro, original: "t1")], s.revoke("t1"))
        },
        Case("revoke of a finished entry's transaction", .appended) { s, _ in
            (purchased(&s, hardWords) + [s.finish("p1")], s.revoke("t1"))
        },
    ]

    /// Every case on every backend: the rules are the same code on both, and must give the same
    /// outcome whatever holds the log.
    @Test(arguments: Backend.available, cases)
    func rule(on backend: Backend, _ rule: Case) async throws {
        var u1 = Script("u1")
        var u2 = Script("u2")
        let (setup, probe) = rule.build(&u1, &u2)
        try await withLedger(on: backend) { ledger, _ in
            try await ledger.appendAll(setup)
            let before = (try ledger.currentState())
            let result = try await ledger.append(contentsOf: [probe])[0]
            switch rule.expected {
            case .appended:
                #expect(result == .success(.appended(position: UInt64(setup.count + 1))))
            case .duplicate(let index):
                #expect(result == .success(.duplicate(of: UInt64(index + 1))))
                #expect((try ledger.currentState()) == before)
            case .rejected(let code):
                #expect(result.code == code, "\(result)")
                #expect((try ledger.currentState()) == before)
            }
            if case .failure(let error) = result {
                #expect(!error.message.isEmpty)
                await #expect(throws: error) { try await ledger.append(probe) }
            }
        }
    }

    @Test func everyErrorCodeIsCovered() {
        let covered = Set(Self.cases.compactMap { if case .rejected(let code) = $0.expected { code } else { nil } })
        #expect(covered == Set(LedgerError.Code.allCases))
        #expect(LedgerError.Code.allCases.map(\.rawValue) == [
            "invalidEvent", "unknownProduct", "unknownPayment", "duplicatePayment", "illegalTransition",
            "notRestorable", "transactionAlreadyCredited", "illegalDownload", "notFinishable",
            "downloadsPending", "entryFinished", "insufficientBalance", "unknownTransaction",
        ])
    }
}
