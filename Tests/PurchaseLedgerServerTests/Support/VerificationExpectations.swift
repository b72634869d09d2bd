import PurchaseLedgerAppStore
import Testing

/// Expects `body` to throw `AppStoreVerificationError` with `code`: the verifier's refusals.
func expect(_ code: AppStoreVerificationError.Code, _ body: () async throws -> Void, sourceLocation: SourceLocation = #_sourceLocation) async {
    do {
        try await body()
        Issue.record("expected \(code), nothing was thrown", sourceLocation: sourceLocation)
    } catch let error as AppStoreVerificationError {
        #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
    } catch {
        Issue.record("expected \(code), got \(error)", sourceLocation: sourceLocation)
    }
}
