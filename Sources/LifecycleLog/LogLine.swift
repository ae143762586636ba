/// One log line as it is written, into a buffer of bytes: `time`, `level` and `msg` first,
/// then the fields in order, logfmt (`key=value`, the value bare when it can be) or JSON
/// (every value a string). No `String` is made for a line: each value goes into the
/// buffer as it is escaped, and numbers as their digits.
public struct LogLine: ~Copyable {
    /// The line so far: `count` bytes at `start`, room for `capacity`. Raw memory rather
    /// than an array: a line is some 30 appends, each of which an array would check for
    /// uniqueness and room (about as much again as the line's own work).
    private var start: UnsafeMutablePointer<UInt8>
    private(set) var count = 0
    private var capacity: Int
    let format: LineLogger.Format

    /// Starts a line: its time, level and message.
    init(format: LineLogger.Format, milliseconds: Int64, level: LineLogger.Level, message: String) {
        self.init(format: format)
        switch format {
        case .logfmt: append("time=")
        case .json: append(#"{"time":""#)
        }
        Timestamp.write(milliseconds, into: &self)
        switch format {
        case .logfmt: append(" level=")
        case .json: append(#"","level":""#)
        }
        append(level.name)
        if format == .json { append(byte: UInt8(ascii: "\"")) }
        field("msg", message)
    }

    private init(format: LineLogger.Format) {
        self.format = format
        // Room for a request's line: the one allocation a line makes.
        capacity = 320
        start = .allocate(capacity: capacity)
    }

    deinit { start.deallocate() }

    /// What `write` appends to an empty line, as bytes.
    static func written(_ write: (inout LogLine) -> Void) -> [UInt8] {
        var line = LogLine(format: .json)
        write(&line)
        return line.withBytes { Array($0) }
    }

    /// The line's bytes, for as long as `body` runs.
    func withBytes<T>(_ body: (UnsafeBufferPointer<UInt8>) -> T) -> T {
        body(UnsafeBufferPointer(start: start, count: count))
    }

    /// Ends the line.
    mutating func end() {
        if format == .json { append(byte: UInt8(ascii: "}")) }
        append(byte: UInt8(ascii: "\n"))
    }

    /// Makes room for `more` bytes.
    @inline(__always)
    private mutating func reserve(_ more: Int) {
        guard count &+ more > capacity else { return }
        grow(more)
    }

    /// Moves the line to memory with room for `more` bytes (rarely: 320 bytes hold a request's line).
    private mutating func grow(_ more: Int) {
        capacity = Swift.max(capacity * 2, count + more)
        let grown = UnsafeMutablePointer<UInt8>.allocate(capacity: capacity)
        grown.update(from: start, count: count)
        start.deallocate()
        start = grown
    }

    @inline(__always)
    mutating func append(byte: UInt8) {
        reserve(1)
        start[count] = byte
        count += 1
    }

    @inline(__always)
    mutating func append(_ bytes: UnsafeBufferPointer<UInt8>) {
        guard let base = bytes.baseAddress else { return }
        reserve(bytes.count)
        (start + count).update(from: base, count: bytes.count)
        count += bytes.count
    }

    @inline(__always)
    mutating func append(_ text: StaticString) {
        append(UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    /// `value` in decimal, with at least `width` digits, zeros first.
    mutating func append(digits value: UInt, width: Int = 1) {
        var digits = 1
        var rest = value / 10
        while rest > 0 { digits += 1; rest /= 10 }
        digits = Swift.max(digits, width)
        reserve(digits)
        // Written backwards from the end, one digit a step (no generic stride).
        let first = start + count
        var position = first + digits
        var remaining = value
        repeat {
            position -= 1
            position.pointee = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: remaining % 10)
            remaining /= 10
        } while position > first
        count += digits
    }

    /// Appends `width` bytes that `write` stores, all of them, from the pointer it is given.
    mutating func append(width: Int, _ write: (UnsafeMutablePointer<UInt8>) -> Void) {
        reserve(width)
        write(start + count)
        count += width
    }

    /// `value` in decimal, `-` first when negative.
    mutating func append(decimal value: Int) {
        if value < 0 { append(byte: UInt8(ascii: "-")) }
        append(digits: value.magnitude)
    }

    /// A field with a text value, escaped as the format needs (see ``LineLogger/logfmtValue(_:)``).
    public mutating func field(_ key: StaticString, _ value: String) {
        self.key(key)
        append(value: value)
    }

    /// A field with a whole number.
    public mutating func field(_ key: StaticString, _ value: Int) {
        self.key(key)
        if format == .json { append(byte: UInt8(ascii: "\"")) }
        append(decimal: value)
        if format == .json { append(byte: UInt8(ascii: "\"")) }
    }

    /// A field with `thousandths / 1000` to three decimals (`12.034`): a duration in
    /// milliseconds from microseconds.
    public mutating func field(_ key: StaticString, thousandths: UInt64) {
        self.key(key)
        if format == .json { append(byte: UInt8(ascii: "\"")) }
        append(digits: UInt(thousandths / 1000))
        append(byte: UInt8(ascii: "."))
        append(digits: UInt(thousandths % 1000), width: 3)
        if format == .json { append(byte: UInt8(ascii: "\"")) }
    }

    /// A field whose key is made at run time (a store event's).
    mutating func field(named key: String, _ value: String) {
        switch format {
        case .logfmt:
            append(byte: UInt8(ascii: " "))
            appendUTF8(key)
            append(byte: UInt8(ascii: "="))
        case .json:
            append(byte: UInt8(ascii: ","))
            if !appendPlain(key) { appendQuoted(key) }
            append(byte: UInt8(ascii: ":"))
        }
        append(value: value)
    }

    @inline(__always)
    private mutating func key(_ key: StaticString) {
        switch format {
        case .logfmt:
            append(byte: UInt8(ascii: " "))
            append(key)
            append(byte: UInt8(ascii: "="))
        case .json:
            append(byte: UInt8(ascii: ","))
            append(byte: UInt8(ascii: "\""))
            append(key)
            append(#"":"#)
        }
    }

    private mutating func append(value: String) {
        if !appendPlain(value) {
            if format == .logfmt, Self.isBare(value) { appendUTF8(value) } else { appendQuoted(value) }
        }
    }

    /// Appends `value` as it is (in quotes for JSON) when it is printable ASCII that needs
    /// no escape and no quotes: most values, found in one pass over its bytes. `false` when
    /// it is not, with nothing appended.
    private mutating func appendPlain(_ value: String) -> Bool {
        var value = value
        let format = format
        // The bytes that need nothing, one bit each for 0-63 and 64-127: printable ASCII but
        // `"` and `\`; JSON takes a space, logfmt neither a space nor `=`.
        let (low, high): (UInt64, UInt64) = format == .json ? (0xFFFF_FFFB_0000_0000, 0x7FFF_FFFF_EFFF_FFFF) : (0xDFFF_FFFA_0000_0000, 0x7FFF_FFFF_EFFF_FFFF)
        return value.withUTF8 { utf8 in
            for byte in utf8 {
                let word = byte < 64 ? low : byte < 128 ? high : 0
                guard word >> UInt64(byte & 63) & 1 != 0 else { return false }
            }
            switch format {
            case .logfmt:
                guard !utf8.isEmpty else { return false }
                append(utf8)
            case .json:
                append(byte: UInt8(ascii: "\""))
                append(utf8)
                append(byte: UInt8(ascii: "\""))
            }
            return true
        }
    }

    /// Whether logfmt writes `value` bare: not empty, and nothing in it that could break the
    /// line, forge a key or be escaped.
    static func isBare(_ value: String) -> Bool {
        !value.isEmpty && !value.unicodeScalars.contains { $0.value <= 0x20 || $0 == "\"" || $0 == "=" || $0 == "\\" || LineLogger.isEscaped($0) }
    }

    /// `value` as a JSON string literal (also logfmt's quoted form).
    mutating func appendQuoted(_ value: String) {
        append(byte: UInt8(ascii: "\""))
        for scalar in value.unicodeScalars { appendEscaped(scalar) }
        append(byte: UInt8(ascii: "\""))
    }

    private mutating func appendEscaped(_ scalar: Unicode.Scalar) {
        switch scalar {
        case "\"": append(#"\""#)
        case "\\": append(#"\\"#)
        case "\n": append(#"\n"#)
        case "\r": append(#"\r"#)
        case "\t": append(#"\t"#)
        case _ where LineLogger.isEscaped(scalar):
            for unit in UTF16.encode(scalar)! {
                append(#"\u"#)
                for shift in stride(from: 12, through: 0, by: -4) {
                    append(byte: Self.hexDigits[Int((unit >> UInt16(shift)) & 0xF)])
                }
            }
        default:
            UTF8.encode(scalar) { append(byte: $0) }
        }
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)
}

extension LineLogger.Level {
    /// As lines spell it.
    var name: StaticString {
        switch self {
        case .debug: "debug"
        case .info: "info"
        case .warning: "warning"
        case .error: "error"
        }
    }
}

extension LogLine {
    /// The UTF-8 of `text`, copied at once.
    mutating func appendUTF8(_ text: String) {
        var text = text
        text.withUTF8 { append($0) }
    }
}
