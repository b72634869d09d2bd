#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Forgetting a customer (docs/FORMAT.md, "Forgetting a customer"): what the commit that appends
/// a `forgotten` event renames, and the renaming in storage. The records stay as they are: they
/// name accounts and tokens by handle, and the account table is the one place that holds the
/// names, so renaming a handle's row to its pseudonym renames the account in every record at
/// once. What else holds a name (the indexes, the stored account states, the proofs, parked
/// webhook deliveries) is renamed or removed in the same commit.
enum Forgetting {
    /// A name the commit renames to its handle's pseudonym.
    struct Rename: Sendable, Hashable {
        var handle: UInt64
        var old: String
        var new: String
    }

    /// What forgetting one account changes, decided before its event is appended.
    struct Plan: Sendable {
        /// The account's name first (none when it is a pseudonym already: a copy of a ledger
        /// that forgot it), then the tokens only its records named.
        var renames: [Rename]
        /// The account's own rename, first of `renames` (none when it is a pseudonym already).
        var account: Rename?
        /// The records whose proofs go: the account's, and any other that names a renamed token.
        var proofs: [UInt64]

        var handles: [UInt64] { renames.map(\.handle) }

        var newNames: [UTF8Key: String] { Forgetting.newNames(renames) }
    }

    /// Each renamed name's new name, by the old one's bytes.
    static func newNames(_ renames: [Rename]) -> [UTF8Key: String] {
        Dictionary(renames.map { (UTF8Key($0.old), $0.new) }, uniquingKeysWith: { first, _ in first })
    }

    /// At most this many names one forget renames (the record lists their handles).
    static let maximumRenames = 4096

    /// What forgetting `account` renames, as `writer` sees the ledger before the event.
    static func plan(_ account: String, writer: any LedgerStorageWriter, names: AccountNames) throws -> Plan {
        guard let handle = try writer.accountHandle(of: account) else {
            throw StorageError(.damaged, "an account with events has no handle in the account table")
        }
        var renames: [Rename] = []
        if Forgotten.handle(ofPseudonym: account) != handle {
            renames.append(Rename(handle: handle, old: account, new: Forgotten.pseudonym(ofHandle: handle)))
        }
        let accountRename = renames.first
        let own = try writer.positions(ofAccount: account, after: 0, limit: .max)
        var seen: Set<UTF8Key> = [UTF8Key(account)]
        for position in own {
            for name in try personalNames(at: position, writer: writer, names: names) {
                guard seen.insert(UTF8Key(name)).inserted, let handle = try writer.accountHandle(of: name),
                      Forgotten.handle(ofPseudonym: name) != handle,
                      // A token another account goes by is that account's id: it stays.
                      try writer.positions(ofAccount: name, after: 0, limit: 1).isEmpty
                else { continue }
                renames.append(Rename(handle: handle, old: name, new: Forgotten.pseudonym(ofHandle: handle)))
            }
        }
        guard renames.count <= maximumRenames else {
            throw StorageError(.io, "the account's records name \(renames.count) tokens; a forget renames at most \(maximumRenames)")
        }
        // Proofs carry the token: those of the account's records, and of any record naming a
        // renamed token (a renewal recorded where a transfer moved the purchase).
        let renamed = Set(renames.map { UTF8Key($0.old) })
        let mine = Set(own)
        let stored = try writer.proofPositions()
        var proofs: [UInt64] = []
        if let first = stored.first, let last = stored.last {
            // One pass over the records that keep a proof, read in runs, not one query each.
            let keeping = Set(stored)
            try writer.forEachRecord(from: first, through: last) { position, bytes in
                guard keeping.contains(position) else { return true }
                if mine.contains(position) {
                    proofs.append(position)
                } else if !renamed.isEmpty,
                          try personalNames(of: bytes, at: position, writer: writer, names: names).contains(where: { renamed.contains(UTF8Key($0)) }) {
                    proofs.append(position)
                }
                return true
            }
        }
        return Plan(renames: renames, account: accountRename, proofs: proofs)
    }

    /// The customer's names the record at `position` carries: its token, its app transaction id.
    private static func personalNames(at position: UInt64, writer: any LedgerStorageReader, names: AccountNames) throws -> [String] {
        var found: [String] = []
        _ = try writer.record(at: position) { found = try personalNames(of: $0, at: position, writer: writer, names: names) }
        return found
    }

