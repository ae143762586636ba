import Foundation

extension Journal {
    /// What reading a journal's bytes found.
    struct Parsed {
        /// The whole entries, in order.
        var entries: [Entry] = []
        /// Their frame sizes.
        var sizes: [Int] = []
        /// The offset just past the last whole entry (where a torn tail is cut).
        var end = 0
        /// Bytes of a torn tail (a write cut short), 0 when none.
        var tornBytes = 0
        /// The damaged entries skipped, nil when none.
        var damage: LifecycleReporter.Damage?
        /// Where reading ended: what the next entry appended must carry.
        var cursor: Cursor
        /// Whether the bytes are of the earlier format (rewritten when the journal opens).
        var earlierFormat = false
        /// The sequence number the first lost item is taken to have, nil when none is lost.
        var firstLost: UInt64?
    }

    enum Format { case current, earlier }

    /// Reads a whole journal file, of either format.
    static func parse(_ data: Data) -> Parsed { parse([UInt8](data)) }

    /// Reads a whole journal file, of either format: the earlier one starts with a binary length
    /// (never 0xFF, which would be 4 GiB) and a whole first frame.
    static func parse(_ bytes: [UInt8]) -> Parsed {
        let earlier = !bytes.isEmpty && bytes[0] != 0xFF && EarlierReader.frame(bytes, at: 0) != nil
        return parse(bytes, from: Cursor(), format: earlier ? .earlier : .current)
    }

    /// Reads `bytes` (the file, or what was appended to it since `cursor`).
    static func parse(_ bytes: [UInt8], from cursor: Cursor, format: Format) -> Parsed {
        switch format {
        case .current:
            var reader = Reader(bytes: bytes, parsed: Parsed(cursor: cursor))
            reader.read()
            return reader.parsed
        case .earlier:
            return EarlierReader.read(bytes)
        }
    }

    /// One header, as read.
    fileprivate struct Header {
        var kind: Entry.Kind
        var length: Int
        var ordinal: UInt32
        var itemsBefore: UInt32
    }

    /// Reads the current format. Linear: each candidate is checked once, and a check stops at
    /// the first 0xFF after its marker, where the next candidate starts.
    private struct Reader {
        let bytes: [UInt8]
        var parsed: Parsed
        /// The sequence numbers of damaged items, increasing, until a later entry shows them
        /// answered or dropped; those before `lostHead` are answered (an ack cuts a prefix in
        /// constant time, so crafted acks cannot make reading quadratic).
        var lost: [UInt64] = []
        var lostHead = 0
        /// The greatest sequence number given to a damaged item (0: none).
        var lastLost: UInt64 = 0
        var damage = LifecycleReporter.Damage(entries: 0, lostItems: 0, bytes: 0)
        /// The smallest a frame can be (a header and `{"t":"ack"}`), to bound a run's count.
        static let smallestFrame = Journal.headerSize + 11

        enum Candidate {
            case whole(Header, Entry, end: Int)
            /// Not an entry; the next candidate is at or after `resume` (> the candidate's start).
            case broken(resume: Int)
        }

        mutating func read() {
            var at = 0
            var run: Int?  // where the damaged run being read started
            while at < bytes.count {
                guard bytes[at] == 0xFF else {
                    if run == nil { run = at }
                    at = nextMarker(from: at + 1)
                    continue
                }
                switch candidate(at, after: run.map { $0..<at }) {
                case .whole(let header, let entry, let end):
                    if let start = run { skip(start..<at, before: header, entry) }
                    run = nil
                    accept(entry, header.kind, size: end - at)
                    at = end
                    parsed.end = end
                case .broken(let resume):
                    if run == nil { run = at }
                    at = resume
                }
            }
            if let start = run {
                if isTorn(start) {
                    parsed.tornBytes = bytes.count - start
                } else {
                    skip(start..<bytes.count, before: nil, nil)
                }
            }
            damage.lostItems = lost.count - lostHead
            if lostHead < lost.count { parsed.firstLost = lost[lostHead] }
            if damage.entries > 0 || damage.bytes > 0 { parsed.damage = damage }
        }

