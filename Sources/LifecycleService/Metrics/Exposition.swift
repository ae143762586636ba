import Foundation

/// Prometheus's text exposition format 0.0.4, written by hand (the service has no
/// dependencies): for each family a `# HELP` and a `# TYPE` line, then its samples, one a
/// line, `name{label="value",...} value`.
struct Exposition {
    /// What a scrape answers with.
    static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    /// The kinds of family the service writes.
    enum Kind: String {
        case counter, gauge, histogram
    }

    private(set) var text = ""

    /// Starts a family; its samples follow.
    mutating func family(_ name: String, _ kind: Kind, help: String) {
        text += "# HELP \(name) \(Self.escapeHelp(help))\n# TYPE \(name) \(kind.rawValue)\n"
    }

    /// One sample: `labels` are names and values, in order.
    mutating func sample(_ name: String, _ labels: some Sequence<(String, String)> = [], _ value: String) {
        text += name
        var separator = "{"
        for (label, labelValue) in labels {
            text += "\(separator)\(label)=\"\(Self.escapeLabelValue(labelValue))\""
            separator = ","
        }
        if separator == "," { text += "}" }
        text += " \(value)\n"
    }

    mutating func sample(_ name: String, _ labels: some Sequence<(String, String)> = [], _ value: UInt64) {
        sample(name, labels, String(value))
    }

    mutating func sample(_ name: String, _ labels: some Sequence<(String, String)> = [], _ value: Int) {
        sample(name, labels, String(value))
    }

    mutating func sample(_ name: String, _ labels: some Sequence<(String, String)> = [], _ value: Double) {
        sample(name, labels, Self.format(value))
    }

    /// A float as the format spells it: `+Inf`, `-Inf`, `NaN`, or Swift's shortest exact form
    /// (`0.005`, `1e-05`), which Go's and Python's parsers read back as the same number.
    static func format(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value.isInfinite { return value > 0 ? "+Inf" : "-Inf" }
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return String(value)
    }

    /// Label values escape backslash, double quote and line feed; nothing else needs it.
    static func escapeLabelValue(_ value: String) -> String {
        guard value.utf8.contains(where: { $0 == UInt8(ascii: "\\") || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\n") }) else {
            return value
        }
        var escaped = ""
        for character in value.unicodeScalars {
            switch character {
            case "\\": escaped += "\\\\"
            case "\"": escaped += "\\\""
            case "\n": escaped += "\\n"
            default: escaped.unicodeScalars.append(character)
            }
        }
        return escaped
    }

    /// Help text escapes backslash and line feed (a double quote is literal there).
    static func escapeHelp(_ help: String) -> String {
        help.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\n", with: "\\n")
    }
}
