import ArgumentParser
import Foundation
import Logging
import PurchaseLedger
import PurchaseLedgerLMDB

extension TortureCommand {
    /// Feeds the event decoder, the catalog readers and a live ledger with hostile input.
    struct Fuzz: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Feed hostile input to the decoder, the catalog readers and a ledger; every input must be answered.",
            discussion: """
                Inputs are mutations of valid events and catalogs: flipped, inserted and deleted bytes, truncations, \
                splices, huge numbers, deep nesting, invalid UTF-8, NUL bytes, and now and then a 10 MB line. Each \
                must decode or be rejected (invalidEvent, or a catalog error) within a second; decoded events are \
                appended, and a batch that only holds rejects must leave the log unchanged.
                """)

        @Option(help: "Stop after this many inputs.")
        var inputs = 100_000

        @Option(help: "Stop after this many seconds.")
        var seconds = 600

        @Option(help: "Seed of the mutations.")
        var seed: UInt64 = 1

        func run() async throws {
            let directory = NSTemporaryDirectory() + "ledger-fuzz-\(UUID().uuidString)"
            defer { try? FileManager.default.removeItem(atPath: directory) }
            var configuration = Ledger.Configuration()
            configuration.logger.logLevel = .error
            let ledger = try Ledger.open(at: directory, catalog: Workload.catalog, configuration: configuration)
            var fuzzer = Fuzzer(seed: seed)
            let clock = ContinuousClock()
            let deadline = clock.now + .seconds(seconds)
            var tried = 0, decoded = 0, rejected = 0, appended = 0, catalogs = 0
            var batch: [Event] = []
            while tried < inputs, clock.now < deadline {
                tried += 1
                let input = fuzzer.nextEventLine()
                let started = clock.now
                let outcome = input.withUnsafeBufferPointer { buffer in Result { () throws(LedgerError) in try Event(jsonLine: buffer) } }
                if clock.now - started > .seconds(1) {
                    throw TortureFailure("input \(tried) took \(clock.now - started) to decode (\(input.count) bytes)")
                }
                switch outcome {
                case .success(let event):
                    decoded += 1
                    batch.append(event)
                case .failure(let error):
                    guard error.code == .invalidEvent else {
                        throw TortureFailure("input \(tried) was rejected with \(error.code), not invalidEvent")
                    }
                    rejected += 1
                }
                if batch.count == 64 {
                    appended += try await append(batch, to: ledger)
                    batch.removeAll()
                }
                if tried % 10 == 0 {
                    catalogs += 1
                    try fuzzer.fuzzCatalogs()
                }
                if tried % 10_000 == 0 {
                    print("\(tried) inputs: \(decoded) decoded, \(rejected) rejected as invalidEvent, \(appended) appended, \(catalogs) catalogs")
                }
            }
            appended += try await append(batch, to: ledger)
            await ledger.close()
            print("""
                fuzzed \(tried) event inputs (\(decoded) decoded, \(rejected) rejected as invalidEvent, \(appended) appended) \
                and \(catalogs * 2) catalog inputs in \(clock.now - (deadline - .seconds(seconds))): no crash, no hang, \
                every reject left the log unchanged
                """)
        }

        /// Appends a batch; when nothing of it is appended, the log must not have moved.
        private func append(_ events: [Event], to ledger: Ledger) async throws -> Int {
            guard !events.isEmpty else { return 0 }
            let before = ledger.position
            let results = try await ledger.append(contentsOf: events)
            let appended = results.count { if case .success(.appended) = $0 { true } else { false } }
            guard ledger.position == before + UInt64(appended) else {
                throw TortureFailure("the log moved by \(ledger.position - before) for \(appended) appended events")
            }
            return appended
        }
    }
}

/// Mutation-based input generation from valid seeds.
struct Fuzzer {
    private var random: SplitMix
    private var seeds: [[UInt8]] = []
    private let catalogSeed = Array(Workload.catalog.json.utf8)
    private let storeKitSeed = Array("""
        {"products": [{"productID": "a", "type": "Consumable"}, {"productID": "b", "type": "NonConsumable"}],
         "nonRenewingSubscriptions": [{"productID": "c"}],
         "subscriptionGroups": [{"name": "g", "subscriptions": [{"productID": "d"}]}]}
        """.utf8)

