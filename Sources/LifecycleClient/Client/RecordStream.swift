import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LifecycleKit
import LifecycleLocks

/// An instance's creation or deletion, as streams carry it (openapi `InstanceChange`).
public struct InstanceChange: Sendable, Equatable, Decodable {
    /// Numbered in the same sequence as records.
    public var sequence: Int64
    public var instance: String
    /// 0 at creation; the last version at deletion.
    public var version: Int64
    /// `created` or `deleted`.
    public var kind: String
    public var model: String
    public var state: String
    public var time: Date
}

/// Records after the stream's position were dropped by retention before it could replay
/// them (openapi `StreamGap`).
public struct StreamGap: Sendable, Equatable, Decodable {
    /// Where the stream resumed from.
    public var lastEventId: Int64
    /// The largest sequence number dropped.
    public var droppedThrough: Int64
    /// The oldest sequence number still kept.
    public var oldest: Int64?
    public var newest: Int64
}

/// Why a stream is not connected for now, and when it tries again.
public struct StreamInterruption: Sendable, Equatable {
    /// What happened: the service ended the stream, could not be reached, or answered 429 or 5xx.
    public var reason: String
    /// Seconds the stream waits before the next attempt, counted from the next call for an event.
    public var retryIn: TimeInterval
    /// 1 for the first interruption since the stream last yielded an event or stayed connected
    /// for ``RecordStream/steadyConnection``, then 2, 3, ...
    public var attempt: Int
}

/// The stream's position was ahead of the service's newest record (another server, or a
/// restored database); it goes on from `newest` (openapi `StreamReset`).
public struct StreamReset: Sendable, Equatable, Decodable {
    public var lastEventId: Int64
    public var newest: Int64
    public var oldest: Int64?
}

/// Which records a stream carries; the filters combine.
public struct RecordFilter: Sendable, Equatable {
    /// Only records of these instances (all when empty).
    public var instances: [String]
    /// Only records of instances of this model.
    public var model: String?
    /// Only records with these outcomes (creations and deletions, which have none, are left out).
    public var outcomes: [Outcome]
    /// Only records whose app report differs from the model.
    public var divergent: Bool

    public init(instances: [String] = [], model: String? = nil, outcomes: [Outcome] = [], divergent: Bool = false) {
        self.instances = instances
        self.model = model
        self.outcomes = outcomes
        self.divergent = divergent
    }
}

/// A live stream of records (`GET /v1/stream` or `GET /v1/instances/{id}/stream`) that
/// outlives connections: when one drops, or the service restarts, or the stream overflows,
/// it reconnects by itself with `Last-Event-ID` and goes on after the last event it yielded.
///
/// It never yields a record twice, nor one older than the last it yielded: sequence numbers
/// only go up (a ``Event/reset(_:)`` is the one exception, and says so). Between
/// attempts it waits the service's `retry:` (2 s), doubling after each failed attempt up to
/// `maxRetryDelay`, or a 429/503's `Retry-After`, and yields an ``Event/interrupted(_:)``
/// before each wait, so that a reader can say the service is out of reach rather than fall
/// silent (not after an overflow, whose reconnection is routine). A refusal that waiting
/// cannot cure (a filter naming no model, an absent instance, a wrong token) throws; so does
/// cancelling the task that reads it, as `CancellationError`.
public struct RecordStream: AsyncSequence, Sendable {
    public typealias Element = Event

    /// Seconds a connection must stay open, if it yields nothing, to end an outage: one that
    /// the service answers and ends at once (stopping, or failing to replay) continues it.
    public static let steadyConnection: TimeInterval = 30

