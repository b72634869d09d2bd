import AppStoreServerAPI

extension AppStoreServerAPIError {
    /// Whether Apple refused for good, so that asking again would be refused alike: a 4xx other
    /// than 401 (our key, which may be mended) and 429 (busy). What is recorded as `refused`.
    var isFinalRefusal: Bool {
        guard let status else { return false }
        return (400..<500).contains(status) && status != 401 && status != 429
    }
}
