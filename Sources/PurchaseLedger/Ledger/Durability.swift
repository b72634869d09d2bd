extension Ledger {
    /// When an append counts as done. Each backend maps it to its own means (LMDB's sync flags,
    /// PostgreSQL's `synchronous_commit`), so the core names no backend.
    public enum Durability: Sendable, Hashable {
        /// An append returns only once its commit is on disk: nothing acknowledged is lost.
        case synchronous
        /// The flush is skipped: an operating-system crash or power loss may lose the last
        /// acknowledged appends (a process crash loses nothing). For data that can be rebuilt.
        case noSync
    }
}
