/// One event of a `text/event-stream`, as dispatched.
struct ServerSentEvent: Sendable, Equatable {
    /// The `event:` type; `message` when none was given.
    var type: String
    /// The `data:` lines joined by newlines.
    var data: String
    /// The last event ID after this event (the `id:` of this or an earlier event), `nil` before any.
    var id: String?
}

/// The WHATWG HTML "interpreting an event stream" rules over bytes as they arrive, chunked
/// anywhere (mid-line, mid-character, between CR and LF). No I/O: feed it bytes, take the
/// events it dispatched.
///
/// Lines end at CRLF, LF or CR; a line starting with `:` is a comment (heartbeats); a field
/// is `name: value` (one space after the colon dropped); `data` appends a line, `event` sets
/// the type, `id` the last event ID (unless it holds NUL), `retry` the reconnection time (only
/// ASCII digits); a blank line dispatches the event if it has data. A leading BOM is skipped.
struct ServerSentEventParser: Sendable {
    private var line: [UInt8] = []
    private var afterCR = false
    private var isStart = true
    private var data: [UInt8] = []
    private var hasData = false
    private var type: [UInt8] = []
    /// The last event ID buffer, kept across events and connections.
    private(set) var lastEventID: String?
    /// The reconnection time the stream set (`retry:`), in milliseconds.
    private(set) var retry: Int?

    init(lastEventID: String? = nil) {
        self.lastEventID = lastEventID
    }

    /// Takes the next bytes and returns the events they complete.
    mutating func feed(_ bytes: some Sequence<UInt8>) -> [ServerSentEvent] {
        var events: [ServerSentEvent] = []
        for byte in bytes {
            if afterCR {
                afterCR = false
                if byte == 0x0A { continue }
            }
            switch byte {
            case 0x0D:
                afterCR = true
                endLine(into: &events)
            case 0x0A:
                endLine(into: &events)
            default:
                line.append(byte)
            }
        }
        return events
    }

    /// A new connection: a line cut off by the old one is dropped, and so is an event not
    /// yet dispatched (the spec's end-of-stream rule); the last event ID and retry stay.
    mutating func reset() {
        line = []
        afterCR = false
        isStart = true
        data = []
        hasData = false
        type = []
    }

    private mutating func endLine(into events: inout [ServerSentEvent]) {
        defer { line.removeAll(keepingCapacity: true) }
        if isStart {
            isStart = false
            if line.starts(with: [0xEF, 0xBB, 0xBF]) { line.removeFirst(3) }
        }
        if line.isEmpty {
            dispatch(into: &events)
            return
        }
        if line.first == UInt8(ascii: ":") { return }
        let name: ArraySlice<UInt8>
        var value: ArraySlice<UInt8>
        if let colon = line.firstIndex(of: UInt8(ascii: ":")) {
            name = line[..<colon]
            value = line[(colon + 1)...]
            if value.first == UInt8(ascii: " ") { value = value.dropFirst() }
        } else {
            name = line[...]
            value = []
        }
        switch String(decoding: name, as: UTF8.self) {
        case "event":
            type = Array(value)
        case "data":
            if hasData { data.append(0x0A) }
            data.append(contentsOf: value)
            hasData = true
        case "id":
            if !value.contains(0) { lastEventID = String(decoding: value, as: UTF8.self) }
        case "retry":
            if !value.isEmpty, value.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let milliseconds = Int(String(decoding: value, as: UTF8.self)) {
                retry = milliseconds
            }
        default:
            break
        }
    }

    private mutating func dispatch(into events: inout [ServerSentEvent]) {
        defer {
            data = []
            hasData = false
            type = []
        }
        guard hasData else { return }
        let name = type.isEmpty ? "message" : String(decoding: type, as: UTF8.self)
        events.append(ServerSentEvent(type: name, data: String(decoding: data, as: UTF8.self), id: lastEventID))
    }
}