        func nextMarker(from index: Int) -> Int {
            var at = index
            while at < bytes.count && bytes[at] != 0xFF { at += 1 }
            return at
        }

        mutating func accept(_ entry: Entry, _ kind: Entry.Kind, size: Int) {
            parsed.entries.append(entry)
            parsed.sizes.append(size)
            parsed.cursor.note(entry)
            parsed.cursor.advance(past: kind)
            // Lost items a later entry shows answered, or dropped (its gap counts them), cost nothing more.
            if entry.t == .ack, let through = entry.through { lostHead = answered(through: through, from: lostHead) }
            if entry.t == .drop, let from = entry.from, let through = entry.through {
                let first = answered(through: from - 1, from: lostHead)
                let end = answered(through: through, from: first)
                if first == lostHead { lostHead = end } else if first < end { lost.removeSubrange(first..<end) }
            }
        }

        /// The index of the first lost item after `through` (binary search: `lost` increases).
        func answered(through: UInt64, from: Int) -> Int {
            var low = from
            var high = lost.count
            while low < high {
                let middle = (low + high) / 2
                if lost[middle] <= through { low = middle + 1 } else { high = middle }
            }
            return low
        }

        /// The entries and items of the damaged run `range`, as the whole `next` one's ordinals
        /// tell (nil when they cannot); constant time.
        func countByOrdinals(_ range: Range<Int>, before next: Header?) -> (entries: Int, items: Int)? {
            let cursor = parsed.cursor
            let most = range.count / Self.smallestFrame + 1
            guard let next, next.ordinal >= cursor.ordinal, next.itemsBefore >= cursor.itemsBefore,
                  Int(next.ordinal - cursor.ordinal) <= most, next.itemsBefore - cursor.itemsBefore <= next.ordinal - cursor.ordinal
            else { return nil }
            return (Int(next.ordinal - cursor.ordinal), Int(next.itemsBefore - cursor.itemsBefore))
        }

        /// The entries and items of the damaged run `range`.
        func count(_ range: Range<Int>, before next: Header?) -> (entries: Int, items: Int) {
            if let counted = countByOrdinals(range, before: next) { return counted }
            // Each marker starts an entry (the run's start too, its marker damaged), but one inside
            // the frame a readable header before it claims, within the run, is damage to that
            // entry; a kind that cannot be read counts as an item, the side that records a gap.
            var starts: [Int] = []
            var covered = range.lowerBound
            for index in range where index >= covered && (bytes[index] == 0xFF || index == range.lowerBound) {
                starts.append(index)
                let end = header(index).map { index + Journal.headerSize + $0.length } ?? index + 1
                covered = end <= range.upperBound ? end : index + 1
            }
            return (starts.count, starts.filter { $0 + 1 >= bytes.count || ![0x61, 0x64, 0x62].contains(bytes[$0 + 1]) }.count)
        }

        /// The sequence numbers a damaged run's `items` had, as well as they can be told:
        /// after the last item read (not the next sequence number: after a compaction's base that
        /// is above every item it kept), in order, below the next whole item's.
        func lostSequences(_ items: Int, before entry: Entry?) -> [UInt64] {
            let (first, last) = lostBounds(before: entry)
            return (0..<UInt64(items)).map { min(first + $0, last) }
        }

        /// The first sequence number a damaged run's items take, and the greatest they may.
        func lostBounds(before entry: Entry?) -> (first: UInt64, last: UInt64) {
            let first = max(parsed.cursor.lastItem, lastLost) + 1
            let next = entry?.t == .item ? entry?.item?.sequence ?? 0 : 0
            return (first, next > first ? next - 1 : next == 0 ? .max : first)
        }

