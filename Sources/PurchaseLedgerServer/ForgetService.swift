import Logging
import PurchaseLedger
import ServiceLifecycle

/// What the server keeps of a customer outside the ledger, forgotten with each forget the
/// ledger tells of (its own, a posted `forgotten` event, another server's on PostgreSQL): the
/// audit file of notifications it could not attribute, whose signed payloads may carry the
/// customer's token and app transaction id (`UnattributedNotificationLog.forget`).
struct ForgetService: Service {
    let ledger: Ledger
    let unattributed: UnattributedNotificationLog
    let logger: Logger

    func run() async throws {
        await cancelWhenGracefulShutdown {
            for await notice in ledger.forgets() {
                do {
                    try unattributed.forget(notice.renames.map(\.old))
                } catch {
                    logger.error("the audit file of notifications could not be cleared of a forgotten customer", metadata: [
                        "position": "\(notice.position)", "error": "\(error)",
                    ])
                }
            }
        }
    }
}
