import Foundation
import Testing

/// The folders of `PurchaseLedger` layer one way (docs/ARCHITECTURE.md, "Where does X go"):
/// Model → Rules and AccountState → Projection → the engine (Ledger, Feed, Snapshot, Storage,
/// Proof, Books). A file names no type declared in a folder above its own. The folders that are
/// no layer of their own (Catalog, Errors, JSON, Log, Support) are read by every layer.
struct LayeringTests {
    static let layers: [String: Int] = [
        "Model": 0, "Rules": 1, "AccountState": 1, "Projection": 2,
        "Ledger": 3, "Feed": 3, "Snapshot": 3, "Storage": 3, "Proof": 3, "Books": 3,
    ]
    static let sources = String(#filePath.prefix(upTo: #filePath.range(of: "/Tests/")!.lowerBound)) + "/Sources/PurchaseLedger"

    @Test func noFolderNamesATypeOfAFolderAboveIt() throws {
        var files: [(layer: String, name: String, identifiers: [Substring])] = []
        var declaredIn: [Substring: Set<String>] = [:]
        for layer in Self.layers.keys {
            let directory = Self.sources + "/" + layer
            let names = try FileManager.default.subpathsOfDirectory(atPath: directory).filter { $0.hasSuffix(".swift") }
            for name in names {
                let identifiers = SwiftIdentifiers.of(try String(contentsOfFile: directory + "/" + name, encoding: .utf8))
                files.append((layer, name, identifiers))
                for declared in SwiftIdentifiers.declaredTypes(in: identifiers) { declaredIn[declared, default: []].insert(layer) }
            }
        }
        // A name declared in two layers (a nested `Kind`, say) says nothing of which one is meant.
        let owner = declaredIn.compactMapValues { $0.count == 1 ? $0.first : nil }
        #expect(owner.values.filter { Self.layers[$0] == 3 }.count > 50, "the engine's types were found")
        #expect(owner["LiveProjections"] == "Ledger" && owner["AccountView"] == "Projection" && owner["Event"] == "Model")
        var violations: [String] = []
        for file in files {
            for identifier in Set(file.identifiers) {
                guard let layer = owner[identifier], let above = Self.layers[layer], let own = Self.layers[file.layer], above > own else { continue }
                violations.append("\(file.layer)/\(file.name) names \(identifier), of \(layer)/")
            }
        }
        #expect(violations.isEmpty, "\(violations.sorted().joined(separator: "\n"))")
    }

    @Test func theCheckFindsATypeNamedInCodeNotInCommentsOrStrings() {
        let identifiers = SwiftIdentifiers.of(#"""
            /// Reads `LiveProjections` (a comment) /* and LedgerWriter */
            struct Folded: Sendable { let text = "LogReader \(1)"; let long = """
                SnapshotStates
                """
            }
            extension AccountView { func f() -> QueueEntries? { nil } }
            """#)
        #expect(Set(identifiers) == ["struct", "Folded", "Sendable", "let", "text", "long", "extension", "AccountView", "func", "f", "QueueEntries", "nil"])
        #expect(SwiftIdentifiers.declaredTypes(in: identifiers) == ["Folded"])
    }
}

/// The identifiers of Swift source, without its comments and string literals.
enum SwiftIdentifiers {
    static func of(_ source: String) -> [Substring] {
        var identifiers: [Substring] = []
        let text = Substring(source)
        var index = text.startIndex
        func starts(_ prefix: String) -> Bool { text[index...].hasPrefix(prefix) }
        while index < text.endIndex {
            let character = text[index]
            if starts("//") {
                index = text[index...].firstIndex(of: "\n") ?? text.endIndex
            } else if starts("/*") {
                index = text[text.index(index, offsetBy: 2)...].range(of: "*/")?.upperBound ?? text.endIndex
            } else if starts("\"\"\"") {
                index = text[text.index(index, offsetBy: 3)...].range(of: "\"\"\"")?.upperBound ?? text.endIndex
            } else if character == "\"" {
                index = text.index(after: index)
                while index < text.endIndex, text[index] != "\"", text[index] != "\n" {
                    index = text.index(index, offsetBy: text[index] == "\\" ? 2 : 1, limitedBy: text.endIndex) ?? text.endIndex
                }
                if index < text.endIndex { index = text.index(after: index) }
            } else if character.isLetter || character == "_" {
                let start = index
                while index < text.endIndex, text[index].isLetter || text[index].isNumber || text[index] == "_" { index = text.index(after: index) }
                identifiers.append(text[start..<index])
            } else {
                index = text.index(after: index)
            }
        }
        return identifiers
    }

    /// The names that follow `struct`, `class`, `enum`, `protocol`, `actor` or `typealias`.
    static func declaredTypes(in identifiers: [Substring]) -> [Substring] {
        let keywords: Set<Substring> = ["struct", "class", "enum", "protocol", "actor", "typealias"]
        return zip(identifiers, identifiers.dropFirst()).compactMap { keyword, name in
            keywords.contains(keyword) && name.first?.isUppercase == true ? name : nil
        }
    }
}
