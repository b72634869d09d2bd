/// An LMDB database (a named one, or the main one: `TableOpener.mainTable`) with the Swift
/// types of its keys and values.
///
/// Tables are opened once, when the environment opens (`Environment.Schema`), and their handles
/// stay valid until the environment closes.
public struct Table<Key: LMDBEncodable, Value>: Sendable {
    /// Empty for the main table.
    public let name: String
    let handle: UInt32

    init(name: String, handle: UInt32) {
        self.name = name
        self.handle = handle
    }
}

/// Names the tables an environment opens; creates them when the environment is writable.
public struct TableOpener: ~Copyable {
    let transaction: LMDBCall.Transaction
    let create: Bool

    /// A table files written by an older version may lack: created when the environment is
    /// writable; nil when it is read-only and the file has none.
    public func tableIfPresent<Key: LMDBEncodable, Value>(
        _ name: String, key: Key.Type = Key.self, value: Value.Type = Value.self
    ) throws(LMDBError) -> Table<Key, Value>? {
        do {
            return try table(name, key: key, value: value)
        } catch where !create && error.code == .notFound {
            return nil
        }
    }

    /// A table files written by an older version may have and newer ones do not: never created;
    /// nil when the file has none.
    public func existingTable<Key: LMDBEncodable, Value>(
        _ name: String, key: Key.Type = Key.self, value: Value.Type = Value.self
    ) throws(LMDBError) -> Table<Key, Value>? {
        do {
            return Table(name: name, handle: try LMDBCall.openTable(transaction, name: name, flags: []))
        } catch where error.code == .notFound {
            return nil
        }
    }

    public func table<Key: LMDBEncodable, Value>(
        _ name: String, key: Key.Type = Key.self, value: Value.Type = Value.self
    ) throws(LMDBError) -> Table<Key, Value> {
        let handle = try LMDBCall.openTable(transaction, name: name, flags: create ? .create : [])
        return Table(name: name, handle: handle)
    }

    /// LMDB's main table, which every environment has: its keys are the other tables' names,
    /// and a commit that writes any table rewrites its page (it holds each table's root). A
    /// key stored in it must never be a table's name (`mdb_dbi_open` of that name then fails).
    public func mainTable<Key: LMDBEncodable, Value>(key: Key.Type = Key.self, value: Value.Type = Value.self) throws(LMDBError) -> Table<Key, Value> {
        Table(name: "", handle: try LMDBCall.openMainTable(transaction))
    }
}
