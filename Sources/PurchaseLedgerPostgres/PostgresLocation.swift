import NIOSSL
import PostgresNIO
import PurchaseLedger

/// Where a PostgreSQL ledger is: a `postgres://` (or `postgresql://`) URL, parsed.
///
/// `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=disable|require]`. The password
/// may also come from `PGPASSWORD`, so that it need not appear in a command line. TLS is off by
/// default (`sslmode=disable`): turn it on with `sslmode=require` when the database is not on
/// this machine or a private network.
public struct PostgresLocation: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: Int
    public var username: String
    public var password: String?
    public var database: String
    public var requiresTLS: Bool

    /// Whether `location` names a PostgreSQL database rather than a directory.
    public static func isPostgresURL(_ location: String) -> Bool {
        location.hasPrefix("postgres://") || location.hasPrefix("postgresql://")
    }

    public init(host: String, port: Int = 5432, username: String, password: String? = nil, database: String, requiresTLS: Bool = false) {
        self.host = host
        self.port = port
        self.username = username
        self.password = password
        self.database = database
        self.requiresTLS = requiresTLS
    }

    /// Parses a URL; throws `StorageError` (`notALedger`) naming what is wrong with it.
    public init(url: String, environment: [String: String] = [:]) throws {
        func bad(_ reason: String) -> StorageError {
            StorageError(.notALedger, "not a usable PostgreSQL URL (\(reason)): \(Self.redacting(url))")
        }
        guard let schemeEnd = url.firstRange(of: "://"), Self.isPostgresURL(url) else { throw bad("it must start with postgres://") }
        var rest = Substring(url[schemeEnd.upperBound...])
        var query: Substring = ""
        if let mark = rest.firstIndex(of: "?") {
            query = rest[rest.index(after: mark)...]
            rest = rest[..<mark]
        }
        guard let at = rest.lastIndex(of: "@") else { throw bad("a user name is needed: postgres://USER@HOST/DATABASE") }
        let credentials = rest[..<at]
        let address = rest[rest.index(after: at)...]
        let user = credentials.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
        guard let name = user.first.map(String.init).flatMap(Self.percentDecoded), !name.isEmpty else { throw bad("no user name") }
        username = name
        password = user.count == 2 ? Self.percentDecoded(String(user[1])) : environment["PGPASSWORD"]
        guard let slash = address.firstIndex(of: "/") else { throw bad("no database name") }
        let hostPort = address[..<slash]
        guard let database = Self.percentDecoded(String(address[address.index(after: slash)...])), !database.isEmpty else {
            throw bad("no database name")
        }
        self.database = database
        if hostPort.hasPrefix("["), let close = hostPort.firstIndex(of: "]") {
            host = String(hostPort[hostPort.index(after: hostPort.startIndex)..<close])
            let after = hostPort[hostPort.index(after: close)...]
            port = after.hasPrefix(":") ? Int(after.dropFirst()) ?? -1 : 5432
        } else if let colon = hostPort.lastIndex(of: ":") {
            host = String(hostPort[..<colon])
            port = Int(hostPort[hostPort.index(after: colon)...]) ?? -1
        } else {
            host = String(hostPort)
            port = 5432
        }
        guard !host.isEmpty else { throw bad("no host") }
        guard (1...65535).contains(port) else { throw bad("the port must be a number from 1 to 65535") }
        requiresTLS = false
        for parameter in query.split(separator: "&") {
            let pair = parameter.split(separator: "=", maxSplits: 1)
            switch (pair.first, pair.count == 2 ? pair[1] : nil) {
            case ("sslmode"?, "disable"?): requiresTLS = false
            case ("sslmode"?, "require"?), ("sslmode"?, "verify-full"?): requiresTLS = true
            case ("sslmode"?, let other): throw bad("sslmode \(other ?? "") is not supported; use disable or require")
            default: throw bad("unknown parameter \(parameter)")
            }
        }
    }

    /// The URL without its password: safe for logs and messages.
    public var description: String {
        let hostPart = host.contains(":") ? "[\(host)]" : host
        return "postgres://\(username)@\(hostPart):\(port)/\(database)" + (requiresTLS ? "?sslmode=require" : "")
    }

    /// A URL as it may be shown: the password, if any, replaced.
    public static func redacting(_ url: String) -> String {
        guard let schemeEnd = url.firstRange(of: "://"), let at = url[schemeEnd.upperBound...].lastIndex(of: "@") else { return url }
        let credentials = url[schemeEnd.upperBound..<at]
        guard let colon = credentials.firstIndex(of: ":") else { return url }
        return String(url[..<colon]) + ":***" + String(url[at...])
    }

    func connectionConfiguration() throws -> PostgresConnection.Configuration {
        let tls: PostgresConnection.Configuration.TLS
        if requiresTLS {
            tls = .require(try NIOSSLContext(configuration: .makeClientConfiguration()))
        } else {
            tls = .disable
        }
        return PostgresConnection.Configuration(host: host, port: port, username: username, password: password, database: database, tls: tls)
    }

    private static func percentDecoded(_ text: String) -> String? {
        guard text.contains("%") else { return text }
        var bytes: [UInt8] = []
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            if byte == UInt8(ascii: "%") {
                guard let high = iterator.next(), let low = iterator.next(),
                      let value = UInt8(String(decoding: [high, low], as: UTF8.self), radix: 16) else { return nil }
                bytes.append(value)
            } else {
                bytes.append(byte)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }
}
