import Foundation
import LifecycleKit
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The reporter's journal: one append-only file, `journal`, in the folder the app names, and
/// `journal.lock`, the lock its writers take.
///
/// **Format.** A sequence of entries, each framed as a 34-byte header and a payload:
/// `0xFF` (the marker), the kind (`i` item, `a` ack, `d` drop, `b` base), then four fields of 8
/// lowercase hex digits: the payload's length, the entry's ordinal in the file (0, 1, …), the
/// number of `item` entries before it in the file, and the CRC-32 of the header after the marker
/// (25 bytes) and the payload. The payload is one JSON object (`JournalEntry`): `item` (a queued
/// input with its sequence number and idempotency key), `ack` (every item up to `through`, and
/// the gaps named, were answered), `drop` (the items numbered `from...through` were dropped past
/// the bound; the gaps to send, by key, with their counts) or `base` (written first by a
/// compaction: the next sequence number). The payload is UTF-8 and the header ASCII, so the byte
/// 0xFF appears only where an entry starts: reading finds the next entry after damage by looking
/// for it. A journal of the earlier format (`[length][CRC-32][payload]`, binary) still opens: it
/// is read to its first damaged frame (which has no marker to find the next by; a whole frame
/// with crafted values is skipped) and rewritten in this format.
///
/// **Invariants** (what makes delivery exactly once across a kill at any point):
/// 1. An entry counts only once it is whole: its header parses, its checksum matches, its
///    payload decodes and its values are possible (see *Crafted values*).
/// 2. `report` returns once its `item` entry is written (`pwrite(2)`, on the caller's thread):
///    from then on a kill of the process loses nothing, since the kernel holds the bytes. It is
///    fsynced by the group sync (``ReporterCore``'s serial queue, off the caller's thread), which
///    starts as soon as the write returns and syncs every entry written since the last sync at
///    once (`F_FULLFSYNC` on Apple platforms with `Configuration.powerLossDurable`): from then on
///    a power loss loses nothing either. The window is one or two syncs long (about a
///    millisecond on a server's disk, tens on slow flash). A power loss inside it can cost the
///    last entries written, not yet synced: a tail cut off as a torn write, or entries left
///    damaged (counted as lost items, below); never a reordering or a duplicate, since an item
///    sent in that window and then lost from the file was stored once by the service, and items
///    kept are resent with their keys. When a group sync fails, the next `report` syncs before
///    it returns and throws ``LifecycleReporter/ReportError/journalUnwritable(directory:reason:)``
///    if that fails too. An item whose write was torn by a kill was never acknowledged to the caller.
/// 3. Keys are random UUIDs made when an item is queued and stored in its entry: a resend after a
///    kill carries the same key (the service answers it again from its idempotency store), and
///    no other item ever carries it.
/// 4. When a batch is answered, its `ack` entry is written and fsynced (on the sender's thread,
///    outside the reporter's lock so reports go on meanwhile; the sync also makes every entry
///    before it durable) before anything else is sent, so an
///    answered item is never sent again; one sent but not acknowledged is resent.
/// 5. A gap's key and count may change only while it has never been handed to a batch in this
///    process (a gap replayed from the file, or appended by another process, may have been
///    sent: it is never changed).
/// 6. Compaction (on the group sync's queue, never a reporting thread) takes the live state (a
///    `base`, the pending gaps, the pending items, keys unchanged) under the lock, and writes
///    it to `journal.new-<pid>` and fsyncs it outside the lock, so reports go on meanwhile.
///    Under the lock again it appends to the new file, framed anew, the entries written to
///    `journal` since the state was taken (by any process), renames it over `journal`, and
///    syncs the new file and the folder before the next group sync, outside the lock: either
///    file, whole, replays to the same pending queue. Entries another process appended meanwhile
///    may already be synced (its reports returned durable): the new file is then synced under
///    the lock before the rename, which happens only with two processes on one folder. A
///    power loss between the rename and the folder's sync costs what any unsynced entry costs
///    (invariant 2); an `ack` synced in the old file and not yet in the new one costs a resend.
///    When another process replaced the file meanwhile, the new file is discarded.
/// 7. One writer at a time: every append and rewrite holds an exclusive `flock` on
///    `journal.lock`, taken just before and released just after, never across a wait (an iOS
///    app suspended holding a lock in a shared container is ended, 0xdead10cc). Under the lock
///    the writer first reads what other processes appended (or, when one rewrote the file,
///    the whole new file), so two reporters on one folder (an app and its extension) share one
///    queue: sequence numbers stay increasing, keys unique, and no bytes interleave.
///
/// **Recovery rules** (what each failure costs and how it shows):
/// - *A torn write* (a kill in the middle of an append: a last entry whose length runs past the
///   end of the file, or a tail without a header) was never acknowledged: it is cut off when the
///   journal opens, or by the next writer, and reported as ``LifecycleReporter/Event/damagedTail(bytes:)``
///   and ``LifecycleReporter/Status/damagedTailBytes``. A power loss can leave a torn entry that
///   looks whole and damaged: it then costs as damage (below). A last entry whose length runs
///   past the end but whose payload is whole (a flipped bit in its length) is damage, not a torn
///   write: its report had returned.
/// - *A failed write* (ENOSPC, EIO): the file is cut back to its last whole entry (ftruncate,
///   fsync) before anything else is appended, and `report` throws
///   ``LifecycleReporter/ReportError/journalUnwritable(directory:reason:)`` naming the error: the report was
///   not queued. If even the cut fails, every later write throws until the journal is opened
///   again (a new reporter), which cuts the torn bytes as a torn write.
/// - *A damaged entry* (bytes changed after they were written; a crafted value) is skipped and
///   reading goes on at the next entry. What it costs, by kind: an `item`, that item (lost,
///   unless a later `ack` shows it was answered or a later `drop` dropped it); an `ack`, a resend of what it acknowledged,
///   which the keys make harmless; a `drop`, nothing is lost: the items it dropped stay queued and
///   are delivered (its gaps, or the growth of a gap it carried, are not sent); a compaction's
///   `drop` (gaps only), the counts of the gaps it carried; a `base`, nothing: the next sequence
///   number is the greatest one seen plus one. The entries of a damaged run are counted from the
///   ordinals of the whole entries around it (or, at the end of the file, from the markers and
///   kinds in it, an entry whose kind cannot be read counting as an item, a marker inside the
///   frame a readable header before it claims not starting one). Its items are taken
///   to have the sequence numbers after the last item read, below the next whole item's; an
///   `ack` or `drop` after the run is checked with those numbers taken, and answers them. The
///   rewritten file starts with a `base` keeping them taken. The loss is reported
///   once: the damaged bytes are removed when the journal opens (it is rewritten without them),
///   handed to `onEvent` as ``LifecycleReporter/Event/damaged(_:)``, kept in
///   ``LifecycleReporter/Status/damage``, and the lost items are queued as a gap on their instance
///   when the file names one instance only (an app's queue), sent just before the first queued
///   item numbered after the first lost one (``PendingGap/lostFrom``). Damage in what another process
///   appended is added to `status.damage` when a write reads it, and counted again at the next open.
/// - *Crafted values*: an entry whose values cannot have been written by a reporter (a sequence
///   number not above the previous item's or above 2⁴⁰, an `ack` or `drop` past the last
///   sequence number, a drop's range reversed, a gap's count not in 1...2³¹−1, an empty key) is
///   a damaged entry.
///   Reading is linear in the file's size: each candidate entry is checked once, and a check
///   stops at the first 0xFF, where the next candidate starts.
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
        /// The frame sizes of `entries`, in order.
        var sizes: [Int]
        /// Bytes of a torn tail cut off (0 when there was none).
        var tornBytes: Int
        /// Damaged entries skipped (nil when there were none).
        var damage: LifecycleReporter.Damage?
    }

    /// The file operations a test replaces to fail as a full disk would; each returns what the
    /// system call returns, setting `errno`.
    struct IO: Sendable {
        /// `pwrite(2)`.
        var write: @Sendable (_ descriptor: Int32, _ bytes: UnsafeRawBufferPointer, _ offset: Int) -> Int
        /// `ftruncate(2)`.
        var truncate: @Sendable (_ descriptor: Int32, _ length: Int) -> Int32
        /// `fsync(2)`; with `full` on Apple platforms `fcntl(F_FULLFSYNC)`, which also flushes
        /// the drive's cache (power-loss durability), falling back to `fsync` where the file
        /// system refuses it.
        var sync: @Sendable (_ descriptor: Int32, _ full: Bool) -> Int32 = IO.fullSync

        static let system = IO(
            write: { descriptor, bytes, offset in pwrite(descriptor, bytes.baseAddress, bytes.count, off_t(offset)) },
            truncate: { descriptor, length in ftruncate(descriptor, off_t(length)) }
        )

        @Sendable static func fullSync(_ descriptor: Int32, _ full: Bool) -> Int32 {
            #if canImport(Darwin)
            // Not verified here (no Apple SDK): fsync on Apple platforms leaves the data in the drive's cache.
            if full, fcntl(descriptor, F_FULLFSYNC) == 0 { return 0 }
            #endif
            return fsync(descriptor)
        }
    }

    /// The greatest sequence number an entry may hold: far beyond any queue, and far from overflow.
    static let maxSequence: UInt64 = 1 << 40
    static let headerSize = 34
    private static let marker: UInt8 = 0xFF
    private static let kindBytes: [Entry.Kind: UInt8] = [.item: 0x69, .ack: 0x61, .drop: 0x64, .base: 0x62]

    let directory: URL
    private var file: Descriptor
    private let lockFile: Descriptor
    private let io: IO
    /// Whether each sync asks for power-loss durability (`F_FULLFSYNC`).
    private let fullSync: Bool
    /// Whether entries were written since the file was last synced.
    private var unsynced = false
    /// Whether the file was renamed into place (a compaction, here or in another process) since
    /// the folder was last synced: the next sync covers the folder too (invariant 6).
    private var folderUnsynced = false
    /// How many times another process's appends were read: a compaction that saw some may be
    /// carrying entries that process already synced (invariant 6).
    private var foreignAppends = 0
    /// Bytes in the file as this process last saw it.
    private(set) var size: Int
    /// The file's identity, to tell a rewrite by another process.
    private var inode: UInt64
    private var cursor: Cursor
    /// Why the file cannot be written (a failed write could not be cut back), if so.
    private var unusable: String?

    private var url: URL { directory.appendingPathComponent("journal") }

    /// Opens (or creates) `directory/journal` under its lock: cuts off a torn tail, and rewrites
    /// the file without damaged entries (queuing a gap for lost items where it can tell the
    /// instance) or in the current format.
    static func open(in directory: URL, io: IO = .system, fullSync: Bool = false) throws -> (Journal, Opened) {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        DeviceFolder.prepare(directory)
        let lockFile = try Descriptor(opening: directory.appendingPathComponent("journal.lock").path, O_RDWR | O_CREAT)
        try lockFile.lock()
        defer { lockFile.unlock() }
        removeAbandonedReplacements(in: directory)
        let file = try Descriptor(opening: directory.appendingPathComponent("journal").path, O_RDWR | O_CREAT)
        let bytes = try file.read(from: 0)
        let parsed = Self.parse(bytes)
        var journal = Journal(directory: directory, file: file, lockFile: lockFile, io: io, fullSync: fullSync, size: bytes.count, inode: try file.inode(), cursor: parsed.cursor)
        var opened = Opened(entries: parsed.entries, sizes: parsed.sizes, tornBytes: parsed.tornBytes, damage: parsed.damage)
        if var damage = parsed.damage {
            // The damaged items' sequence numbers stay taken: an ack or drop naming them must
            // still read as one a reporter wrote once the file is rewritten without them.
            opened.entries.insert(Entry(t: .base, nextSequence: parsed.cursor.nextSequence), at: 0)
            if damage.lostItems > 0, let instance = Self.soleInstance(parsed.entries) {
                opened.entries.append(Entry(t: .drop, gaps: [PendingGap(key: LifecycleClient.makeIdempotencyKey(), instance: instance, dropped: damage.lostItems, lostFrom: parsed.firstLost)]))
                damage.gapInstance = instance
            }
            opened.damage = damage
        }
        if parsed.damage != nil || parsed.earlierFormat {
            opened.sizes = try journal.rewrite(opened.entries)
        } else if parsed.tornBytes > 0 {
            try journal.cut(to: parsed.end)
        }
        return (journal, opened)
    }

    /// Removes the new files of compactions a kill cut short. One another process is writing now
    /// goes too: its rename then fails, it keeps its journal as it was and compacts later.
    private static func removeAbandonedReplacements(in directory: URL) {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        } catch {
            return  // The journal opens regardless (or fails on its own): only tidying is skipped.
        }
        for name in names where name.hasPrefix("journal.new") {
            unlink(directory.appendingPathComponent(name).path)
        }
    }

    /// The one instance `entries` name, if they name exactly one.
    private static func soleInstance(_ entries: [Entry]) -> String? {
        var instances = Set<String>()
        for entry in entries {
            if let item = entry.item { instances.insert(item.instance) }
            for gap in entry.gaps ?? [] { instances.insert(gap.instance) }
        }
        return instances.count == 1 ? instances.first : nil
    }

    /// Takes the folder's lock; blocks while another writer holds it.
    func lock() throws { try lockFile.lock() }

    /// Releases the folder's lock.
    func unlock() { lockFile.unlock() }

    /// What other processes wrote since this one last looked (under the lock).
    enum Change {
        /// Entries appended after this process's last one (a torn tail among them cut off).
        case appended(Parsed)
        /// The file was rewritten (a compaction): all of it, as open finds it.
        case replaced(Parsed)
    }

    /// Reads what other writers changed; call with the lock held, before writing. Throws while
    /// the file cannot be written (see the recovery rules).
    mutating func catchUp() throws -> Change? {
        if let unusable { throw LifecycleReporter.ReportError.journalUnwritable(directory: directory.path, reason: "it cannot be written until it is opened again (\(unusable))") }
        var status = stat()
        guard lstat(url.path, &status) == 0 else { throw Self.failure("cannot read \(url.path)", errno) }
        // Shorter than this process wrote: only a rewrite makes it so.
        if UInt64(status.st_ino) != inode || Int(status.st_size) < size {
            file = try Descriptor(opening: url.path, O_RDWR | O_CREAT)
            inode = try file.inode()
            let bytes = try file.read(from: 0)
            let parsed = Self.parse(bytes)
            size = bytes.count
            cursor = parsed.cursor
            if parsed.tornBytes > 0 { try cut(to: parsed.end) }
            // Its rename is durable only once the folder is synced; this process's next sync does it
            // too, before anything it appends counts as durable.
            folderUnsynced = true
            return .replaced(parsed)
        }
        guard Int(status.st_size) != size else { return nil }
        let bytes = try file.read(from: size)
        var parsed = Self.parse(bytes, from: cursor, format: .current)
        parsed.end += size
        size += bytes.count
        cursor = parsed.cursor
        foreignAppends += 1
        if parsed.tornBytes > 0 { try cut(to: parsed.end) }
        return .appended(parsed)
    }

    /// An entry with its payload, encoded once: a report's framed size decides the bound before
    /// it is written, and the same bytes are then written.
    struct Encoded {
        let entry: Entry
        let payload: [UInt8]

        init(_ entry: Entry) throws {
            self.entry = entry
            payload = try Journal.payload(entry)
        }

        /// The bytes it takes framed.
        var frameSize: Int { Journal.headerSize + payload.count }
    }

    /// The size `entry` takes framed.
    static func frameSize(_ entry: Entry) throws -> Int { try Encoded(entry).frameSize }

    private static func payload(_ entry: Entry) throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return [UInt8](try encoder.encode(entry))
    }

    /// The framed bytes of `entries` written from `cursor` on, and their sizes.
    private static func frames(_ entries: [Encoded], _ cursor: inout Cursor) -> ([UInt8], [Int]) {
        var bytes: [UInt8] = []
        var sizes: [Int] = []
        for (entry, payload) in entries.map({ ($0.entry, $0.payload) }) {
            var header = [kindBytes[entry.t]!]
            for field in [UInt32(payload.count), cursor.ordinal, cursor.itemsBefore] { header += hex(field) }
            let checksum = CRC32.finish(CRC32.update(CRC32.update(CRC32.start, header[...]), payload[...]))
            bytes += [marker] + header + hex(checksum) + payload
            sizes.append(headerSize + payload.count)
            cursor.advance(past: entry.t)
        }
        return (bytes, sizes)
    }

    /// Appends `entries` in one write and returns their frame sizes; with `sync`, fsyncs first
    /// (with the entries written before them), and without, leaves them to ``takeUnsynced()``'s
    /// caller (invariant 2). A failure cuts the file back to where it was (recovery rules) and
    /// throws ``LifecycleReporter/ReportError/journalUnwritable(directory:reason:)``.
    mutating func append(_ entries: [Encoded], sync: Bool) throws -> [Int] {
        var next = cursor
        let (bytes, sizes) = Self.frames(entries, &next)
        do {
            try file.write(bytes, at: size, io)
            if sync { try takeUnsynced(including: true)?.run() }
        } catch let failure as Failure {
            if io.truncate(file.descriptor, size) != 0 || io.sync(file.descriptor, fullSync) != 0 {
                unusable = "\(failure.message); cutting it back failed: \(Self.describe(errno))"
            }
            throw LifecycleReporter.ReportError.journalUnwritable(directory: directory.path, reason: failure.message)
        }
        size += bytes.count
        cursor = next
        unsynced = !sync
        return sizes
    }

    /// What to sync when entries were written without a sync since the last one, or a rename
    /// since the folder's last sync (the flags are cleared: a write after this call asks for
    /// another sync).
    mutating func takeUnsynced() -> PendingSync? { takeUnsynced(including: false) }

    /// As ``takeUnsynced()``; with `including`, the file even when nothing was written unsynced.
    private mutating func takeUnsynced(including: Bool) -> PendingSync? {
        guard unsynced || folderUnsynced || including else { return nil }
        defer { (unsynced, folderUnsynced) = (false, false) }
        return PendingSync(file: file, folder: folderUnsynced ? directory.path : nil, syncer: Syncer(io: io, full: fullSync))
    }

    /// A sync to run outside the reporter's lock: the file, then the folder after a rename.
    struct PendingSync: Sendable {
        let file: Descriptor
        let folder: String?
        let syncer: Syncer

        func run() throws {
            try syncer.sync(file)
            if let folder { try syncer.sync(try Descriptor(opening: folder, O_RDONLY)) }
        }
    }

    /// Syncs a file outside the reporter's lock.
    struct Syncer: Sendable {
        let io: IO
        let full: Bool

        func sync(_ file: Descriptor) throws {
            guard io.sync(file.descriptor, full) == 0 else { throw Journal.failure("cannot sync the journal", errno) }
        }
    }

    /// The file as it was when a compaction took the live state.
    struct Basis {
        fileprivate let inode: UInt64
        fileprivate let size: Int
        fileprivate let cursor: Cursor
        fileprivate let foreignAppends: Int
    }

    /// Where the file is now: what a compaction's live state, taken now, replaces.
    var basis: Basis { Basis(inode: inode, size: size, cursor: cursor, foreignAppends: foreignAppends) }

    /// A compaction's new file, written and synced; ``commit(_:)`` puts it in place.
    struct Replacement {
        fileprivate let path: String
        fileprivate let file: Descriptor
        fileprivate let inode: UInt64
        fileprivate let sizes: [Int]
        fileprivate let size: Int
        fileprivate let cursor: Cursor
        fileprivate let basis: Basis

        /// Removes the new file, when it will not be committed.
        func discard() {
            // Gone already (committed, or an opening reporter tidied it): nothing to remove.
            unlink(path)
        }
    }

    /// Writes `entries` (the live state as of `basis`) to a new file beside the journal and syncs
    /// it. Needs no lock: the file is this process's own until it is committed (invariant 6).
    static func prepare(_ entries: [Entry], basis: Basis, in directory: URL, io: IO, fullSync: Bool) throws -> Replacement {
        var cursor = Cursor()
        let (bytes, sizes) = frames(try entries.map(Encoded.init), &cursor)
        let path = directory.appendingPathComponent("journal.new-\(getpid())").path
        let file = try Descriptor(opening: path, O_RDWR | O_CREAT | O_TRUNC)
        do {
            try file.write(bytes, at: 0, io)
            try Syncer(io: io, full: fullSync).sync(file)
            return Replacement(path: path, file: file, inode: try file.inode(), sizes: sizes, size: bytes.count, cursor: cursor, basis: basis)
        } catch {
            unlink(path)
            throw error
        }
    }

    /// Puts `replacement` in the journal's place, under the lock after ``catchUp()``: the entries
    /// written since its basis, by any process, are framed anew onto it first. Returns those
    /// entries and the new file's frame sizes (the live state's, then theirs), or nil when
    /// another process replaced the file meanwhile (the replacement is discarded). The new
    /// file and the folder are synced by the next sync (``takeUnsynced()``).
    mutating func commit(_ replacement: Replacement) throws -> (tail: [Entry], sizes: [Int])? {
        let basis = replacement.basis
        guard inode == basis.inode, size >= basis.size else {
            replacement.discard()
            return nil
        }
        let tail = Self.parse(try file.read(from: basis.size), from: basis.cursor, format: .current)
        var next = replacement.cursor
        let (bytes, sizes) = Self.frames(try tail.entries.map(Encoded.init), &next)
        do {
            try replacement.file.write(bytes, at: replacement.size, io)
            // Two processes on one folder: what the other appended may be synced in the old file
            // (its reports returned durable), so it is in the new one before the rename.
            if foreignAppends != basis.foreignAppends { try sync(replacement.file) }
            guard rename(replacement.path, url.path) == 0 else { throw Self.failure("cannot rename \(replacement.path)", errno) }
        } catch {
            replacement.discard()
            throw error
        }
        file = replacement.file
        inode = replacement.inode
        size = replacement.size + bytes.count
        cursor = next
        unsynced = !bytes.isEmpty
        folderUnsynced = true
        unusable = nil
        return (tail.entries, replacement.sizes + sizes)
    }

    private func sync(_ file: Descriptor) throws { try Syncer(io: io, full: fullSync).sync(file) }

    /// Replaces the file by `entries` (the live state) durably, under the lock (opening, when
    /// nothing else can have been written since); their frame sizes.
    mutating func rewrite(_ entries: [Entry]) throws -> [Int] {
        let replacement = try Self.prepare(entries, basis: basis, in: directory, io: io, fullSync: fullSync)
        guard let (_, sizes) = try commit(replacement) else { throw Failure(message: "\(url.path) was replaced while it was rewritten") }
        try takeUnsynced()?.run()
        return sizes
    }

    /// Cuts the file to `length` bytes, durably.
    private mutating func cut(to length: Int) throws {
        guard io.truncate(file.descriptor, length) == 0 else { throw Self.failure("cannot cut \(url.path) back", errno) }
        try sync(file)
        size = length
    }

    private init(directory: URL, file: Descriptor, lockFile: Descriptor, io: IO, fullSync: Bool, size: Int, inode: UInt64, cursor: Cursor) {
        self.directory = directory
        self.file = file
        self.lockFile = lockFile
        self.io = io
        self.fullSync = fullSync
        self.size = size
        self.inode = inode
        self.cursor = cursor
    }

    /// A failed system call, with its errno named.
    struct Failure: Error, CustomStringConvertible {
        var message: String
        var description: String { message }
    }

    /// `what` failed with `code`; a failed write is its errno alone, since the error that carries
    /// it already says the journal could not be written.
    static func failure(_ what: String?, _ code: Int32) -> Failure {
        Failure(message: what.map { "\($0): \(describe(code))" } ?? describe(code))
    }

    /// `errno` as "No space left on device (ENOSPC)".
    static func describe(_ code: Int32) -> String {
        let name = POSIXErrorCode(rawValue: code).map { String(describing: $0) } ?? "errno \(code)"
        return "\(String(cString: strerror(code))) (\(name))"
    }

    private static let digits = Array("0123456789abcdef".utf8)

    private static func hex(_ value: UInt32) -> [UInt8] {
        (0..<8).map { shift in digits[Int(value >> (28 - UInt32(shift) * 4) & 0xF)] }
    }
}