        /// `parsed.cursor` once `items` damaged items are skipped: their sequence numbers, which
        /// a later ack or drop may name, were taken.
        func cursor(afterLost items: Int, before entry: Entry?) -> Cursor {
            var cursor = parsed.cursor
            let (first, last) = lostBounds(before: entry)
            if items > 0 { cursor.nextSequence = max(cursor.nextSequence, min(first + UInt64(items - 1), last) + 1) }
            return cursor
        }

        /// The cursor that checks the whole entry `entry` after the damaged run `run`: an ack
        /// may answer the run's items. Only a run the ordinals count (constant time: a check
        /// stays linear); another is checked as if its items were not there.
        func cursor(after run: Range<Int>?, before next: Header, _ entry: Entry) -> Cursor {
            guard let run, let counted = countByOrdinals(run, before: next) else { return parsed.cursor }
            return cursor(afterLost: counted.items, before: entry)
        }

        /// Counts the damaged run `range` before the whole entry `next` (nil at the end).
        mutating func skip(_ range: Range<Int>, before next: Header?, _ entry: Entry?) {
            let counted = count(range, before: next)
            damage.entries += counted.entries
            damage.bytes += range.count
            let sequences = lostSequences(counted.items, before: entry)
            parsed.cursor = cursor(afterLost: counted.items, before: entry)
            lost += sequences
            lastLost = sequences.last ?? lastLost
            // The entries skipped held ordinals: the next whole one is read from where they end.
            if let next {
                parsed.cursor.ordinal = next.ordinal
                parsed.cursor.itemsBefore = next.itemsBefore
            }
        }

        /// Whether the tail from `start` is a write cut short: one entry whose header or payload
        /// runs past the end, or bytes that are no header at all (zeros a crash left). A payload
        /// that is whole (a JSON object, which no shorter prefix of one is) had its length
        /// damaged after it was written: that entry is damage, and costs its item.
        func isTorn(_ start: Int) -> Bool {
            let markers = (start..<bytes.count).filter { bytes[$0] == 0xFF }
            if markers.isEmpty { return !looksLikeHeader(start) }
            guard markers == [start] else { return false }
            if start + Journal.headerSize > bytes.count { return true }
            guard let header = header(start) else { return false }
            guard start + Journal.headerSize + header.length > bytes.count else { return false }
            let payload = Data(bytes[(start + Journal.headerSize)...])
            // Decoding fails for every real torn write: that failure is the answer, not an error.
            return (try? JSONDecoder().decode(Entry.self, from: payload)) == nil
        }

        func looksLikeHeader(_ start: Int) -> Bool {
            start + 1 < bytes.count && [0x69, 0x61, 0x64, 0x62].contains(bytes[start + 1])
        }

        func header(_ at: Int) -> Header? {
            guard at + Journal.headerSize <= bytes.count else { return nil }
            let kind: Entry.Kind
            switch bytes[at + 1] {
            case 0x69: kind = .item
            case 0x61: kind = .ack
            case 0x64: kind = .drop
            case 0x62: kind = .base
            default: return nil
            }
            var fields: [UInt32] = []
            for field in 0..<3 {
                guard let value = hex(at + 2 + field * 8) else { return nil }
                fields.append(value)
            }
            return Header(kind: kind, length: Int(fields[0]), ordinal: fields[1], itemsBefore: fields[2])
        }

        func hex(_ at: Int) -> UInt32? {
            var value: UInt32 = 0
            for byte in bytes[at..<(at + 8)] {
                switch byte {
                case 0x30...0x39: value = value << 4 | UInt32(byte - 0x30)
                case 0x61...0x66: value = value << 4 | UInt32(byte - 0x61 + 10)
                default: return nil
                }
            }
            return value
        }

