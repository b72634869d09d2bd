/// A subscription or non-consumable purchase moved from one account to another (`transferred`),
/// or shared with another (`shared`): the customer restored, on a new account, a purchase
/// another account holds, and the server's policy for restores across accounts said so
/// (docs/FORMAT.md, "Transfers").
///
/// A transfer is two events with the same fields, appended together: one in the account it
/// leaves (`account` = `from`), which from then on no longer owns the purchase's chain, and
/// one in the account it joins (`account` = `to`), which owns it again if it had transferred
/// it away before. A share is one event, in the account it is shared with. Each changes only
/// its own account, so an account's state is still a function of its own events; who owns a
/// chain follows the accounts' transfers from the account the transactions index names.
public struct Transferred: Sendable, Hashable {
    /// The chain moved: the original transaction of the subscription or purchase.
    public var originalTransaction: String
    public var from: String
    public var to: String

    public init(originalTransaction: String, from: String, to: String) {
        self.originalTransaction = originalTransaction
        self.from = from
        self.to = to
    }

    /// Which side of the transfer an event in `account` records.
    public enum Side: Sendable, Hashable {
        /// The account the purchase leaves.
        case leaving
        /// The account the purchase joins.
        case joining
        /// The account the purchase is shared with (`shared`), its owner keeping it.
        case sharing
    }

    public func side(of account: String) -> Side? {
        if sameBytes(account, from) { return .leaving }
        if sameBytes(account, to) { return .joining }
        return nil
    }

    /// The ids of the two events, `transfer/<originalTransaction>/<at>/out` and `…/in`: the
    /// same request made again appends nothing, and a transfer back later has ids of its own.
    public static func eventIDs(originalTransaction: String, at: Timestamp) -> (leaving: String, joining: String) {
        let base = "transfer/\(originalTransaction)/\(at)"
        return (base + "/out", base + "/in")
    }
}

extension Event {
    /// The `shared` event giving `to` the purchase `from` owns, which `from` keeps: id
    /// `share/<originalTransaction>/<at>`.
    public static func share(originalTransaction: String, from: String, to: String, at: Timestamp) -> Event {
        Event(id: "share/\(originalTransaction)/\(at)", account: to, at: at,
              payload: .shared(Transferred(originalTransaction: originalTransaction, from: from, to: to)))
    }

    /// The two events of a transfer of `originalTransaction` from `from` to `to`, in the order
    /// they are appended (leaving first).
    public static func transfer(originalTransaction: String, from: String, to: String, at: Timestamp) -> [Event] {
        let transfer = Transferred(originalTransaction: originalTransaction, from: from, to: to)
        let ids = Transferred.eventIDs(originalTransaction: originalTransaction, at: at)
        return [
            Event(id: ids.leaving, account: from, at: at, payload: .transferred(transfer)),
            Event(id: ids.joining, account: to, at: at, payload: .transferred(transfer)),
        ]
    }
}
