/// A request target (RFC 9112 §3.2) as the raw bytes of the request line, decoded here
/// rather than by libmicrohttpd, whose in-place decoding into a C string lets `%00` cut a
/// path short (`/v1/instances/victim%00.x` became `/v1/instances/victim`).
///
/// Paths on this server are ids and file names, so a decoded path may hold only
/// `A-Z a-z 0-9 . _ -` and `/`, and no `.` or `..` segment; anything else (a NUL, a space,
/// a byte of a UTF-8 sequence, a bad escape) is refused rather than passed on altered.
/// Query values may hold any UTF-8 except control characters.
struct RequestTarget: Equatable {
    var path: String
    var query: [Argument]

    struct Argument: Equatable {
        var name: String
        var value: String
    }

    /// Parses origin form (`/path?query`) and absolute form (`http://host/path?query`).
    init(_ raw: [UInt8]) throws(Problem) {
        var start = 0
        if let authorityEnd = Self.absoluteFormPrefix(raw) {
            start = authorityEnd
        } else if raw.first != UInt8(ascii: "/") {
            throw Self.badRequest("the request target must be a path such as /healthz or an absolute http URL")
        }
        let questionMark = raw[start...].firstIndex(of: UInt8(ascii: "?")) ?? raw.count
        let pathBytes = try Self.decode(raw[start..<questionMark], what: "path")
        path = try Self.checkedPath(pathBytes)
        query = []
        if questionMark < raw.count {
            for piece in raw[(questionMark + 1)...].split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true) {
                let equals = piece.firstIndex(of: UInt8(ascii: "=")) ?? piece.endIndex
                let name = try Self.queryText(piece[piece.startIndex..<equals])
                let value = equals < piece.endIndex ? try Self.queryText(piece[(equals + 1)...]) : ""
                query.append(Argument(name: name, value: value))
            }
        }
    }

    /// For `http://host[:port]/...` (any case of the scheme, or https): the index where
    /// the path starts. No path after the authority means `/`.
    private static func absoluteFormPrefix(_ raw: [UInt8]) -> Int? {
        let lowered = raw.prefix(8).map { $0 | 0x20 }
        let schemeLength: Int
        if lowered.starts(with: Array("http://".utf8)) {
            schemeLength = 7
        } else if lowered.starts(with: Array("https://".utf8)) {
            schemeLength = 8
        } else {
            return nil
        }
        return raw[schemeLength...].firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") } ?? raw.count
    }

    private static func checkedPath(_ bytes: [UInt8]) throws(Problem) -> String {
        if bytes.isEmpty { return "/" }
        for byte in bytes where !isPathByte(byte) {
            let shown = byte >= 0x21 && byte <= 0x7E ? "\"\(Character(Unicode.Scalar(byte)))\"" : "byte 0x\(byte < 16 ? "0" : "")\(String(byte, radix: 16, uppercase: true))"
            throw badRequest("the path may hold only A-Z a-z 0-9 . _ - and /, not \(shown)")
        }
        for segment in bytes.split(separator: UInt8(ascii: "/")) where segment.allSatisfy({ $0 == UInt8(ascii: ".") }) && segment.count <= 2 {
            throw badRequest("the path may not have a \".\" or \"..\" segment")
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func isPathByte(_ byte: UInt8) -> Bool {
        (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
            || byte == 0x2E || byte == 0x5F || byte == 0x2D || byte == 0x2F
    }

    private static func queryText(_ raw: ArraySlice<UInt8>) throws(Problem) -> String {
        let bytes = try decode(raw, what: "query")
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw badRequest("a query parameter is not valid UTF-8")
        }
        if bytes.contains(where: { $0 < 0x20 || $0 == 0x7F }) {
            throw badRequest("a query parameter holds a control character")
        }
        return text
    }

    /// Percent-decoding; a `%` not followed by two hex digits is refused.
    private static func decode(_ raw: ArraySlice<UInt8>, what: String) throws(Problem) -> [UInt8] {
        guard raw.contains(UInt8(ascii: "%")) else { return Array(raw) }
        var decoded: [UInt8] = []
        decoded.reserveCapacity(raw.count)
        var index = raw.startIndex
        while index < raw.endIndex {
            let byte = raw[index]
            if byte != UInt8(ascii: "%") {
                decoded.append(byte)
                index += 1
                continue
            }
            guard index + 2 < raw.endIndex, let high = hexValue(raw[index + 1]), let low = hexValue(raw[index + 2])
            else {
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
