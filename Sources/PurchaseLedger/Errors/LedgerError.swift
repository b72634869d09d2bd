/// Why the ledger rejected an event: one of the interchange format's error codes, and a message
/// that says what was wrong in terms a developer can act on. A rejected event appends nothing.
public struct LedgerError: Error, Sendable, Hashable, CustomStringConvertible {
    /// An error code of the interchange format. `rawValue` is the spec's string.
    public struct Code: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        private enum Base: String, CaseIterable {
            case invalidEvent, unknownProduct, unknownPayment, duplicatePayment, illegalTransition
            case notRestorable, transactionAlreadyCredited, illegalDownload, notFinishable
            case downloadsPending, entryFinished, insufficientBalance, unknownTransaction
        }

        private let base: Base

        private init(_ base: Base) { self.base = base }

        /// Nil for a string that is not one of the spec's codes.
        public init?(rawValue: String) {
            guard let base = Base(rawValue: rawValue) else { return nil }
            self.base = base
        }

        public var rawValue: String { base.rawValue }
        public var description: String { base.rawValue }

        /// Every code, in the order the spec lists them.
        public static let allCases: [Code] = Base.allCases.map(Code.init)

        /// The line or the value itself is wrong: not JSON, a missing or mistyped field, a value
        /// out of range, a field its state requires.
        public static let invalidEvent = Code(.invalidEvent)
        public static let unknownProduct = Code(.unknownProduct)
        public static let unknownPayment = Code(.unknownPayment)
        public static let duplicatePayment = Code(.duplicatePayment)
        public static let illegalTransition = Code(.illegalTransition)
        public static let notRestorable = Code(.notRestorable)
        public static let transactionAlreadyCredited = Code(.transactionAlreadyCredited)
        public static let illegalDownload = Code(.illegalDownload)
        public static let notFinishable = Code(.notFinishable)
        public static let downloadsPending = Code(.downloadsPending)
        public static let entryFinished = Code(.entryFinished)
        public static let insufficientBalance = Code(.insufficientBalance)
        public static let unknownTransaction = Code(.unknownTransaction)
    }

    public var code: Code
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code): \(message)" }
}

extension LedgerError {
    static func invalid(_ message: String) -> LedgerError {
        LedgerError(.invalidEvent, message)
    }
}
