import Foundation

/// The Python that can import `module` (tools/test's virtual environment, else the system's),
/// nil when none can; awaited, so that the probe holds none of Swift concurrency's threads.
public func python(importing module: String) async -> String? {
    let candidate = ProcessInfo.processInfo.environment["PURCHASE_LEDGER_APPLE_VERIFIER_PYTHON"] ?? "/usr/bin/python3"
    guard let probe = try? ChildProcess(candidate, ["-c", "import \(module)"]) else { return nil }
    return await probe.exit() == .exited(0) ? candidate : nil
}

/// Whether the run must have tools/test's Python packages (`PURCHASE_LEDGER_REQUIRE_APPLE_VERIFIER=1`):
/// a test that needs one then fails without it rather than skipping.
public var pythonPackagesAreRequired: Bool {
    ProcessInfo.processInfo.environment["PURCHASE_LEDGER_REQUIRE_APPLE_VERIFIER"] == "1"
}
