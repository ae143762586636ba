import Glibc

/// Framing of server-sent events (WHATWG HTML, "Server-sent events", the
/// `text/event-stream` format): fields as `name: value` lines, an empty line ending each event.
///
/// Values are written as given and must not contain a line break (CR or LF), which would end
/// the field early; record JSON never does, since JSON escapes both inside strings.
public enum ServerSentEvents {
    /// The media type of an event stream.
    public static let contentType = "text/event-stream; charset=utf-8"

    /// One event: `id:` (the resume point a client sends back as `Last-Event-ID`), `event:`
    /// (its type; clients dispatch on it) and one `data:` line.
    public static func event(id: Int64?, type: String?, data: [UInt8]) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(data.count + 48)
        append(id: id, type: type, data: data, to: &bytes)
        return bytes
    }

    /// Appends one event, as ``event(id:type:data:)`` makes it, to `bytes`.
    public static func append(id: Int64?, type: String?, data: [UInt8], to bytes: inout [UInt8]) {
        precondition(!isMultiline(data), "an event's data must be one line")
        if let id {
            bytes.append(contentsOf: "id: ".utf8)
            bytes.append(contentsOf: String(id).utf8)
            bytes.append(0x0A)
        }
        if let type {
            bytes.append(contentsOf: "event: ".utf8)
            bytes.append(contentsOf: type.utf8)
            bytes.append(0x0A)
        }
        bytes.append(contentsOf: "data: ".utf8)
        bytes.append(contentsOf: data)
        bytes.append(contentsOf: [0x0A, 0x0A])
    }

    /// Whether `data` holds a CR or LF. By `memchr`, not a loop in Swift: every record is
    /// checked as it is framed, on the one thread that commits, and a record is hundreds of bytes.
    private static func isMultiline(_ data: [UInt8]) -> Bool {
        data.withUnsafeBytes { bytes in
            guard let start = bytes.baseAddress else { return false }
            return memchr(start, 0x0A, bytes.count) != nil || memchr(start, 0x0D, bytes.count) != nil
        }
    }

    /// An event of only an `id:`: it sets the client's last event id (what it sends back as
    /// `Last-Event-ID`) without dispatching anything.
    public static func lastEventID(_ id: Int64) -> [UInt8] {
        Array("id: \(id)\n\n".utf8)
    }

    /// How long a client waits before reconnecting, in milliseconds; sent first on a stream.
    public static func retry(milliseconds: Int) -> [UInt8] {
        Array("retry: \(milliseconds)\n\n".utf8)
    }

    /// A comment line: ignored by clients, it keeps proxies from closing an idle stream and
    /// lets the server notice a peer that is gone.
    public static func comment(_ text: String) -> [UInt8] {
        precondition(!text.utf8.contains(0x0A) && !text.utf8.contains(0x0D), "a comment must be one line")
        return Array(": \(text)\n\n".utf8)
    }
}

extension Response {
    /// A `200` event stream written by `stream`: `text/event-stream`, not cached, and not
    /// buffered by proxies that honour `X-Accel-Buffering` (nginx), so each event leaves at once.
    public static func eventStream(_ stream: any ResponseStream, headers: [(name: String, value: String)] = []) -> Response {
        Response(
            status: 200,
            headers: [("Content-Type", ServerSentEvents.contentType), ("Cache-Control", "no-cache"), ("X-Accel-Buffering", "no")] + headers,
            stream: stream
        )
    }
}
