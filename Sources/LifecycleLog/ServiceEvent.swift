/// Something notable that a part without a logger of its own noticed (the store, the registry), for the handler whoever
/// made that part passes; the service logs each as one line.
public struct ServiceEvent: Sendable {
    /// How much it matters: info, or a warning or error an operator should look at.
    public var level: LineLogger.Level
    /// What happened, the same words every time (the line's `msg`).
    public var message: String
    /// What it happened to, in order (the line's other keys).
    public var fields: [(key: String, value: String)]

    /// An event with fields known when it is written.
    public init(_ level: LineLogger.Level, _ message: String, _ fields: KeyValuePairs<String, String> = [:]) {
        self.init(level, message, fields: fields.map { ($0.key, $0.value) })
    }

    /// As ``init(_:_:_:)``, for fields assembled at run time.
    public init(_ level: LineLogger.Level, _ message: String, fields: [(key: String, value: String)]) {
        self.level = level
        self.message = message
        self.fields = fields
    }

    /// Logs `event` on standard error at info and above: for a part made without a handler.
    @Sendable public static func logToStandardError(_ event: ServiceEvent) { LineLogger().log(event) }
}

extension LineLogger {
    /// Writes `event` as one line, if its level is logged.
    public func log(_ event: ServiceEvent) { log(event.level, event.message, fields: event.fields.map { ($0.key, $0.value) }) }
}
