import Foundation
import LifecycleKit

/// The reporter's journal: one append-only file, `journal`, in the folder the app names.
///
/// **Format.** A sequence of entries, each framed as
/// `[payload length: UInt32 big-endian][CRC-32 of the payload: UInt32 big-endian][payload]`,
/// the payload one JSON object (`JournalEntry`): `item` (a queued input with its sequence number
/// and idempotency key), `ack` (every item up to `through`, and the gaps named, were answered),
/// `drop` (the items numbered `from...through` were dropped past the bound; the gaps to send,
/// by key, with their counts) or `base` (written first by a compaction: the next sequence number).
///
/// **Invariants** (what makes delivery exactly once across a kill at any point):
/// 1. An entry counts only once it is whole: a frame whose length runs past the end of the file,
///    whose checksum differs or whose payload does not decode ends the journal; it and everything
///    after it is cut off (truncated and fsynced) when the journal opens, and reported.
/// 2. `report` returns only after its `item` entry is written and fsynced, so a queued item is
///    never lost; an item whose write was torn by a kill was never acknowledged to the caller.
/// 3. Keys are random UUIDs made when an item is queued and stored in its entry: a resend after a
///    kill carries the same key (the service answers it again from its idempotency store), and
///    no other item ever carries it.
/// 4. When a batch is answered, its `ack` entry is written and fsynced before anything else is
///    sent, so an answered item is never sent again; one sent but not acknowledged is resent.
/// 5. A gap's key and count may change only while it has never been handed to a batch in this
///    process (a gap replayed from the file may have been sent: it is never changed).
/// 6. Compaction writes the live state (a `base`, the pending gaps, the pending items, keys
///    unchanged) to `journal.new`, fsyncs it and renames it over `journal`: either file, whole,
///    replays to the same pending queue.
struct Journal {
    /// One framed entry's payload.
    struct Entry: Codable, Equatable {
        enum Kind: String, Codable { case item, ack, drop, base }
        var t: Kind
        var item: QueuedItem?
        var through: UInt64?
        var from: UInt64?
        var gaps: [PendingGap]?
        var gapKeys: [String]?
        var nextSequence: UInt64?
    }

    /// What opening a journal found.
    struct Opened {
        var entries: [Entry]
        /// Bytes of a damaged tail cut off (0 when the journal was whole).
        var cutBytes: Int
        /// The frame sizes of `entries`, in order.
        var sizes: [Int]
    }

    let url: URL
    private let handle: FileHandle
    /// Bytes in the file.
    private(set) var size: Int

    /// Opens (or creates) `directory/journal`, cutting off a damaged tail.
    static func open(in directory: URL) throws -> (Journal, Opened) {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let url = directory.appendingPathComponent("journal")
        if !FileManager.default.fileExists(atPath: url.path) {
            guard FileManager.default.createFile(atPath: url.path, contents: nil) else {
                throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: url.path])
            }
        }
        let handle = try FileHandle(forUpdating: url)
        let data = try handle.readToEnd() ?? Data()
        let opened = Self.parse(data)
        let whole = data.count - opened.cutBytes
        if opened.cutBytes > 0 {
            try handle.truncate(atOffset: UInt64(whole))
            try handle.synchronize()
        }
        try handle.seekToEnd()
        return (Journal(url: url, handle: handle, size: whole), opened)
    }

    /// Reads whole entries from the start of `data`; the first damaged frame ends them.
    static func parse(_ data: Data) -> Opened {
        let bytes = [UInt8](data)
        var entries: [Entry] = []
        var sizes: [Int] = []
        var at = 0
        let decoder = JSONDecoder()
        while at + 8 <= bytes.count {
            let length = Int(bigEndian32(bytes, at))
            let checksum = bigEndian32(bytes, at + 4)
            guard length > 0, at + 8 + length <= bytes.count else { break }
            let payload = bytes[(at + 8)..<(at + 8 + length)]
            guard CRC32.checksum(payload) == checksum,
                  let entry = try? decoder.decode(Entry.self, from: Data(payload))  // a payload that does not decode is damage, as a bad checksum
            else { break }
            entries.append(entry)
            sizes.append(8 + length)
            at += 8 + length
        }
        return Opened(entries: entries, cutBytes: bytes.count - at, sizes: sizes)
    }

    /// The framed bytes of `entry`.
    static func frame(_ entry: Entry) throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let payload = [UInt8](try encoder.encode(entry))
        var bytes: [UInt8] = []
        bytes.reserveCapacity(8 + payload.count)
        appendBigEndian32(&bytes, UInt32(payload.count))
        appendBigEndian32(&bytes, CRC32.checksum(payload[...]))
        bytes += payload
        return bytes
    }

    /// Appends framed entries in one write and fsyncs before returning.
    mutating func append(_ frames: [UInt8]) throws {
        try handle.write(contentsOf: frames)
        try handle.synchronize()
        size += frames.count
    }

    /// Replaces the file by `frames` (the live state), durably; see invariant 6.
    mutating func rewrite(_ frames: [UInt8]) throws {
        let next = url.deletingLastPathComponent().appendingPathComponent("journal.new")
        if FileManager.default.fileExists(atPath: next.path) { try FileManager.default.removeItem(at: next) }
        guard FileManager.default.createFile(atPath: next.path, contents: nil) else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: next.path])
        }
        let fresh = try FileHandle(forWritingTo: next)
        try fresh.write(contentsOf: frames)
        try fresh.synchronize()
        try fresh.close()
        _ = try FileManager.default.replaceItemAt(url, withItemAt: next)
        try handle.close()
        self = Journal(url: url, handle: try FileHandle(forUpdating: url), size: frames.count)
        try handle.seekToEnd()
    }

    /// Closes the file.
    func close() throws { try handle.close() }

    private init(url: URL, handle: FileHandle, size: Int) {
        self.url = url
        self.handle = handle
        self.size = size
    }

    private static func bigEndian32(_ bytes: [UInt8], _ at: Int) -> UInt32 {
        UInt32(bytes[at]) << 24 | UInt32(bytes[at + 1]) << 16 | UInt32(bytes[at + 2]) << 8 | UInt32(bytes[at + 3])
    }

    private static func appendBigEndian32(_ bytes: inout [UInt8], _ value: UInt32) {
        bytes += [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
    }
}

/// CRC-32 (IEEE 802.3, as zlib's), for the journal's frames.
enum CRC32 {
    private static let table: [UInt32] = (0..<256).map { n in
        var c = UInt32(n)
        for _ in 0..<8 { c = c & 1 == 1 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        return c
    }

    static func checksum(_ bytes: ArraySlice<UInt8>) -> UInt32 {
        var c: UInt32 = 0xFFFF_FFFF
        for byte in bytes { c = table[Int((c ^ UInt32(byte)) & 0xFF)] ^ (c >> 8) }
        return c ^ 0xFFFF_FFFF
    }
}
