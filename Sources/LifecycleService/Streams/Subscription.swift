import Foundation
import LifecycleStore
import LifecycleHTTP
import LifecycleLocks

/// One client's stream of records, as `text/event-stream` bytes: the body of a streaming
/// response, read by the server whenever the connection can take more.
///
/// It opens with `retry:`, then either the position it starts from (`id:` alone, when the
/// client gave none) or, on a resume, the records after the client's last event id: from
/// the store while the hub's ring no longer holds them, then from the ring, then live.
/// Each record is `id: <sequence>`, `event: <type>`, `data: <JSON>`. Notices carry no record:
///
/// - `event: gap`, `data: {"lastEventId":L,"droppedThrough":F,"oldest":O,"newest":N}`: retention
///   dropped records after `L`, up to `F` at most; `O` is the oldest sequence number still
///   kept (`null` if none) and `N` the newest published. The replay goes on with what is kept.
/// - `event: reset`, `id: N`, `data: {"lastEventId":L,"newest":N,"oldest":O}`: `L` is ahead of
///   every sequence number published (a client of another database); it goes on live after `N`.
/// - `event: overflow`, `id: S`, `data: {"lastEventId":S}`: live, the subscription fell further
///   behind than its budget (bytes of matching records not yet sent; for an unfiltered one,
///   also when its next record left the ring, which is at least the budget); `S` is the last
///   record it was sent (or where it started), and the stream ends. Reconnecting with
///   `Last-Event-ID: S` (EventSource does) replays the rest. A resume catching up is never cut
///   off, and a filtered subscription whose place left the ring replays from the store instead.
/// - `: heartbeat` comments when idle for a heartbeat interval.
///
/// Records of a deleted instance are not replayed from the store after its deletion (they
/// went with it; its `deleted` record stays for 24 hours); the ring may still hold them.
final class Subscription: ResponseStream {
    /// Where its records come from.
    let hub: StreamHub
    /// Its number in the hub.
    let id: Int
    /// Which records it gets.
    let filter: RecordFilter
    /// The server reads a stream from whichever of its threads finds the connection writable,
    /// one read at a time, and ends it from another: the reader's value is under its own lock.
    private let reader: LockedValue<SubscriptionReader>

    /// Made by ``StreamHub/subscribe(filter:lastEventID:client:)``, which counts it.
    init(hub: StreamHub, id: Int, filter: RecordFilter, lastEventID: Int64?, opening: Opening) {
        self.hub = hub
        self.id = id
        self.filter = filter
        reader = LockedValue(SubscriptionReader(filter: filter, resumeAfter: lastEventID, opening: opening))
    }

    /// The connection is open: the hub wakes it through `waker`.
    func start(waker: StreamWaker) {
        hub.started(id, waker: waker)
    }

    /// The next bytes of the stream: as many as fit, or `wait` until woken, or `end`.
    func read(into buffer: UnsafeMutableRawBufferPointer) -> StreamRead {
        reader.withLock { $0.read(into: buffer, hub: hub, id: id) }
    }

    /// The connection ended: the subscription no longer counts against the hub's limits.
    func finish() {
        reader.withLock { $0.finish() }
        hub.remove(id)
    }
}

/// A subscription's reading side: its phase, and bytes queued but not yet written.
struct SubscriptionReader {
    private enum Phase {
        /// Nothing sent yet; where it starts was decided when it subscribed.
        case opening(Opening)
        /// Replaying from the store: every matching record up to `after` is queued.
        case replaying(after: Int64)
        /// Reading the ring: catching up after a resume, then live.
        case ring(RingCursor)
        /// The last bytes are queued: the stream ends once they are written.
        case closing
        /// The connection is over.
        case finished
    }

    private var phase: Phase
    private var output = OutputBytes()
    /// The sequence number of the last record queued, or the one the subscription began after.
    private var lastSent: Int64
    /// The floor of dropped records last reported in a gap notice.
    private var reportedFloor: Int64 = 0
    private let filter: RecordFilter

    init(filter: RecordFilter, resumeAfter: Int64?, opening: Opening) {
        self.filter = filter
        phase = .opening(opening)
        lastSent = resumeAfter ?? 0
    }

    /// Fills `buffer` with as many queued bytes and frames as it holds.
    mutating func read(into buffer: UnsafeMutableRawBufferPointer, hub: StreamHub, id: Int) -> StreamRead {
        var written = 0
        while true {
            written += output.drain(into: buffer, at: written)
            if written == buffer.count { return .wrote(written) }
            switch phase {
            case .closing, .finished:
                return written > 0 ? .wrote(written) : .end
            case .opening(let opening):
                open(opening, hub: hub)
            case .replaying(let after):
                replay(after: after, hub: hub)
            case .ring(var cursor):
                let take = hub.take(id, &cursor, room: buffer.count - written)
                phase = .ring(cursor)
                switch take {
                case .frames(let frames, let last, let waits):
                    lastSent = last
                    written += copy(frames, into: buffer, at: written)
                    // Registered to be woken: done until then, unless part of a frame is left.
                    if waits { return output.isEmpty ? .wroteAll(written) : .wrote(written) }
                case .heartbeat:
                    output.append(ServerSentEvents.comment("heartbeat"))
                case .nothing:
                    return written > 0 ? .wroteAll(written) : .wait
                case .overflow:
                    output.append(Self.notice("overflow", id: lastSent, ["lastEventId": lastSent]))
                    phase = .closing
                    hub.logger.info("stream fell behind its buffer; closed", ["subscription": String(id), "lastEventId": String(lastSent)])
                case .evicted:
                    phase = .replaying(after: cursor.position)
                }
            }
        }
    }

