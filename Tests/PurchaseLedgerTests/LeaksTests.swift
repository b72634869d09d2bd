import Foundation
import LedgerTestSupport
import Testing

/// The search the forgetting tests rely on (`Leaks`) finds a name in each encoding it claims to,
/// and nothing in text that does not hold it: a search that finds nothing proves nothing unless
/// it is shown to find.
struct LeaksTests {
    static let name = "ali\"ce/\u{E9}t\u{E9}"

    @Test func itFindsANameInEveryEncodingItSearches() throws {
        let json = try JSONSerialization.data(withJSONObject: ["account": Self.name])
        let nested = try JSONSerialization.data(withJSONObject: ["body": String(decoding: json, as: UTF8.self)])
        for (form, text) in [
            ("raw", "x" + Self.name + "y"),
            ("JSON", String(decoding: json, as: UTF8.self)),
            ("JSON in JSON", String(decoding: nested, as: UTF8.self)),
            ("base64", "zz" + Data(("q" + Self.name + "rs").utf8).base64EncodedString()),
            ("base64url", Data(("ab" + Self.name).utf8).base64EncodedString().replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "+", with: "-")),
            ("JWS", "eyJhbGciOiJFUzI1NiJ9." + Data(json).base64EncodedString().replacingOccurrences(of: "=", with: "")
                .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "+", with: "-") + ".c2ln"),
        ] {
            #expect(!Leaks.find([Self.name], in: Array(text.utf8)).isEmpty, "\(form): \(text)")
        }
        let token = "5C0D2E7A-1B3F-4E8A-9C6D-0F1E2D3C4B5A"
        #expect(!Leaks.find([token.lowercased()], in: Array(("{\"appAccountToken\":\"" + token + "\"}").utf8)).isEmpty)
    }

    @Test func itFindsNothingWhereTheNameIsNot() {
        for text in ["", "alice", "ali\\\"c", "{\"account\": \"forgotten/3\"}", Data("alice".utf8).base64EncodedString()] {
            #expect(Leaks.find([Self.name, "5c0d2e7a-1b3f-4e8a-9c6d-0f1e2d3c4b5a"], in: Array(text.utf8)).isEmpty, "\(text)")
        }
    }
}
