/// The order storage keys account states in: by the account's length in bytes, then by its
/// bytes (LMDB's `accountStates`: length, account, position). A snapshot writes its states in
/// this order, so that each slice rewrites a run of neighbouring pages instead of pages all over
/// the table.
///
/// Made once per account, so that a sort compares integers: the length and the first sixteen
/// bytes, read as two big-endian words, and the whole bytes only for two accounts of one
/// length longer than sixteen bytes that share those. (Comparing the strings' UTF-8 views at
/// each of a sort's comparisons made the capture a long pause of the writer's thread:
/// docs/ARCHITECTURE.md, "Snapshots and opening".)
struct AccountStorageOrder: Comparable {
    let length: Int
    let head: UInt64
    let next: UInt64

    init(_ account: UTF8Key) {
        var string = account.string
        (length, head, next) = string.withUTF8 { bytes in
            // Zero past the end: two accounts compared by these words have the same length.
            func word(at start: Int) -> UInt64 {
                var word: UInt64 = 0
                for index in start..<(start + 8) {
                    word = word << 8 | (index < bytes.count ? UInt64(bytes[index]) : 0)
                }
                return word
            }
            return (bytes.count, word(at: 0), word(at: 8))
        }
    }

    /// Whether equal orders leave the accounts' bytes to decide (`indicesInOrder`).
    var isPartial: Bool { length > 16 }

    static func < (lhs: AccountStorageOrder, rhs: AccountStorageOrder) -> Bool {
        (lhs.length, lhs.head, lhs.next) < (rhs.length, rhs.head, rhs.next)
    }

    /// The indices of `accounts` in the storage's order: a sort of small pairs, not of
    /// whatever the caller holds beside each account.
    static func indicesInOrder<Accounts: RandomAccessCollection<UTF8Key>>(_ accounts: Accounts) -> [Int] where Accounts.Index == Int {
        var keyed = accounts.indices.map { (order: AccountStorageOrder(accounts[$0]), index: $0) }
        keyed.sort { lhs, rhs in
            if lhs.order != rhs.order { return lhs.order < rhs.order }
            // Same length: byte order is the storage's.
            return lhs.order.isPartial && accounts[lhs.index] < accounts[rhs.index]
        }
        return keyed.map(\.index)
    }
}
