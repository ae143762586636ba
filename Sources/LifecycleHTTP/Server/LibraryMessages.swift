import CLifecycleMicroHTTPD

/// What libmicrohttpd 0.9.75's log messages mean.
enum LibraryMessages {
    private static let refusalPrefix = "Error processing request (HTTP response code is "

    /// The status of a refusal libmicrohttpd is about to send itself.
    static func refusalStatus(_ message: String) -> Int? {
        guard message.hasPrefix(refusalPrefix) else { return nil }
        return Int(message.dropFirst(refusalPrefix.count).prefix { $0.isNumber })
    }

    /// The title of the refusal's HTML body, such as `Request malformed`.
    static func refusalTitle(_ message: String) -> String {
        guard let open = message.range(of: "<title>"), let close = message.range(of: "</title>", range: open.upperBound..<message.endIndex) else { return "" }
        return String(message[open.upperBound..<close.lowerBound]).replacingOccurrences(of: "&quot;", with: "\"")
    }

    static func reasonPhrase(_ status: Int) -> String {
        String(cString: MHD_get_reason_phrase_for(UInt32(status)))
    }

    /// Messages about one client's connection (it went away, sent a bad request, is
    /// slow): logged at debug, as the request lines are.
    static func isAboutOneClient(_ message: String) -> Bool {
        [
            "Connection was closed by remote side", "Socket has been disconnected when reading", "Connection socket is closed when reading",
            "Failed to parse `Content-Length'", "Too large value of 'Content-Length'", "Not enough memory in pool to",
            "Received HTTP/1.1 request without", "Failed to send", "Too late", "Closing connection (failed to queue error",
            "Connection \"Upgrade\"",
        ].contains { message.hasPrefix($0) }
    }
}
