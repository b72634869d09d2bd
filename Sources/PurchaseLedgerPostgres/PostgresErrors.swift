import PostgresNIO
import PurchaseLedger

/// Maps PostgreSQL failures to `StorageError`, with the server's message and SQLSTATE.
enum PostgresErrors {
    /// The SQLSTATE PostgreSQL answered with, when the failure is its answer.
    static func sqlState(of error: any Error) -> String? {
        ((error as? StorageError)?.cause as? PostgresFailure)?.error.serverInfo?[.sqlState]
    }

    static func map(_ error: any Error, _ context: String) -> any Error {
        switch error {
        case is StorageError, is LedgerError, is CatalogError:
            return error
        case let psql as PSQLError:
            if let fields = psql.serverInfo {
                let state = fields[.sqlState] ?? "?"
                let message = fields[.message] ?? "\(psql.code)"
                // 53100 disk_full, 53200 out_of_memory, 53300 too_many_connections.
                let code: StorageError.Code = state == "53100" ? .storageFull : .io
                return StorageError(code, "\(context): PostgreSQL says \(message) (SQLSTATE \(state))", cause: PostgresFailure(error: psql))
            }
            return StorageError(.io, "\(context): \(psql.code)", cause: PostgresFailure(error: psql))
        default:
            return StorageError(.io, "\(context): \(error)", cause: error)
        }
    }
}

/// A PostgreSQL failure as a `StorageError`'s cause: the driver's error, described briefly (its
/// own description is deliberately generic; its reflection may show a query's values).
public struct PostgresFailure: Error, CustomStringConvertible {
    public let error: PSQLError

    public var description: String {
        let state = error.serverInfo?[.sqlState].map { ", SQLSTATE \($0)" } ?? ""
        return "PostgreSQL \(error.code)\(state)"
    }
}
