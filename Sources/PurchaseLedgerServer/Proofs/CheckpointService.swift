import Logging
import PurchaseLedger
import ServiceLifecycle

/// Signs a checkpoint of the log's Merkle tree (`"checkpoints"` in the configuration) every
/// `interval` when the log has grown since the newest one kept, and once more on shutdown, so
/// that what the server acknowledged last is covered by a signed head. Meanwhile the tree
/// follows the log (`Ledger.followProofTree()`, its leaves worked out at the feed's priority,
/// `feedPriority`: the ledger's `backgroundExecutor`), so that each signing finds it nearly
/// there.
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
            interval: .seconds(checkpoints.everySeconds ?? ServerConfiguration.Checkpoints.defaultEverySeconds),
            logger: logger)
    }

    func run() async throws {
        await cancelWhenGracefulShutdown {
            await withTaskGroup(of: Void.self) { group in
                group.addTask { [ledger] in await ledger.followProofTree() }
                while !Task.isCancelled {
                    await signIfMoved()
                    try? await Task.sleep(for: interval)
                }
                group.cancelAll()
            }
        }
        // In a task a shutdown has not cancelled: a cancelled task's write is withdrawn. Only
        // when the tree is nearly there: a stop never waits for a long extension (a ledger
        // whose checkpoints were just turned on), which the next start goes on with.
        await Task { await signIfMoved(withinLeaves: Ledger.proofTreeLeavesPerWrite) }.value
    }

    /// Signs when the log holds events the newest checkpoint does not cover (and, with
    /// `withinLeaves`, the tree lacks at most that many of them).
    func signIfMoved(withinLeaves limit: UInt64? = nil) async {
        do {
            let newest = try ledger.newestCheckpoint()?.size ?? 0
            let position = ledger.position
            guard position > newest else { return }
            if let limit, position - min(position, try ledger.proofTreeSize()) > limit {
                logger.notice("no checkpoint signed on stopping: the tree is far behind the log, and the next start extends it",
                              metadata: ["position": "\(position)"])
                return
            }
            let signed = try await ledger.signCheckpoint(with: signer, origin: origin)
            logger.info("signed a checkpoint", metadata: ["size": "\(signed.size)", "root": "\(signed.checkpoint?.root.base64 ?? "")"])
        } catch is CancellationError {
            // Stopping: the shutdown's own signing follows.
        } catch {
            logger.error("a checkpoint could not be signed; the next try comes after the interval", metadata: ["error": "\(error)"])
        }
    }
}