    private static func personalNames(
        of bytes: UnsafeRawBufferPointer, at position: UInt64, writer: any LedgerStorageReader, names: AccountNames
    ) throws -> [String] {
        let event = try LogReader.decode(bytes, at: position, reader: writer, names: names, readingProofs: false)
        guard PersonalFields.apply(to: event.type) else { return [] }
        var payload = event.payload
        guard let personal = PersonalFields.separate(&payload) else { return [] }
        return [personal.token, personal.appTransaction].compactMap { $0.flatMap { $0.isEmpty ? nil : $0 } }
    }

    /// Renames what `plan` says in the write that appended the `forgotten` event at `position`:
    /// the account table and the indexes (`renameAccount`), the proofs, every stored account
    /// state that names an old name (the account's own, and its transfer partners' and token
    /// holders'), and parked webhook deliveries about it. Records the forget's position, which a
    /// snapshot another process began before it reads (`lastForgetPosition`).
    static func perform(_ plan: Plan, at position: UInt64, writer: any LedgerStorageWriter, catalog: Catalog) throws {
        try writer.setLastForgetPosition(position)
        for rename in plan.renames {
            try writer.renameAccount(handle: rename.handle, from: rename.old, to: rename.new)
            // A customer's app transaction id no longer links anyone to an account.
            try writer.forgetAppTransaction(rename.old)
        }
        for position in plan.proofs {
            try writer.deleteProof(at: position)
        }
        // Her leaves keep her commitment; nobody can link it to her id again.
        if let account = plan.account {
            try AccountCommitment.forget(account.handle, id: account.old, writer: writer)
        }
        guard !plan.renames.isEmpty else { return }
        let newNames = plan.newNames
        let needles = plan.renames.map { Array($0.old.utf8) }
        var stored: [(account: String, version: UInt64, bytes: [UInt8])] = []
        try writer.forEachAccountState { account, version, bytes in
            if newNames[UTF8Key(account)] != nil || needles.contains(where: { Self.occurs($0, in: bytes) }) {
                stored.append((account, version, Array(bytes)))
            }
        }
        for (account, version, bytes) in stored {
            let renamedAccount = newNames[UTF8Key(account)] ?? account
            let state: AccountState
            do {
                state = try bytes.withUnsafeBytes { try AccountStateCodec.decode($0) }.renaming(newNames)
            } catch {
                // A damaged state is rebuilt from the history, which names the new name already.
                guard let rebuilt = try AccountRebuilder(reader: writer, catalog: catalog, names: AccountNames())
                    .state(of: renamedAccount, through: version) else { continue }
                state = rebuilt
            }
            if renamedAccount != account { try writer.deleteAccountState(account: account, version: version) }
            try writer.putAccountState(AccountStateCodec.encode(state), account: renamedAccount, version: version)
        }
        try WebhookState.forget(newNames, needles: needles, writer: writer)
    }
}

extension Forgetting {
    /// Whether `needle`'s bytes occur in `bytes`, in a row: every stored state is searched, so
    /// this is a plain loop over raw bytes, not a generic collection search.
    static func occurs(_ needle: [UInt8], in bytes: UnsafeRawBufferPointer) -> Bool {
        guard let first = needle.first else { return true }
        guard bytes.count >= needle.count else { return false }
        return needle.withUnsafeBytes { needle in
            var start = 0
            let last = bytes.count - needle.count
            while start <= last {
                guard let found = bytes[start...last].firstIndex(of: first) else { return false }
                if memcmp(bytes.baseAddress! + found, needle.baseAddress!, needle.count) == 0 { return true }
                start = found + 1
            }
            return false
        }
    }
}

