import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The data folder's `lifecycled.lock`, held (`flock`) so that one process uses a database; it keeps the marker, the
/// last sequence number committed, which tells start-up what the database should at least hold.
final class DataFolderLock {
    static let fileName = "lifecycled.lock"

    /// What the lock file said about the database when the store opened it.
    enum Marker: Equatable {
        /// No database has been made in this folder yet (or it predates the marker).
        case none
        /// A database was made here, and every sequence number up to this one was committed.
        case committed(Int64)
        /// The file holds something else; what it was is in the message.
        case unreadable(String)
    }

    let path: String
    let marker: Marker
    /// -1 once released.
    private(set) var descriptor: Int32
    /// The file's length: a write that shortens it truncates the rest.
    private var length = 0
    private let pid = getpid()

    /// Takes the lock on `directory` or throws, naming the process that holds it.
    init(directory: String) throws(StoreError) {
        path = directory + "/" + Self.fileName
        descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw StoreError("cannot open the lock file \(path): \(Self.lastError())") }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            let failure = errno == EWOULDBLOCK ? nil : Self.lastError()
            let holder = Self.fields(in: Self.read(descriptor))["pid"].flatMap { Int32($0) }
            close(descriptor)
            if let failure { throw StoreError("cannot lock the data folder \(directory) (\(path)): \(failure)") }
            throw StoreError(
                "the data folder \(directory) is in use by another lifecycled (pid \(holder.map(String.init) ?? "unknown"), "
                    + "holding \(path)); only one process may use a data folder"
            )
        }
        let contents = Self.read(descriptor)
        length = contents.utf8.count
        marker = Self.marker(in: contents)
        // Until the store has checked the database, the file keeps the marker it had.
        let kept: Int64? = if case .committed(let sequence) = marker { sequence } else { nil }
        do {
            try mark(kept)
        } catch {
            release()
            throw error
        }
    }

    deinit { release() }

    /// Ends the lock; another process may then open the folder.
    func release() {
        guard descriptor >= 0 else { return }
        // The lock belongs to the open file, which a child forked at this moment shares until it execs
        // (O_CLOEXEC): closing alone would leave the folder locked until then.
        flock(descriptor, LOCK_UN)
        close(descriptor)
        descriptor = -1
    }

    /// Records `sequence` as committed. No fsync: written after the commit, it is no further than the database after a
    /// crash, or a power loss with sync=full; with sync=normal start-up reports the loss. `pid=` and ten digits, then
    /// `sequence=` and twenty: fixed widths, so one `pwrite` in place.
    func mark(_ sequence: Int64?) throws(StoreError) {
        guard descriptor >= 0 else { throw StoreError("the lock file \(path) was released") }
        // Written by hand: `String(format:)` cost every commit some 25,000 instructions.
        var bytes = Self.line("pid=", Int64(pid), width: 10)
        if let sequence { bytes += Self.line("sequence=", sequence, width: 20) }
        let written = bytes.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) }
        guard written == bytes.count, bytes.count >= length || ftruncate(descriptor, off_t(bytes.count)) == 0 else {
            throw StoreError("cannot write the lock file \(path): \(Self.lastError())")
        }
        length = bytes.count
    }

    /// `name`, `value` in decimal padded with zeros to `width` characters (a sign counted),
    /// and a newline: as `%0<width>lld` formats it.
    static func line(_ name: StaticString, _ value: Int64, width: Int) -> [UInt8] {
        var digits: [UInt8] = []
        var magnitude = value.magnitude
        repeat {
            digits.append(UInt8(ascii: "0") + UInt8(magnitude % 10))
            magnitude /= 10
        } while magnitude > 0
        var line = Array(UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
        if value < 0 { line.append(UInt8(ascii: "-")) }
        line += repeatElement(UInt8(ascii: "0"), count: max(0, width - digits.count - (value < 0 ? 1 : 0)))
        line += digits.reversed()
        line.append(UInt8(ascii: "\n"))
        return line
    }

    private static func read(_ descriptor: Int32) -> String {
        var buffer = [UInt8](repeating: 0, count: 256)
        let count = buffer.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, 0) }
        return String(decoding: buffer.prefix(max(0, count)), as: UTF8.self)
    }

    private static func fields(in contents: String) -> [String: String] {
        var fields: [String: String] = [:]
        for line in contents.split(separator: "\n") {
            guard let equals = line.firstIndex(of: "=") else { continue }
            fields[String(line[..<equals])] = String(line[line.index(after: equals)...])
        }
        return fields
    }

    static func marker(in contents: String) -> Marker {
        if contents.isEmpty { return .none }  // a new file
        let fields = fields(in: contents)
        guard fields["pid"].flatMap({ Int32($0) }) != nil, contents.hasSuffix("\n") else {
            return .unreadable("expected pid=N and sequence=N lines, found \(contents.debugDescription)")
        }
        guard let text = fields["sequence"] else { return .none }
        guard let sequence = Int64(text), sequence >= 0 else { return .unreadable("the sequence \"\(text)\" is not a number") }
        return .committed(sequence)
    }

    private static func lastError() -> String { String(cString: strerror(errno)) }
}
