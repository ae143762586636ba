import Foundation

/// Structured log lines on standard error, one per line: logfmt
/// (`time=… level=info msg="lifecycled started" key=value …`) or, for log shippers, one
/// JSON object per line with the same members.
///
/// Requests are logged at info by the access-log middleware (one line each); notable
/// events (start, stop, instance created, unexpected events, store failures) at info or
/// above; libmicrohttpd's messages about single clients at debug.
public struct LineLogger: Sendable {
    /// How notable a line is; a logger writes its level and above.
    public enum Level: Int, Sendable, Comparable, CaseIterable {
        case debug, info, warning, error

        /// The level `--log-level` names (`debug`, `info`, `warning`, `error`; any case).
        public init?(name: String) {
            guard let level = Self.allCases.first(where: { "\($0.name)" == name.lowercased() }) else { return nil }
            self = level
        }

        /// Less notable.
        public static func < (a: Level, b: Level) -> Bool { a.rawValue < b.rawValue }
    }

    /// How a line is written.
    public enum Format: String, Sendable, CaseIterable {
        case logfmt, json
    }

    /// The least notable level written.
    public var level: Level
    /// How each line is written.
    public var format: Format
    /// Where the lines go.
    public let sink: LogSink

    /// A logger writing `level` and above to `sink` (the process's standard error).
    public init(level: Level = .info, format: Format = .logfmt, sink: LogSink = .standardError) {
        self.level = level
        self.format = format
        self.sink = sink
    }

    /// Whether a line at `level` would be written: to skip assembling one that would not.
    public func isLogging(_ level: Level) -> Bool { level >= self.level }

    /// Writes one line, if `level` is logged: `message`, then `fields` in order.
    public func log(_ level: Level, _ message: String, _ fields: KeyValuePairs<String, String> = [:]) {
        log(level, message) { line in
            for (key, value) in fields { line.field(named: key, value) }
        }
    }

    /// As ``log(_:_:_:)``, for fields assembled at run time.
    public func log(_ level: Level, _ message: String, fields: [(String, String)]) {
        log(level, message) { line in
            for (key, value) in fields { line.field(named: key, value) }
        }
    }

    /// Writes one line, if `level` is logged: `message`, then the fields `write` adds, which
    /// go into the log's buffer as they are written (a line per request makes no `String`).
    public func log(_ level: Level, _ message: String, writing write: (inout LogLine) -> Void) {
        guard isLogging(level) else { return }
        sink.append(level, message, format: format, fields: write)
    }

    /// Writes every line logged so far (see ``LogSink``): before the process ends.
    public func flush() { sink.flush() }

    /// The line as written, newline included.
    func line(_ level: Level, _ message: String, _ fields: [(String, String)], time: Date) -> String {
        var line = LogLine(format: format, milliseconds: Timestamp.milliseconds(time), level: level, message: message)
        for (key, value) in fields { line.field(named: key, value) }
        line.end()
        return line.withBytes { String(decoding: $0, as: UTF8.self) }
    }

    /// A value as logfmt writes it: bare when it can be, else quoted with `\` escapes, so
    /// a value never breaks the line or forges another key.
    static func logfmtValue(_ value: String) -> String {
        LogLine.isBare(value) ? value : jsonString(value)
    }

    /// A JSON string literal (also logfmt's quoted form).
    static func jsonString(_ value: String) -> String {
        String(decoding: LogLine.written { $0.appendQuoted(value) }, as: UTF8.self)
    }

    /// Written as `\u` escapes: controls (C0, DEL, C1), which a terminal acts on, and the
    /// invisible format characters and separators (bidi overrides and isolates, U+200E/F,
    /// zero-widths, U+2028/9), which make a line read otherwise than it is.
    static func isEscaped(_ scalar: Unicode.Scalar) -> Bool {
        if scalar.value < 0x80 { return scalar.value < 0x20 || scalar.value == 0x7F }
        switch scalar.properties.generalCategory {
        case .control, .format, .lineSeparator, .paragraphSeparator, .surrogate: return true
        default: return false
        }
    }

    /// Longest a value a client sent is written (``clipped(_:)``).
    public static let maxClientValueBytes = 256

    /// `value` as a log line takes what a client sent: at most ``maxClientValueBytes`` of it
    /// (whole characters), then a marker with the full length, so one request cannot write a
    /// line of any size.
    public static func clipped(_ value: String) -> String {
        let bytes = value.utf8.count
        guard bytes > maxClientValueBytes else { return value }
        var kept = String.UnicodeScalarView()
        var length = 0
        for scalar in value.unicodeScalars {
            length += UTF8.width(scalar)
            guard length <= maxClientValueBytes else { break }
            kept.append(scalar)
        }
        return String(kept) + "…[\(bytes) bytes]"
    }

    /// A line about one client or request, for finding a fault.
    public func debug(_ message: String, _ fields: KeyValuePairs<String, String> = [:]) { log(.debug, message, fields) }
    /// A line about a notable event: start, stop, each request.
    public func info(_ message: String, _ fields: KeyValuePairs<String, String> = [:]) { log(.info, message, fields) }
    /// A line about something the operator should look at, though the service goes on.
    public func warning(_ message: String, _ fields: KeyValuePairs<String, String> = [:]) { log(.warning, message, fields) }
    /// A line about a failure: something the service meant to do and could not.
    public func error(_ message: String, _ fields: KeyValuePairs<String, String> = [:]) { log(.error, message, fields) }
}
