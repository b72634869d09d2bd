import ArgumentParser

/// `ledger-torture`: proves the ledger's promises against what production does to it.
@main
struct TortureCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ledger-torture",
        abstract: "Crash torture and fuzzing for a purchase ledger.",
        subcommands: [Crash.self, Child.self, Fuzz.self])
}

/// A check failed: the message says what was broken.
struct TortureFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