        /// The entry at `at`, after the damaged run `run` if any (whose items an ack may answer).
        func candidate(_ at: Int, after run: Range<Int>?) -> Candidate {
            if let marker = bytes[(at + 1)..<min(bytes.count, at + Journal.headerSize)].firstIndex(of: 0xFF) { return .broken(resume: marker) }
            guard let header = header(at), let checksum = hex(at + 26) else { return .broken(resume: at + 1) }
            let end = at + Journal.headerSize + header.length
            guard end <= bytes.count else { return .broken(resume: at + 1) }
            var crc = CRC32.update(CRC32.start, bytes[(at + 1)..<(at + 26)])
            for index in (at + Journal.headerSize)..<end {
                // A payload never holds 0xFF: the next candidate starts there.
                guard bytes[index] != 0xFF else { return .broken(resume: index) }
                crc = CRC32.update(crc, bytes[index])
            }
            guard CRC32.finish(crc) == checksum,
                  // A payload that does not decode, or holds what no reporter writes, is damage.
                  let entry = try? JSONDecoder().decode(Entry.self, from: Data(bytes[(at + Journal.headerSize)..<end])),
                  entry.t == header.kind, cursor(after: run, before: header, entry).allows(entry)
            else { return .broken(resume: end) }
            return .whole(header, entry, end: end)
        }
    }

    /// Reads the earlier format, `[length][CRC-32][payload]`: whole entries up to the first
    /// damaged frame, which ends it (its frames have no marker to find the next by); a whole
    /// frame whose values no reporter writes is skipped as one damaged entry.
    private enum EarlierReader {
        static func frame(_ bytes: [UInt8], at: Int) -> (Entry, end: Int)? {
            guard at + 8 <= bytes.count else { return nil }
            let length = Int(bigEndian32(bytes, at))
            let end = at + 8 + length
            guard length > 0, end <= bytes.count else { return nil }
            let payload = bytes[(at + 8)..<end]
            guard CRC32.checksum(payload) == bigEndian32(bytes, at + 4),
                  let entry = try? JSONDecoder().decode(Entry.self, from: Data(payload))  // a payload that does not decode is damage, as a bad checksum
            else { return nil }
            return (entry, end)
        }

        static func read(_ bytes: [UInt8]) -> Parsed {
            var parsed = Parsed(cursor: Cursor(), earlierFormat: true)
            var at = 0
            var crafted = LifecycleReporter.Damage(entries: 0, lostItems: 0, bytes: 0)
            while let found = frame(bytes, at: at) {
                if parsed.cursor.allows(found.0) {
                    parsed.entries.append(found.0)
                    parsed.sizes.append(found.end - at)
                    parsed.cursor.note(found.0)
                    parsed.cursor.advance(past: found.0.t)
                } else {
                    crafted = crafted.adding(LifecycleReporter.Damage(entries: 1, lostItems: 0, bytes: found.end - at))
                }
                at = found.end
            }
            parsed.end = at
            if crafted.entries > 0 { parsed.damage = crafted }
            guard at < bytes.count else { return parsed }
            let torn = at + 8 > bytes.count || at + 8 + Int(bigEndian32(bytes, at)) > bytes.count
            if torn {
                parsed.tornBytes = bytes.count - at
            } else {
                // The rest cannot be read: one damaged entry, an item unless it says otherwise.
                let item = !bytes[(at + 8)...].starts(with: Array(#"{"gapKeys""#.utf8)) && !bytes[(at + 8)...].starts(with: Array(#"{"nextSequence""#.utf8))
                parsed.damage = crafted.adding(LifecycleReporter.Damage(entries: 1, lostItems: item ? 1 : 0, bytes: bytes.count - at))
            }
            return parsed
        }

        static func bigEndian32(_ bytes: [UInt8], _ at: Int) -> UInt32 {
            UInt32(bytes[at]) << 24 | UInt32(bytes[at + 1]) << 16 | UInt32(bytes[at + 2]) << 8 | UInt32(bytes[at + 3])
        }
    }
}
