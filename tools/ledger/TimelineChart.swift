import PurchaseLedger

/// `ledger replay --account A --timeline` on a terminal: one bar per product across the
/// account's whole history, then each interval with what started and ended it.
enum TimelineChart {
    static let width = 48

    static func text(_ timeline: [ProductTimeline], style: Style) -> String {
        guard !timeline.isEmpty else { return "  timeline:     \(style.dim("nothing was ever owned"))\n" }
        let instants = timeline.flatMap { $0.intervals.flatMap { [$0.from, $0.until].compactMap { $0 } } }
        let start = instants.min()
        let end = instants.max()
        let nameWidth = timeline.map { $0.product.count }.max() ?? 0
        var out = "  timeline (UTC; \(style.green("█")) owned, \(style.yellow("▒")) grace period)"
        if let start, let end { out += ": \(start) … \(end)" }
        out += "\n"
        for product in timeline {
            let bar = bar(product.intervals, from: start, to: end, style: style)
            out += "    \(padded(product.product, nameWidth))  |\(bar)|\n"
        }
        for product in timeline {
            out += "    " + style.bold(product.product) + "\n"
            for interval in product.intervals {
                let from = interval.from.map { "\($0)" } ?? "(device)"
                let until = interval.until.map { "\($0)" } ?? "now"
                var line = "      \(padded(from, 24)) → \(padded(until, 24))"
                let causes = "\(interval.fromCause.rawValue) → \(interval.untilCause?.rawValue ?? "…")"
                line += "  \(padded(causes, 30))"
                if let transaction = interval.transaction { line += "  \(transaction)" }
                if interval.status == .gracePeriod { line += "  " + style.yellow("grace period") }
                out += line + "\n"
            }
        }
        return out
    }

    /// Each cell is a slice of [start, end]; it is drawn owned when an interval overlaps it.
    private static func bar(_ intervals: [OwnershipInterval], from start: Timestamp?, to end: Timestamp?, style: Style) -> String {
        guard let start, let end, end > start else {
            return String(repeating: intervals.isEmpty ? " " : "█", count: width)
        }
        let span = seconds(end) - seconds(start)
        // Instants nanoseconds apart are one instant at this scale.
        guard span.isFinite, span > 0 else { return String(repeating: "█", count: width) }
        var cells: [Character] = Array(repeating: " ", count: width)
        for interval in intervals {
            let from = interval.from.map { (seconds($0) - seconds(start)) / span } ?? 0
            let until = interval.until.map { (seconds($0) - seconds(start)) / span } ?? 1
            let first = max(0, min(width - 1, Int(from * Double(width))))
            let last = max(first, min(width - 1, Int((until * Double(width)).rounded(.up)) - 1))
            for cell in first...last { cells[cell] = interval.status == .gracePeriod ? "▒" : "█" }
        }
        return cells.map { cell in
            switch cell {
            case "█": style.green("█")
            case "▒": style.yellow("▒")
            default: " "
            }
        }.joined()
    }

    private static func padded(_ text: String, _ width: Int) -> String {
        text + String(repeating: " ", count: max(0, width - text.count))
    }

    private static func seconds(_ time: Timestamp) -> Double {
        Double(time.seconds) + Double(time.nanoseconds) / 1e9
    }
}