extension Journal {
    /// Where reading is: the next entry's ordinal, the items before it, and what the entries read
    /// so far allow the next one to hold.
    struct Cursor {
        var ordinal: UInt32 = 0
        var itemsBefore: UInt32 = 0
        /// The greatest item sequence number read (0: none).
        var lastItem: UInt64 = 0
        /// The next sequence number as the entries read so far set it.
        var nextSequence: UInt64 = 1

        mutating func advance(past kind: Entry.Kind) {
            ordinal &+= 1
            if kind == .item { itemsBefore &+= 1 }
        }

        /// Whether a reporter could have written `entry` here (crafted values are damage).
        func allows(_ entry: Entry) -> Bool {
            func validGap(_ gap: PendingGap) -> Bool { !gap.key.isEmpty && !gap.instance.isEmpty && (1...Int(Int32.max)).contains(gap.dropped) }
            switch entry.t {
            case .item:
                guard let item = entry.item else { return false }
                return item.sequence > lastItem && item.sequence <= Journal.maxSequence && !item.key.isEmpty && !item.instance.isEmpty
            case .ack:
                // An ack may follow a compaction (another process's) that removed its items.
                guard let through = entry.through else { return false }
                return through < nextSequence
            case .drop:
                if entry.from != nil || entry.through != nil {
                    guard let from = entry.from, let through = entry.through, 1 <= from, from <= through, through < nextSequence else { return false }
                }
                return (entry.gaps ?? []).allSatisfy(validGap)
            case .base:
                guard let next = entry.nextSequence else { return false }
                return (1...Journal.maxSequence).contains(next)
            }
        }