    let client: LifecycleClient
    let path: String
    let query: [URLQueryItem]
    let after: Int64?
    let maxRetryDelay: TimeInterval

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(stream: self)
    }

    /// Reads the stream, connecting again whenever a connection ends.
    public struct AsyncIterator: AsyncIteratorProtocol {
        let stream: RecordStream
        private var parser: ServerSentEventParser
        private var connection: StreamConnection?
        private var pending: [ServerSentEvent] = []
        /// The sequence number of the last record or change yielded: nothing at or below it is yielded again.
        private var last: Int64?
        /// Attempts that failed since the stream last yielded an event or a connection held steady.
        private var failures = 0
        /// When the open connection was made, in seconds of `systemUptime`: monotonic, and on iOS 15
        /// (ContinuousClock needs iOS 16).
        private var connectedAt: TimeInterval?
        /// What the next wait is, when the service said (Retry-After).
        private var retryAfter: TimeInterval?
        /// How long to wait before connecting again, once the interruption was yielded.
        private var wait: TimeInterval?
        /// Whether the service said the stream overflowed: the end that follows is no outage.
        private var overflowed = false

        init(stream: RecordStream) {
            self.stream = stream
            last = stream.after
            parser = ServerSentEventParser(lastEventID: stream.after.map { String($0) })
        }

        public mutating func next() async throws -> Event? {
            while true {
                try Task.checkCancellation()
                if let event = pending.first {
                    pending.removeFirst()
                    if let yielded = try take(event) {
                        failures = 0
                        return yielded
                    }
                    continue
                }
                guard let connection else {
                    if let wait {
                        self.wait = nil
                        try await Task.sleep(nanoseconds: UInt64(wait.asWait * 1_000_000_000))
                    }
                    if let interruption = try await connect() { return .interrupted(interruption) }
                    continue
                }
                switch await connection.next() {
                case .data(let bytes):
                    pending = parser.feed(bytes)
                case .ended:
                    self.connection = nil
                    if let connectedAt, ProcessInfo.processInfo.systemUptime - connectedAt >= RecordStream.steadyConnection { failures = 0 }
                    // Cancelling the reader ends the connection too: that is no interruption.
                    try Task.checkCancellation()
                    guard !overflowed else {
                        // The reader fell behind and reconnects after the stream's retry, as the service asks.
                        overflowed = false
                        wait = retryDelay
                        continue
                    }
                    return .interrupted(interruption("the service ended the stream"))
                }
            }
        }

        /// Opens a connection that answered 200 (`nil`), or says why not for now; throws a refusal waiting cannot cure.
        private mutating func connect() async throws -> StreamInterruption? {
            var request = APIRequest("GET", stream.path, query: stream.query)
            if let id = parser.lastEventID { request.headers["Last-Event-ID"] = id }
            let urlRequest = try stream.client.urlRequest(for: request, accept: "text/event-stream")
            let opened = StreamConnection(request: urlRequest, timeout: stream.client.configuration.timeout)
            let response = await opened.response()
            // A cancelled reader's request ends unanswered: that is no interruption either.
            try Task.checkCancellation()
            switch response {
            case .open:
                parser.reset()
                connection = opened
                connectedAt = ProcessInfo.processInfo.systemUptime
                return nil
            case .refused(let response):
                let error = LifecycleClient.failure(response)
                guard [429, 502, 503, 504].contains(response.status) else { throw error }
                retryAfter = response.retryAfter
                return interruption("the service answered \(error.problem.map { "\($0)" } ?? String(response.status))")
            case .unreachable(let reason):
                return interruption("cannot reach the service: \(reason)")
            }
        }

        /// The service's `retry:` (2 s until it sends one), in seconds.
        private var retryDelay: TimeInterval { Swift.min(stream.maxRetryDelay, Double(parser.retry ?? 2000) / 1000).asWait }

        /// The interruption to yield, and the wait after it: Retry-After if given, else the stream's retry doubled per failure, capped.
        private mutating func interruption(_ reason: String) -> StreamInterruption {
            let delay = (retryAfter ?? Swift.min(stream.maxRetryDelay, retryDelay * pow(2, Double(Swift.min(failures, 16))))).asWait
            retryAfter = nil
            failures += 1
            wait = delay
            return StreamInterruption(reason: reason, retryIn: delay, attempt: failures)
        }

        /// The event to yield for `event`, or `nil` to pass over it (a heartbeat-less notice, a duplicate).
        private mutating func take(_ event: ServerSentEvent) throws -> Event? {
            let data = Data(event.data.utf8)
            func decode<T: Decodable>(_ type: T.Type) throws -> T {
                do {
                    return try LifecycleClient.decoder.decode(type, from: data)
                } catch {
                    throw LifecycleClientError.badResponse("stream event \(event.type) is not a \(type): \(error)")
                }
            }
            let yielded: Event
            switch event.type {
            case "created": yielded = .created(try decode(InstanceChange.self))
            case "deleted": yielded = .deleted(try decode(InstanceChange.self))
            case "reset":
                let reset = try decode(StreamReset.self)
                last = reset.newest
                return .reset(reset)
            case "overflow":
                // The service closes the stream next; the reconnection replays the rest.
                overflowed = true
                return nil
            case "gap" where event.data.contains("\"droppedThrough\""):
                return .gap(try decode(StreamGap.self))
            default:
                yielded = .record(try decode(Record.self))
            }
            guard let sequence = yielded.sequence else { return yielded }
            if let last, sequence <= last { return nil }
            last = sequence
            return yielded
        }
    }
}

