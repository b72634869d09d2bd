import Foundation

/// One account with a long history, as JSON Lines for `ledger import`: what shows whether the
/// feed and the timeline grow with an account's history (linearly) or with its square.
///
/// - `consumables`: purchases of a consumable through the device's payment queue, four events
///   each (added, purchasing, purchased, finished), a minute apart.
/// - `renewals`: an auto-renewable subscription renewed by the App Store, one `storeTransaction`
///   a period (an hour here, so that the clock is well past every one of them).
public enum LongAccount: String, CaseIterable, Sendable {
    case consumables
    case renewals

    /// The account every event names.
    public static let account = "long"

    /// The catalog the events name: one consumable and one auto-renewable subscription.
    public static let catalogJSON = """
        {"products": [{"id": "com.example.tenhints", "type": "consumable", "grants": {"hints": 10}}, \
        {"id": "com.example.pro.month", "type": "autoRenewable", "group": "pro"}]}
        """

    /// A file of `events` events (built once and kept under `Scratch.root`), and its catalog.
    public func eventsFile(events: Int) throws -> (events: String, catalog: String) {
        let path = "\(Scratch.root)/long-\(rawValue)-\(events).jsonl"
        let catalog = "\(Scratch.root)/long-catalog.json"
        try Data(Self.catalogJSON.utf8).write(to: URL(fileURLWithPath: catalog))
        if Scratch.exists(path + ".complete") { return (path, catalog) }
        try Data(lines(events: events).joined().utf8).write(to: URL(fileURLWithPath: path))
        Scratch.touch(path + ".complete")
        return (path, catalog)
    }

    func lines(events: Int) -> [String] {
        let start = Date(timeIntervalSince1970: 1_577_836_800)  // 2020-01-01T00:00:00Z
        let format = ISO8601DateFormatter()
        func at(_ seconds: Int) -> String { format.string(from: start.addingTimeInterval(TimeInterval(seconds))) }
        let account = Self.account
        switch self {
        case .consumables:
            return (0..<events / 4).flatMap { i -> [String] in
                let s = i * 60, payment = "P\(i)"
                return [
                    #"{"id":"e\#(i)-1","type":"paymentAdded","account":"\#(account)","at":"\#(at(s))","payment":"\#(payment)","product":"com.example.tenhints"}"# + "\n",
                    #"{"id":"e\#(i)-2","type":"transactionUpdated","account":"\#(account)","at":"\#(at(s + 1))","payment":"\#(payment)","state":"purchasing"}"# + "\n",
                    #"{"id":"e\#(i)-3","type":"transactionUpdated","account":"\#(account)","at":"\#(at(s + 2))","payment":"\#(payment)","state":"purchased","transaction":"\#(3_000_000_000 + i)"}"# + "\n",
                    #"{"id":"e\#(i)-4","type":"transactionFinished","account":"\#(account)","at":"\#(at(s + 3))","payment":"\#(payment)"}"# + "\n",
                ]
            }
        case .renewals:
            return (0..<events).map { i in
                let s = i * 3600
                return #"{"id":"r\#(i)","type":"storeTransaction","account":"\#(account)","at":"\#(at(s))","transaction":"\#(4_000_000_000 + i)","originalTransaction":"4000000000","product":"com.example.pro.month","purchasedAt":"\#(at(s))","expiresAt":"\#(at(s + 3000))","environment":"Production"}"# + "\n"
            }
        }
    }
}
