import Logging
import PurchaseLedger
import ServiceLifecycle

/// Signs a checkpoint of the log's Merkle tree (`"checkpoints"` in the configuration) every
/// `interval` when the log has grown since the newest one kept, and once more on shutdown, so
/// that what the server acknowledged last is covered by a signed head.
struct CheckpointService: Service {
    let ledger: Ledger
    let signer: NoteSigner
    let origin: String?
    let interval: Duration
    let logger: Logger

    static func configured(by configuration: ServerConfiguration, ledger: Ledger, logger: Logger) throws -> CheckpointService? {
        guard let checkpoints = configuration.checkpoints else { return nil }
        return CheckpointService(
            ledger: ledger, signer: try checkpoints.signer(), origin: checkpoints.origin,
            interval: .seconds(checkpoints.everySeconds ?? ServerConfiguration.Checkpoints.defaultEverySeconds), logger: logger)
    }

    func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                await signIfMoved()
                try? await Task.sleep(for: interval)
            }
        }
        // In a task a shutdown has not cancelled: a cancelled task's write is withdrawn.
        await Task { await signIfMoved() }.value
    }

    /// Signs when the log holds events the newest checkpoint does not cover.
    func signIfMoved() async {
        do {
            let newest = try ledger.newestCheckpoint()?.size ?? 0
            guard ledger.position > newest else { return }
            let signed = try await ledger.signCheckpoint(with: signer, origin: origin)
            logger.info("signed a checkpoint", metadata: ["size": "\(signed.size)", "root": "\(signed.checkpoint?.root.base64 ?? "")"])
        } catch {
            logger.error("a checkpoint could not be signed; the next try comes after the interval", metadata: ["error": "\(error)"])
        }
    }
}