extension LifecycleClient {
    /// Every instance's records as they are committed (`GET /v1/stream`), filtered, after
    /// sequence `after` (`nil`: from now on). See ``RecordStream`` for how it resumes.
    public func records(filter: RecordFilter = RecordFilter(), after: Int64? = nil, maxRetryDelay: TimeInterval = 30) -> RecordStream {
        var query: [URLQueryItem] = filter.instances.map { URLQueryItem(name: "instance", value: $0) }
        if let model = filter.model { query.append(URLQueryItem(name: "model", value: model)) }
        query += filter.outcomes.map { URLQueryItem(name: "outcome", value: $0.rawValue) }
        if filter.divergent { query.append(URLQueryItem(name: "divergent", value: "true")) }
        return RecordStream(client: self, path: "/v1/stream", query: query, after: after, maxRetryDelay: maxRetryDelay)
    }

    /// The records of instance `id` as they are committed (`GET /v1/instances/{id}/stream`),
    /// only the divergent ones when `divergent`, after sequence `after` (`nil`: from now on).
    /// An instance that does not exist throws its 404 problem.
    public func records(of id: String, divergent: Bool = false, after: Int64? = nil, maxRetryDelay: TimeInterval = 30) -> RecordStream {
        let query = divergent ? [URLQueryItem(name: "divergent", value: "true")] : []
        return RecordStream(client: self, path: "/v1/instances/\(Self.segment(id))/stream", query: query, after: after, maxRetryDelay: maxRetryDelay)
    }
}

extension RecordStream {
    /// What a record stream yields, in sequence order.
    public enum Event: Sendable, Equatable {
        /// A record: an event's (any outcome), an action's, a relaunch's, and any other kind.
        case record(Record)
        /// An instance was created.
        case created(InstanceChange)
        /// An instance was deleted.
        case deleted(InstanceChange)
        /// Records were dropped by retention before the stream could replay them.
        case gap(StreamGap)
        /// The service's numbering restarted below the stream's position; the stream goes on from its newest.
        case reset(StreamReset)
        /// The connection ended or could not be made; the stream connects again after `retryIn`.
        case interrupted(StreamInterruption)

        /// The record, when this is one.
        public var record: Record? {
            if case .record(let record) = self { record } else { nil }
        }

        /// The sequence number this event moves the stream to (`nil` for a gap notice or an interruption).
        public var sequence: Int64? {
            switch self {
            case .record(let record): record.sequence
            case .created(let change), .deleted(let change): change.sequence
            case .gap, .interrupted: nil
            case .reset(let reset): reset.newest
            }
        }
    }
}

