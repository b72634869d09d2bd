import LedgerTestSupport
import Testing
@testable import PurchaseLedger

/// The dense table a replay keeps its accounts and holders in: it answers as a dictionary does,
/// through inserts, in-place changes and removals (which move elements and slots about).
struct CompactTableTests {
    @Test(arguments: [1 as UInt64, 2, 3, 4])
    func answersAsADictionaryThroughInsertsChangesAndRemovals(seed: UInt64) {
        var random = SeededGenerator(seed: seed)
        var table = CompactTable<Int>()
        var model: [UTF8Key: Int] = [:]
        // Few keys for many operations: the table grows and shrinks across its first sizes,
        // where runs of slots are long and wrap around the end.
        let keys = (0..<40).map { UTF8Key("key-\($0)") }
        for step in 0..<20_000 {
            let key = keys[Int.random(in: 0..<keys.count, using: &random)]
            switch Int.random(in: 0..<5, using: &random) {
            case 0:
                table[key] = step
                model[key] = step
            case 1:
                #expect(table.removeValue(forKey: key) == model.removeValue(forKey: key))
            case 2:
                let answer = table.modify(key, default: { -1 }) { value -> Int in
                    value += 1
                    return value
                }
                model[key, default: -1] += 1
                #expect(answer == model[key])
            case 3:
                let answer = table.modifyIfPresent(key) { value -> Int in
                    value *= 2
                    return value
                }
                if model[key] != nil { model[key]! *= 2 }
                #expect(answer == model[key])
            default:
                table[key] = nil
                model[key] = nil
            }
            #expect(table.count == model.count)
            for key in keys where table[key] != model[key] {
                Issue.record("step \(step): \(key) is \(String(describing: table[key])), not \(String(describing: model[key]))")
                return
            }
        }
        #expect(Dictionary(uniqueKeysWithValues: table.keysAndValues.map { ($0.key, $0.value) }) == model)
    }

    @Test func keysAreComparedByTheirBytes() {
        var table = CompactTable<String>()
        table[UTF8Key("caf\u{E9}")] = "composed"
        table[UTF8Key("cafe\u{301}")] = "decomposed"
        #expect(table.count == 2)
        #expect(table[UTF8Key("caf\u{E9}")] == "composed")
        #expect(table[UTF8Key("cafe\u{301}")] == "decomposed")
    }

    @Test func twoTablesAreEqualWhateverTheOrderTheirKeysCameIn() {
        var forward = CompactTable<Int>()
        var backward = CompactTable<Int>()
        for number in 0..<1000 { forward[UTF8Key("k\(number)")] = number }
        for number in (0..<1000).reversed() { backward[UTF8Key("k\(number)")] = number }
        #expect(forward == backward)
        backward[UTF8Key("k500")] = -1
        #expect(forward != backward)
        backward[UTF8Key("k500")] = 500
        backward.removeValue(forKey: UTF8Key("k0"))
        #expect(forward != backward)
    }

    @Test func reservingRoomKeepsWhatIsThere() {
        var table = CompactTable<Int>()
        for number in 0..<100 { table[UTF8Key("k\(number)")] = number }
        table.reserveCapacity(100_000)
        #expect(table.count == 100)
        for number in 0..<100 { #expect(table[UTF8Key("k\(number)")] == number) }
        #expect(table[UTF8Key("k100")] == nil)
    }
}
