/// What the change feed holds in memory after a forget (`ForgetNotice`): its changes and cursors
/// named by the former names, renamed or lowered so that nothing the process answers afterwards
/// holds one.
extension LedgerChange {
    /// The change with every renamed name (`names`: new names by old bytes) replaced: its
    /// account and cursor, and the names its projection shows (the customer's tokens and app
    /// transaction id in the store's reports). Nil when it names none.
    package func renaming(_ names: [UTF8Key: String]) -> LedgerChange? {
        let renamedProjection = projection.renaming(names)
        let newAccount = names[UTF8Key(account)]
        guard newAccount != nil || renamedProjection != nil else { return nil }
        var change = self
        if let newAccount {
            change.account = newAccount
            change.cursor.account = newAccount
        }
        if let renamedProjection { change.projection = renamedProjection }
        return change
    }
}

extension AccountProjection {
    /// The projection with the renamed names replaced; nil when it names none.
    func renaming(_ names: [UTF8Key: String]) -> AccountProjection? {
        func new(_ name: String?) -> String? { name.flatMap { names[UTF8Key($0)] } }
        var projection = self
        var changed = false
        if let renamed = new(account) {
            projection.account = renamed
            changed = true
        }
        for index in projection.storeTransactions.indices {
            if let token = new(projection.storeTransactions[index].report.appAccountToken) {
                projection.storeTransactions[index].report.appAccountToken = token
                changed = true
            }
            if let customer = new(projection.storeTransactions[index].report.appTransaction) {
                projection.storeTransactions[index].report.appTransaction = customer
                changed = true
            }
        }
        if let customer = new(projection.appTransaction?.appTransaction) {
            projection.appTransaction?.appTransaction = customer
            changed = true
        }
        return changed ? projection : nil
    }
}

extension FeedCursor {
    /// A cursor from outside (a query, `Last-Event-ID`, a stored checkpoint) that names an account
    /// `isCurrent` does not know (forgotten since, or never an account), lowered to the nearest
    /// cursor before it that names none: the position before for a change an event caused, the
    /// position itself (before its time changes) for one time caused. A reader resuming there is
    /// sent some changes again (the feed is at least once) and never misses one, and nothing
    /// answered or stored afterwards echoes the name.
    package func lowered(unless isCurrent: (String) throws -> Bool) rethrows -> FeedCursor {
        guard let account, !(try isCurrent(account)) else { return self }
        if instant != nil { return FeedCursor(position: position) }
        return FeedCursor(position: position == 0 ? 0 : position - 1)
    }
}