extension AccountState {
    /// The state with every name in `names` (by its old bytes) replaced: transfer partners and
    /// the store's tokens. The same state when it names none of them.
    func renaming(_ names: [UTF8Key: String]) -> AccountState {
        guard !names.isEmpty else { return self }
        /// The new name of `name`, when it is renamed.
        func new(_ name: String?) -> String? {
            name.flatMap { names[UTF8Key($0)] }
        }
        var state = self
        for (chain, transfer) in transfers {
            if let other = new(transfer.other) { state.transfers[chain]?.other = other }
        }
        func renamed(_ fact: StoreTransaction) -> StoreTransaction? {
            guard new(fact.appAccountToken) != nil || new(fact.appTransaction) != nil else { return nil }
            var fact = fact
            fact.appAccountToken = new(fact.appAccountToken) ?? fact.appAccountToken
            fact.appTransaction = new(fact.appTransaction) ?? fact.appTransaction
            return fact
        }
        func renamed(_ info: RenewalInfo) -> RenewalInfo? {
            guard new(info.appAccountToken) != nil || new(info.appTransaction) != nil else { return nil }
            var info = info
            info.appAccountToken = new(info.appAccountToken) ?? info.appAccountToken
            info.appTransaction = new(info.appTransaction) ?? info.appTransaction
            return info
        }
        for report in storeTransactions {
            if let fact = renamed(report.record.fact) { state.storeTransactions[report.key]?.fact = fact }
        }
        for (chain, record) in renewals {
            if let info = renamed(record.info) { state.renewals[chain]?.info = info }
        }
        for (transaction, records) in environmentReports where records.contains(where: { renamed($0.fact) != nil }) {
            state.environmentReports[transaction] = records.map { record in
                var record = record
                record.fact = renamed(record.fact) ?? record.fact
                return record
            }
        }
        for (chain, records) in environmentRenewals where records.contains(where: { renamed($0.info) != nil }) {
            state.environmentRenewals[chain] = records.map { record in
                var record = record
                record.info = renamed(record.info) ?? record.info
                return record
            }
        }
        if let customer = new(appTransaction?.info.appTransaction) { state.appTransaction?.info.appTransaction = customer }
        return state
    }
}

/// A table keyed by account whose keys a forget renames: a dictionary, or a `CompactTable`.
protocol TableByUTF8Key {
    associatedtype Value
    subscript(key: UTF8Key) -> Value? { get set }
    @discardableResult mutating func removeValue(forKey key: UTF8Key) -> Value?
}

extension Dictionary: TableByUTF8Key where Key == UTF8Key {}
extension CompactTable: TableByUTF8Key {}

extension TableByUTF8Key {
    /// Moves the value under each renamed key (`names`: new names by old) to its new one.
    mutating func moveKeys(_ names: [UTF8Key: String]) {
        for (old, new) in names {
            if let value = removeValue(forKey: old) { self[UTF8Key(new)] = value }
        }
    }
}

extension CompactTable<AccountState> {
    /// Accounts by the states they hold, renamed (`names`: new names by old): one under an
    /// old name moves to its new one, and every state names the new names.
    mutating func rename(_ names: [UTF8Key: String]) {
        moveKeys(names)
        updateEach { _, state in
            let renamed = state.renaming(names)
            return renamed != state ? renamed : nil
        }
    }
}

extension LedgerState {
    /// A forget's renames, in a state kept in memory across it (a change feed's): the accounts
    /// move to their pseudonyms, and every state and holder names the new names.
    mutating func rename(_ renames: [Forgetting.Rename]) {
        guard !renames.isEmpty else { return }
        let names = Forgetting.newNames(renames)
        accounts.rename(names)
        holders.updateEach { _, holder in
            guard let new = names[UTF8Key(holder.entry.account)] else { return nil }
            var renamed = holder
            renamed.entry.account = new
            return renamed
        }
    }
}

extension LogReader {
    /// The renames of the `forgotten` record at `position` this process had read under the
    /// former names (`AccountNames.reread`).
    func renames(ofForgetAt position: UInt64) throws -> [Forgetting.Rename] {
        try storage.read { try Self.renames(ofForgetAt: position, reader: $0, names: storage.accountNames) }
    }

    /// The same, as `reader` sees the ledger.
    static func renames(ofForgetAt position: UInt64, reader: any LedgerStorageReader, names: AccountNames) throws -> [Forgetting.Rename] {
        var handles: [UInt64]?
        _ = try reader.record(at: position) { handles = LogRecordCodec.renamedHandles(in: $0) }
        return try names.reread(handles ?? [], reader: reader)
    }
}
