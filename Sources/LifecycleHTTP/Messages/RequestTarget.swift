/// A request target (RFC 9112 §3.2) as the raw bytes of the request line, decoded here
/// rather than by libmicrohttpd, whose in-place decoding into a C string lets `%00` cut a
/// path short (`/v1/instances/victim%00.x` became `/v1/instances/victim`).
///
/// Paths on this server are ids and file names, so a decoded path may hold only
/// `A-Z a-z 0-9 . _ -` and `/`, and no `.` or `..` segment; anything else (a NUL, a space,
/// a byte of a UTF-8 sequence, a bad escape) is refused rather than passed on altered.
/// Query values may hold any UTF-8 except control characters.
///
/// Parsed for every request, in one pass and without copies on the common path.
struct RequestTarget {
    var path: String
    var query: [(name: String, value: String)]

    private static let slash = UInt8(ascii: "/")
    private static let dot = UInt8(ascii: ".")
    private static let percent = UInt8(ascii: "%")
    private static let questionMark = UInt8(ascii: "?")

    /// Parses origin form (`/path?query`) and absolute form (`http://host/path?query`).
    init(_ raw: UnsafeBufferPointer<UInt8>) throws(Problem) {
        var start = 0
        if raw.first != Self.slash {
            guard let pathStart = Self.absoluteFormPathStart(raw) else {
                throw Self.badRequest("the request target must be a path such as /healthz or an absolute http URL")
            }
            start = pathStart
        }
        var end = start
        var hasEscape = false
        while end < raw.count, raw[end] != Self.questionMark {
            if raw[end] == Self.percent { hasEscape = true }
            end += 1
        }
        let rawPath = UnsafeBufferPointer(rebasing: raw[start..<end])
        if hasEscape {
            path = try Self.decode(rawPath, what: "path").withUnsafeBufferPointer { (bytes) throws(Problem) in try Self.checkedPath(bytes) }
        } else {
            path = try Self.checkedPath(rawPath)
        }
        query = end < raw.count ? try Self.query(UnsafeBufferPointer(rebasing: raw[(end + 1)...])) : []
    }

    init(_ raw: [UInt8]) throws(Problem) {
        self = try raw.withUnsafeBufferPointer { (bytes) throws(Problem) in try RequestTarget(bytes) }
    }

    /// For `http://host[:port]/...` (any case of the scheme, or https): the index where
    /// the path starts (an index holding `?`, or the end, means the path `/`).
    private static func absoluteFormPathStart(_ raw: UnsafeBufferPointer<UInt8>) -> Int? {
        var index = 0
        for letter in "http".utf8 {
            guard index < raw.count, raw[index] | 0x20 == letter else { return nil }
            index += 1
        }
        if index < raw.count, raw[index] | 0x20 == UInt8(ascii: "s") { index += 1 }
        for separator in "://".utf8 {
            guard index < raw.count, raw[index] == separator else { return nil }
            index += 1
        }
        while index < raw.count, raw[index] != slash, raw[index] != questionMark { index += 1 }
        return index
    }

    /// The path, if every byte is allowed and no segment is `.` or `..`.
    private static func checkedPath(_ bytes: UnsafeBufferPointer<UInt8>) throws(Problem) -> String {
        if bytes.isEmpty { return "/" }
        var segmentStart = 0
        for index in 0...bytes.count {
            if index == bytes.count || bytes[index] == slash {
                let length = index - segmentStart
                if (length == 1 || length == 2), bytes[segmentStart] == dot, bytes[index - 1] == dot {
                    throw badRequest("the path may not have a \".\" or \"..\" segment")
                }
                segmentStart = index + 1
            } else if !isPathByte(bytes[index]) {
                let byte = bytes[index]
                let shown = byte >= 0x21 && byte <= 0x7E
                    ? "\"\(Character(Unicode.Scalar(byte)))\"" : "byte 0x\(byte < 16 ? "0" : "")\(String(byte, radix: 16, uppercase: true))"
                throw badRequest("the path may hold only A-Z a-z 0-9 . _ - and /, not \(shown)")
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func isPathByte(_ byte: UInt8) -> Bool {
        (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
            || byte == 0x2E || byte == 0x5F || byte == 0x2D || byte == 0x2F
    }

    /// `name=value` pairs separated by `&`; empty pairs are skipped, a name alone has the value "".
    private static func query(_ raw: UnsafeBufferPointer<UInt8>) throws(Problem) -> [(name: String, value: String)] {
        var arguments: [(name: String, value: String)] = []
        var start = 0
        while start < raw.count {
            var end = start
            while end < raw.count, raw[end] != UInt8(ascii: "&") { end += 1 }
            if end > start {
                var equals = start
                while equals < end, raw[equals] != UInt8(ascii: "=") { equals += 1 }
                let name = try queryText(UnsafeBufferPointer(rebasing: raw[start..<equals]))
                let value = equals < end ? try queryText(UnsafeBufferPointer(rebasing: raw[(equals + 1)..<end])) : ""
                arguments.append((name, value))
            }
            start = end + 1
        }
        return arguments
    }

    private static func queryText(_ raw: UnsafeBufferPointer<UInt8>) throws(Problem) -> String {
        let bytes = try decode(raw, what: "query")
        if bytes.contains(where: { $0 < 0x20 || $0 == 0x7F }) {
            throw badRequest("a query parameter holds a control character")
        }
        guard let text = bytes.withUnsafeBufferPointer({ String(validUTF8: $0) }) else {
            throw badRequest("a query parameter is not valid UTF-8")
        }
        return text
    }

    /// Percent-decoding; a `%` not followed by two hex digits is refused.
    private static func decode(_ raw: UnsafeBufferPointer<UInt8>, what: String) throws(Problem) -> [UInt8] {
        var decoded: [UInt8] = []
        decoded.reserveCapacity(raw.count)
        var index = 0
        while index < raw.count {
            let byte = raw[index]
            if byte != percent {
                decoded.append(byte)
                index += 1
                continue
            }
            guard index + 2 < raw.count, let high = hexValue(raw[index + 1]), let low = hexValue(raw[index + 2]) else {
                throw badRequest("the \(what) has a \"%\" not followed by two hex digits")
            }
            decoded.append(high << 4 | low)
            index += 3
        }
        return decoded
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case 0x30...0x39: byte - 0x30
        case 0x41...0x46: byte - 0x41 + 10
        case 0x61...0x66: byte - 0x61 + 10
        default: nil
        }
    }

    private static func badRequest(_ detail: String) -> Problem {
        Problem(status: 400, title: "Bad Request", detail: detail)
    }
}