    init(seed: UInt64) {
        random = SplitMix(seed: seed)
        var workload = Workload(run: 0, lane: 0, seed: seed)
        for _ in 0..<40 { seeds += workload.flowEvents().map { Array($0.jsonLine.utf8) } }
    }

    private mutating func pick<T>(_ items: [T]) -> T { items[Int(random.next() % UInt64(items.count))] }
    private mutating func chance(_ percent: UInt64) -> Bool { random.next() % 100 < percent }

    mutating func nextEventLine() -> [UInt8] {
        var bytes = pick(seeds)
        if chance(1) { return hugeLine() }
        if chance(2) { return deepNesting() }
        for _ in 0..<(1 + random.next() % 4) { mutate(&bytes) }
        return bytes
    }

    private mutating func mutate(_ bytes: inout [UInt8]) {
        let position = bytes.isEmpty ? 0 : Int(random.next() % UInt64(bytes.count))
        switch random.next() % 10 {
        case 0 where !bytes.isEmpty: bytes[position] ^= UInt8(1 << (random.next() % 8))
        case 1: bytes.insert(UInt8(truncatingIfNeeded: random.next()), at: position)
        case 2 where !bytes.isEmpty: bytes.remove(at: position)
        case 3: bytes = Array(bytes.prefix(position))
        case 4: bytes.insert(contentsOf: Array(pick(seeds).prefix(Int(random.next() % 60))), at: position)
        case 5: bytes.insert(contentsOf: Array(pick(["1e999999", "-0", "123456789012345678901234567890", "1.0e-400", "NaN", "-1", "2.5"]).utf8), at: position)
        case 6: bytes.insert(contentsOf: pick([[0xC3, 0x28], [0xED, 0xA0, 0x80], [0xFF], [0x00], [0xF4, 0x90, 0x80, 0x80]]), at: position)
        case 7: bytes.insert(contentsOf: Array(pick(["\\u0000", "\\ud800", "\\uDC00\\uD800", "\\", "\"", "{", "}", "[", "]", ",", ":", "null"]).utf8), at: position)
        case 8:
            // Replace a value with another type.
            if let colon = bytes[position...].firstIndex(of: UInt8(ascii: ":")) {
                let end = bytes[(colon + 1)...].firstIndex { $0 == UInt8(ascii: ",") || $0 == UInt8(ascii: "}") } ?? bytes.endIndex
                bytes.replaceSubrange((colon + 1)..<end, with: Array(pick(["null", "true", "[]", "{}", "0", "\"\"", "-1", "11"]).utf8))
            }
        default:
            bytes = Array(bytes.shuffled(using: &random).prefix(bytes.count))
        }
    }

    private mutating func hugeLine() -> [UInt8] {
        Array(#"{"id":"huge","type":"consumed","account":"a","at":"2026-01-01T00:00:00Z","item":""#.utf8)
            + [UInt8](repeating: UInt8(ascii: "x"), count: 10 << 20) + Array(#"","amount":1}"#.utf8)
    }

    private mutating func deepNesting() -> [UInt8] {
        let depth = Int(random.next() % 200_000) + 1
        return Array(#"{"id":"deep","type":"consumed","account":"a","at":"2026-01-01T00:00:00Z","item":"x","amount":1,"n":"#.utf8)
            + [UInt8](repeating: UInt8(ascii: "["), count: depth) + [UInt8](repeating: UInt8(ascii: "]"), count: depth) + [UInt8(ascii: "}")]
    }

    /// Both catalog readers must return a catalog or throw `CatalogError`.
    mutating func fuzzCatalogs() throws {
        var json = catalogSeed
        var storeKit = storeKitSeed
        for _ in 0..<(1 + random.next() % 4) {
            mutate(&json)
            mutate(&storeKit)
        }
        for (input, read) in [(json, { try Catalog(json: $0) }), (storeKit, { try Catalog(storeKitConfiguration: $0) })] as [([UInt8], ([UInt8]) throws -> Catalog)] {
            do {
                _ = try read(input)
            } catch is CatalogError {
                continue
            } catch {
                throw TortureFailure("a catalog reader threw \(type(of: error)), not CatalogError: \(error)")
            }
        }
    }
}

