/// One log line as it is written, into a buffer of bytes: `time`, `level` and `msg` first,
/// then the fields in order, logfmt (`key=value`, the value bare when it can be) or JSON
/// (every value a string). No `String` is made for a line: each value goes into the
/// buffer as it is escaped, and numbers as their digits.
public struct LogLine {
    /// The line so far, after what the buffer held before it.
    var bytes: [UInt8]
    let format: Logger.Format

    /// Bytes to write into in `format`, with no line started.
    init(bytes: [UInt8], format: Logger.Format) {
        self.bytes = bytes
        self.format = format
    }

    /// Starts a line after what `bytes` holds: its time, level and message. (Not an
    /// initializer taking the buffer: the line works on the buffer it is swapped, so that no
    /// second reference makes an append copy it.)
    mutating func begin(milliseconds: Int64, second: inout Timestamp.Second, level: Logger.Level, message: String) {
        switch format {
        case .logfmt: bytes.append(contentsOf: "time=".utf8)
        case .json: bytes.append(contentsOf: #"{"time":""#.utf8)
        }
        Timestamp.write(milliseconds, into: &bytes, reusing: &second)
        switch format {
        case .logfmt: bytes.append(contentsOf: " level=".utf8)
        case .json: bytes.append(contentsOf: #"","level":""#.utf8)
        }
        bytes.appendUTF8(level.name)
        if format == .json { bytes.append(UInt8(ascii: "\"")) }
        field("msg", message)
    }

    /// Ends the line.
    mutating func end() {
        if format == .json { bytes.append(UInt8(ascii: "}")) }
        bytes.append(UInt8(ascii: "\n"))
    }

    /// A field with a text value, escaped as the format needs (see ``Logger/logfmtValue(_:)``).
    public mutating func field(_ key: String, _ value: String) {
        self.key(key)
        if !appendPlain(value) {
            if format == .logfmt, Self.isBare(value) { bytes.appendUTF8(value) } else { appendQuoted(value) }
        }
    }

    /// Appends `value` as it is (in quotes for JSON) when it is printable ASCII that needs
    /// no escape and no quotes: most values, found in one pass over its bytes. `false` when
    /// it is not, with nothing appended.
    private mutating func appendPlain(_ value: String) -> Bool {
        var value = value
        let format = format
        return value.withUTF8 { utf8 in
            for byte in utf8 {
                guard byte > 0x20 || (byte == 0x20 && format == .json), byte < 0x7F, byte != UInt8(ascii: "\""), byte != UInt8(ascii: "\\") else { return false }
                if byte == UInt8(ascii: "="), format == .logfmt { return false }
            }
            switch format {
            case .logfmt:
                guard !utf8.isEmpty else { return false }
                bytes.append(contentsOf: utf8)
            case .json:
                bytes.append(UInt8(ascii: "\""))
                bytes.append(contentsOf: utf8)
                bytes.append(UInt8(ascii: "\""))
            }
            return true
        }
    }

    /// A field with a whole number.
    public mutating func field(_ key: String, _ value: Int) {
        self.key(key)
        if format == .json { bytes.append(UInt8(ascii: "\"")) }
        bytes.appendDecimal(value)
        if format == .json { bytes.append(UInt8(ascii: "\"")) }
    }

    /// A field with `thousandths / 1000` to three decimals (`12.034`): a duration in
    /// milliseconds from microseconds.
    public mutating func field(_ key: String, thousandths: UInt64) {
        self.key(key)
        if format == .json { bytes.append(UInt8(ascii: "\"")) }
        bytes.appendDecimal(Int(thousandths / 1000))
        bytes.append(UInt8(ascii: "."))
        bytes.appendDigits(Int(thousandths % 1000), count: 3)
        if format == .json { bytes.append(UInt8(ascii: "\"")) }
    }

    private mutating func key(_ key: String) {
        switch format {
        case .logfmt:
            bytes.append(UInt8(ascii: " "))
            bytes.appendUTF8(key)
            bytes.append(UInt8(ascii: "="))
        case .json:
            bytes.append(UInt8(ascii: ","))
            if !appendPlain(key) { appendQuoted(key) }
            bytes.append(UInt8(ascii: ":"))
        }
    }

    /// Whether logfmt writes `value` bare: not empty, and nothing in it that could break the
    /// line, forge a key or be escaped.
    static func isBare(_ value: String) -> Bool {
        guard !value.isEmpty else { return false }
        var isASCII = true
        for byte in value.utf8 {
            guard byte < 0x80 else { isASCII = false; break }
            if byte <= 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "=") || byte == UInt8(ascii: "\\") || byte == 0x7F { return false }
        }
        return isASCII || !value.unicodeScalars.contains { $0.value <= 0x20 || $0 == "\"" || $0 == "=" || $0 == "\\" || Logger.isEscaped($0) }
    }

    /// `value` as a JSON string literal (also logfmt's quoted form).
    mutating func appendQuoted(_ value: String) {
        bytes.append(UInt8(ascii: "\""))
        if value.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }) {
            bytes.appendUTF8(value)
        } else {
            for scalar in value.unicodeScalars { appendEscaped(scalar) }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    private mutating func appendEscaped(_ scalar: Unicode.Scalar) {
        switch scalar {
        case "\"": bytes.append(contentsOf: #"\""#.utf8)
        case "\\": bytes.append(contentsOf: #"\\"#.utf8)
        case "\n": bytes.append(contentsOf: #"\n"#.utf8)
        case "\r": bytes.append(contentsOf: #"\r"#.utf8)
        case "\t": bytes.append(contentsOf: #"\t"#.utf8)
        case _ where Logger.isEscaped(scalar):
            for unit in UTF16.encode(scalar)! {
                bytes.append(contentsOf: #"\u"#.utf8)
                for shift in stride(from: 12, through: 0, by: -4) {
                    bytes.append(Self.hexDigits[Int((unit >> UInt16(shift)) & 0xF)])
                }
            }
        default:
            UTF8.encode(scalar) { bytes.append($0) }
        }
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)
}

extension Logger.Level {
    /// As lines spell it.
    var name: String {
        switch self {
        case .debug: "debug"
        case .info: "info"
        case .warning: "warning"
        case .error: "error"
        }
    }
}

extension [UInt8] {
    /// The UTF-8 of `text`, copied at once (appending its `utf8` view goes byte by byte).
    mutating func appendUTF8(_ text: String) {
        var text = text
        text.withUTF8 { append(contentsOf: $0) }
    }
}
