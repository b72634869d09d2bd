import Logging

/// Reading, checking and pruning stored snapshots.
///
/// An account's state is stored under (account, position) each time a snapshot is written with
/// the account changed since the one before; a snapshot at position S reads, for each account,
/// the newest state stored at or before S.
enum SnapshotStates {
    /// A stored snapshot header, decoded or not.
    struct Stored {
        var position: UInt64
        var header: Result<SnapshotHeader, SnapshotHeader.Problem>
    }

    static func headers(_ reader: any LedgerStorageReader) throws -> [Stored] {
        try reader.snapshotHeaders().map { key, bytes in
            Stored(position: key, header: Result { () throws(SnapshotHeader.Problem) in try SnapshotHeader.decode(bytes, key: key) })
        }
    }

    /// The newest snapshot, when it can be used for a log of `lastPosition` events; otherwise
    /// why not (nil when there is no snapshot at all).
    static func newest(_ reader: any LedgerStorageReader, lastPosition: UInt64) throws -> Result<SnapshotHeader, SnapshotHeader.Problem>? {
        guard let newest = try headers(reader).last else { return nil }
        switch newest.header {
        case .success(let header) where header.position > lastPosition:
            return .failure(.damaged("it reflects position \(header.position), beyond the log's end at \(lastPosition)"))
        default:
            return newest.header
        }
    }

    /// The newest usable snapshot at or before `position`, for time travel.
    static func newestUsable(_ reader: any LedgerStorageReader, atOrBefore position: UInt64) throws -> SnapshotHeader? {
        try headers(reader).reversed().lazy.compactMap { try? $0.header.get() }.first { $0.position <= position }
    }

    /// The whole state as of `snapshot` (empty without one), with the ledger-wide facts as of
    /// `factsThrough`. A damaged account state is rebuilt from the account's history.
    static func materialize(
        reader: any LedgerStorageReader, snapshot: UInt64?, factsThrough: UInt64, catalog: Catalog, logger: Logger
    ) throws -> LedgerState {
        var state = LedgerState()
        if let snapshot {
            var pending: (account: String, version: UInt64, bytes: [UInt8])?
            var damaged: [String] = []
            func flush() throws {
                guard let (account, _, bytes) = pending else { return }
                do {
                    let decoded = try bytes.withUnsafeBytes { raw throws(AccountStateCodec.Damage) in try AccountStateCodec.decode(raw) }
                    state.replaceAccount(UTF8Key(account), with: decoded)
                } catch {
                    damaged.append(account)
                }
                pending = nil
            }
            try reader.forEachAccountState { account, version, bytes in
                if let current = pending, !sameBytes(current.account, account) { try flush() }
                if version <= snapshot { pending = (account, version, Array(bytes)) }
            }
            try flush()
            for account in damaged {
                logger.warning("a snapshot's state of an account is damaged; rebuilt from the account's history", metadata: [
                    "account": "\(account)", "snapshot": "\(snapshot)",
                ])
                if let rebuilt = try AccountRebuilder(reader: reader, catalog: catalog, names: AccountNames()).state(of: account, through: snapshot) {
                    state.replaceAccount(UTF8Key(account), with: rebuilt)
                }
            }
        }
        try reader.forEachHolder { transaction, holder in
            if holder.position <= factsThrough { state.holders[UTF8Key(transaction)] = holder }
        }
        try reader.forEachRevocation { transaction, position in
            if position <= factsThrough { state.revocations[UTF8Key(transaction)] = position }
        }
        state.position = snapshot ?? 0
        state.catalog = catalog
        return state
    }

    /// Deletes the stored versions of `accounts` that no snapshot in `retained` reads. (An
    /// account's superseded states go the next time it is written.) Versions above
    /// `keepingAbove` stay whatever reads them: on shared storage, another process may be
    /// writing a snapshot there whose header is not stored yet.
    static func pruneVersions(writer: any LedgerStorageWriter, retained: [UInt64], accounts: [String], keepingAbove: UInt64 = .max) throws {
        for (account, versions) in zip(accounts, try writer.accountStateVersions(of: accounts)) {
            let needed = Set(retained.compactMap { snapshot in versions.last { $0 <= snapshot } })
            for version in versions where !needed.contains(version) && version <= keepingAbove {
                try writer.deleteAccountState(account: account, version: version)
            }
        }
    }
}

extension LedgerState {
    /// Puts a whole account in, keeping the counts right.
    mutating func replaceAccount(_ account: UTF8Key, with state: AccountState) {
        if let previous = accounts[account] {
            entryCount -= previous.entries.count
            unfinishedCount -= previous.entries.unfinishedCount
        }
        accounts[account] = state
        entryCount += state.entries.count
        unfinishedCount += state.entries.unfinishedCount
    }
}