        mutating func note(_ entry: Entry) {
            if let item = entry.item, entry.t == .item {
                lastItem = item.sequence
                nextSequence = max(nextSequence, item.sequence + 1)
            }
            if entry.t == .base, let next = entry.nextSequence { nextSequence = max(nextSequence, next) }
        }
    }
}

/// An open file descriptor, closed with its last reference (the group sync may hold one past a
/// compaction's replacing it: syncing the old file then is harmless).
final class Descriptor: Sendable {
    let descriptor: Int32

    init(opening path: String, _ flags: Int32) throws {
        descriptor = open(path, flags | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw Journal.failure("cannot open \(path)", errno) }
    }

    deinit { close(descriptor) }

    func lock() throws {
        while flock(descriptor, LOCK_EX) != 0 {
            guard errno == EINTR else { throw Journal.failure("cannot lock the journal", errno) }
        }
    }

    func unlock() { flock(descriptor, LOCK_UN) }

    func inode() throws -> UInt64 {
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { throw Journal.failure("cannot read the journal", errno) }
        return UInt64(status.st_ino)
    }

    /// The file's bytes from `offset` to its end.
    func read(from offset: Int) throws -> [UInt8] {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = chunk.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, off_t(offset + bytes.count)) }
            if count < 0 {
                if errno == EINTR { continue }
                throw Journal.failure("cannot read the journal", errno)
            }
            if count == 0 { return bytes }
            bytes += chunk[0..<count]
        }
    }

    func write(_ bytes: [UInt8], at offset: Int, _ io: Journal.IO) throws {
        var written = 0
        while written < bytes.count {
            let count = bytes.withUnsafeBytes { io.write(descriptor, UnsafeRawBufferPointer(rebasing: $0[written...]), offset + written) }
            if count < 0 {
                if errno == EINTR { continue }
                throw Journal.failure(nil, errno)
            }
            written += count
        }
    }

}

/// CRC-32 (IEEE 802.3, as zlib's), for the journal's frames.
enum CRC32 {
    private static let table: [UInt32] = (0..<256).map { n in
        var c = UInt32(n)
        for _ in 0..<8 { c = c & 1 == 1 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        return c
    }

    static let start: UInt32 = 0xFFFF_FFFF

    static func update(_ crc: UInt32, _ byte: UInt8) -> UInt32 { table[Int((crc ^ UInt32(byte)) & 0xFF)] ^ (crc >> 8) }

    static func update(_ crc: UInt32, _ bytes: ArraySlice<UInt8>) -> UInt32 { bytes.reduce(crc, update) }

    static func finish(_ crc: UInt32) -> UInt32 { crc ^ 0xFFFF_FFFF }

    static func checksum(_ bytes: ArraySlice<UInt8>) -> UInt32 { finish(update(start, bytes)) }
}
