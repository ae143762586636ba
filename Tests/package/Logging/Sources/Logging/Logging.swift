/// A log line, as a logging library would make it.
public func line(_ message: String) -> String { "level=info message=\"\(message)\"" }
