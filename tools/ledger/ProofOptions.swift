import ArgumentParser
import Foundation
import Logging
import PurchaseLedger
import PurchaseLedgerLocation

/// A key file's text, one line (its trailing newline dropped), or a failure naming the file.
func readKeyFile(_ path: String) throws -> String {
    guard let data = FileManager.default.contents(atPath: path), data.count <= 4096,
          let text = String(bytes: data, encoding: .utf8)
    else { throw CommandFailure(message: "cannot read the key file \(path) (at most 4 KiB of UTF-8)") }
    return text.hasSuffix("\n") ? String(text.dropLast()) : text
}

extension LocationArgument {
    /// Opens the ledger for writing, extends its proof tree to the head, runs `body`, closes it.
    func withProofTree<T>(_ body: (Ledger) async throws -> T) async throws -> T {
        var configuration = Ledger.Configuration()
        configuration.logger.logLevel = .warning
        configuration.snapshotOnClose = false
        // The leaves at this command's own priority: an operator waits for it, and on a host
        // kept busy by a server the idle class would leave it next to nothing.
        configuration.backgroundExecutor = nil
        let ledger = try openLedger(configuration: configuration)
        do {
            try await ledger.extendProofTree()
            let result = try await body(ledger)
            await ledger.close()
            return result
        } catch {
            await ledger.close()
            throw error
        }
    }
}