    /// Drops what is queued: nothing more is read.
    mutating func finish() {
        phase = .finished
        output = OutputBytes()
    }

    private mutating func open(_ opening: Opening, hub: StreamHub) {
        output.append(ServerSentEvents.retry(milliseconds: hub.settings.retryMilliseconds))
        switch opening {
        case .live(let index, let sequence):
            // The client learns where it stands, so that a reconnect before its first record misses nothing.
            output.append(ServerSentEvents.lastEventID(sequence))
            lastSent = sequence
            phase = .ring(RingCursor(next: index, position: sequence, isLive: true, filter: filter))
        case .future(let index, let newest):
            var oldest: Int64?
            do {
                oldest = try hub.storeBounds(through: newest).oldestKept
            } catch {
                hub.logger.error("cannot read the oldest record kept", ["error": error.message])
            }
            output.append(Self.notice("reset", id: newest, ["lastEventId": lastSent, "newest": newest, "oldest": oldest]))
            lastSent = newest
            phase = .ring(RingCursor(next: index, position: newest, isLive: true, filter: filter))
        case .ahead(let index):
            phase = .ring(RingCursor(next: index, position: lastSent, isLive: true, filter: filter))
        case .ring(let index):
            phase = .ring(RingCursor(next: index, position: lastSent, isLive: false, filter: filter))
        case .store:
            phase = .replaying(after: lastSent)
        }
    }

    /// One replay step: a page from the store, or the switch to the ring once it covers `after`.
    private mutating func replay(after: Int64, hub: StreamHub) {
        switch hub.replaySource(after: after) {
        case .ring(let index):
            phase = .ring(RingCursor(next: index, position: after, isLive: false, filter: filter))
        case .store(let through):
            let page: ReplayPage
            do {
                page = try hub.store.replay(
                    after: after, through: through, filter: filter, limit: PageLimit(records: hub.settings.replayPageSize, bytes: hub.settings.pageBytes)
                )
            } catch {
                // The stream ends; the client reconnects with its last event id and tries again.
                hub.logger.error("stream replay failed", ["after": String(after), "error": error.message])
                phase = .closing
                return
            }
            if page.droppedThrough > after, page.droppedThrough > reportedFloor {
                reportedFloor = page.droppedThrough
                output.append(Self.notice("gap", id: nil, [
                    "lastEventId": after, "droppedThrough": page.droppedThrough, "oldest": page.oldestKept, "newest": through,
                ]))
            }
            for record in page.records {
                output.append(ServerSentEvents.event(id: record.sequence, type: record.kind.streamEventType, data: record.json))
                lastSent = record.sequence
            }
            phase = .replaying(after: page.coveredThrough)
        }
    }

    /// Copies whole frames, then as much of the last as fits; the rest of it is queued.
    private mutating func copy(_ frames: [[UInt8]], into buffer: UnsafeMutableRawBufferPointer, at start: Int) -> Int {
        var offset = start
        for frame in frames {
            let count = min(frame.count, buffer.count - offset)
            frame.withUnsafeBytes { bytes in
                UnsafeMutableRawBufferPointer(rebasing: buffer[offset..<(offset + count)]).copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[..<count]))
            }
            offset += count
            if count < frame.count { output.append(frame[count...]) }
        }
        return offset - start
    }

    /// A notice: an event whose data is a JSON object of sequence numbers (`null` when unknown).
    private static func notice(_ type: String, id: Int64?, _ fields: KeyValuePairs<String, Int64?>) -> [UInt8] {
        var json = JSONBuffer(capacity: 96)
        json.byte(UInt8(ascii: "{"))
        for (index, (key, value)) in fields.enumerated() {
            if index > 0 { json.byte(UInt8(ascii: ",")) }
            json.key(key)
            if let value { json.integer(value) } else { json.raw("null") }
        }
        json.byte(UInt8(ascii: "}"))
        return ServerSentEvents.event(id: id, type: type, data: json.bytes)
    }
}

/// Bytes queued for a connection, written from the front.
struct OutputBytes {
    private var bytes: [UInt8] = []
    private var offset = 0

    var isEmpty: Bool { offset == bytes.count }

    mutating func append(_ more: [UInt8]) {
        bytes += more
    }

    mutating func append(_ more: ArraySlice<UInt8>) {
        bytes += more
    }

    /// Copies what fits into `buffer` from `start` on; returns how many bytes it copied.
    mutating func drain(into buffer: UnsafeMutableRawBufferPointer, at start: Int) -> Int {
        let count = min(bytes.count - offset, buffer.count - start)
        guard count > 0 else { return 0 }
        bytes.withUnsafeBytes { source in
            UnsafeMutableRawBufferPointer(rebasing: buffer[start..<(start + count)])
                .copyMemory(from: UnsafeRawBufferPointer(rebasing: source[offset..<(offset + count)]))
        }
        offset += count
        if offset == bytes.count {
            // Empty: give the memory back; an idle subscription holds none.
            bytes = []
            offset = 0
        }
        return count
    }
}