/// One streaming request: the body's bytes as they arrive. On Linux `http://` goes through a
/// ``StreamSocket`` (a thread blocked in `read`, idle at no cost); `https://`, and every
/// request on Apple platforms, through a
/// `URLSessionDataDelegate` (FoundationNetworking has no `bytes(for:)`; its delegate is handed
/// each chunk as libcurl receives it, so events are not held back until the answer ends, but
/// on Linux it polls while the stream is idle: see ``StreamSocket``). Owned by one iterator:
/// when it is dropped, the request is cancelled.
final class StreamConnection {
    /// How the request was answered.
    enum Opening: Sendable {
        case open
        case refused(APIResponse)
        case unreachable(String)
    }

    /// What the body gave next.
    enum Chunk: Sendable {
        case data(Data)
        case ended
    }

    private let cancel: @Sendable () -> Void
    private var messages: AsyncStream<StreamMessage>.Iterator

    init(request: URLRequest, timeout: TimeInterval) {
        let (stream, continuation) = AsyncStream.makeStream(of: StreamMessage.self)
        messages = stream.makeAsyncIterator()
        #if canImport(Glibc)
        // Linux only: the polling is FoundationNetworking's; Apple's URLSession idles.
        if let url = request.url, url.scheme?.lowercased() == "http" {
            let socket = StreamSocket(url: url, request: request, timeout: timeout, continuation: continuation)
            cancel = { socket.cancel() }
            return
        }
        #endif
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = timeout
        // A stream has no end to wait for (FoundationNetworking cannot take `.infinity`).
        configuration.timeoutIntervalForResource = 365 * 86_400
        // The session holds its delegate until its one task ends (finishTasksAndInvalidate).
        let session = URLSession(configuration: configuration, delegate: StreamDelegate(continuation), delegateQueue: nil)
        let task = session.dataTask(with: request)
        task.resume()
        session.finishTasksAndInvalidate()
        cancel = { task.cancel() }
    }

    deinit { cancel() }

    /// Waits for the status: 200 opens the stream; another status is read to its end.
    func response() async -> Opening {
        guard let first = await messages.next() else { return .unreachable("cancelled") }
        switch first {
        case .opened(200, _):
            return .open
        case .opened(let status, let headers):
            var body = Data()
            while case .data(let data) = await messages.next() { body.append(data) }
            return .refused(APIResponse(status: status, headers: headers, body: body))
        case .data:
            return .unreachable("body before the answer's head")
        case .finished(let error):
            return .unreachable(error ?? "closed before answering")
        }
    }

    /// The next bytes of an open stream.
    func next() async -> Chunk {
        if case .data(let data) = await messages.next() { .data(data) } else { .ended }
    }
}

/// Hands a streaming task's answer to its ``StreamConnection`` as messages.
private final class StreamDelegate: NSObject, URLSessionDataDelegate, Sendable {
    private let continuation: AsyncStream<StreamMessage>.Continuation
    private let isOpened = LockedValue(false)

    init(_ continuation: AsyncStream<StreamMessage>.Continuation) {
        self.continuation = continuation
    }

    /// Sends the head once, before the first bytes (or the end of an answer without any).
    private func open(_ task: URLSessionTask) {
        guard !isOpened.withLock({ opened in defer { opened = true }; return opened }), let http = task.response as? HTTPURLResponse else { return }
        var headers: [String: String] = [:]
        for (name, value) in http.allHeaderFields {
            if let name = name as? String, let value = value as? String { headers[name] = value }
        }
        continuation.yield(.opened(status: http.statusCode, headers: headers))
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        open(dataTask)
        continuation.yield(.data(data))
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        if error == nil { open(task) }
        // The error's own sentence ("Couldn't connect to server"), not its domain, code and user info.
        continuation.yield(.finished(error?.localizedDescription))
        continuation.finish()
    }
}
