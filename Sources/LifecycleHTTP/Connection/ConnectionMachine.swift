/// What a request looks like when its headers have all arrived.
struct RequestHead {
    var method: String
    /// `HTTP/1.1` or `HTTP/1.0`.
    var version: String
    /// Lowercased names, in arrival order.
    var headers: [(name: String, value: String)]
    /// Bytes of the request line and header fields.
    var headerSize: Int
}

/// Limits a connection's requests are held to.
struct RequestLimits: Sendable {
    var maxBodySize: Int
    /// Paths whose bodies may be larger (or must be smaller) than `maxBodySize`, with their limit.
    var maxBodySizeByPath: [String: Int] = [:]
    /// Longest request target (414 past it).
    var maxTargetSize: Int
    /// Largest header block, request line included (431 past it).
    var maxHeaderSize: Int
    /// Nanoseconds a whole request (headers and body) may take to arrive, counted from
    /// the moment the connection is ready for it: accepted, or the previous response sent.
    var requestTimeout: UInt64

    /// The largest body a request to `path` may have.
    func maxBodySize(for path: String) -> Int {
        maxBodySizeByPath.isEmpty ? maxBodySize : maxBodySizeByPath[path] ?? maxBodySize
    }
}

/// One connection's progress through its requests, from libmicrohttpd's callbacks:
/// the request line, the headers, the body, the end of the request, the handler's reply
/// (maybe from another thread), a streamed body's hand-over to the server's stream writer and
/// back, the completion, the request deadline checked by the server's sweeper, and the server stopping. Each input is
/// one mutating function returning what the caller must do; the caller holds the
/// connection's lock around each call, and does the I/O.
///
/// Suspending and resuming the connection are done under that lock, as the state changes:
/// so a resume only ever follows the suspend it undoes, and none can come once the
/// connection has left the suspended states (it completed, or the server gave up on it
/// before stopping libmicrohttpd).
///
/// A request is counted in the server's requests in flight (which `stop()` drains)
/// from `receivedHeaders` admitting it to `completed`, or to a deadline cut, or to the
/// server giving up on it. A streamed response counts as its request until it ends.
struct ConnectionMachine {
    private enum State {
        /// Before the request line: accepted, or after the previous response. The request
        /// deadline runs from `since`.
        case awaitingRequest(since: UInt64)
        /// The request line is in (its target parsed); the headers are arriving.
        case receivingHead(since: UInt64, Target)
        /// Headers accepted, body arriving. Counted.
        case reading(since: UInt64, Request)
        /// The body is not wanted (it outgrew the limit: 413; or the target was refused: 400):
        /// the rest is drained unread, then this response is sent. Counted.
        case discarding(since: UInt64, Answer)
        /// The whole request is with the handler, on the daemon thread. Counted.
        case handling
        /// The handler answers later; the connection is suspended. Counted. The request is
        /// kept for the middlewares to finish its answer on the connection's thread.
        case suspended(Request)
        /// The later answer arrived; it is finished and queued when the resumed connection calls back. Counted.
        case replied(Request, Response)
        /// A response is queued. Counted.
        case answered
        /// A stream is the response; libmicrohttpd is sending its head and then calls its
        /// reader, which hands the body to the stream writer. Counted until completed, as are
        /// the other stream states; never cut by the request deadline (the request is complete).
        case streaming
        /// The connection is suspended and the server's ``StreamWriter`` writes the body to the
        /// socket, until it hands the connection back (resuming it) or the server gives up on it.
        case streamOwned
        /// The body ends cleanly at the reader's next call (the stream ended, or the server is stopping).
        case streamEnding
        /// The body ends abruptly at the reader's next call: the peer is gone, or a send failed.
        case streamFailing
        /// Refused while the server stops (503): answered, not counted.
        case rejected
        /// Given up: the deadline passed before the request arrived (the socket is shut
        /// down), or the server stopped waiting for the connection before stopping
        /// libmicrohttpd. Every later callback closes it; it is never suspended again. Not counted.
        case abandoned
        /// Only while a payload is being changed in place (so its buffer is not copied).
        case modifying
    }

    /// What a discarded request is answered.
    private enum Answer {
        /// The server's own refusal of the request, which the middlewares have not yet seen.
        case refusal(Request, Response)
        /// A middleware's refusal, already through the middlewares.
        case final(Response)
    }

    /// A request line's target, parsed as it arrives (libmicrohttpd changes it afterwards).
    private enum Target {
        case parsed(RequestTarget)
        /// Refused, but the request can be read to its end and the connection kept.
        case refused(Problem)
        /// Refused, and the connection closed.
        case tooLong(Problem)
    }

    private var state: State
    /// Whether a stream's body is chunked: libmicrohttpd chunks a body of unknown length for
    /// every client but an HTTP/1.0 one, whose body the connection's close ends.
    private var isChunked = true
    /// The last `Host` value parsed on this connection: a client that keeps a connection
    /// names the same host in each request, so it is parsed once.
    private var lastHost: (value: String, name: HostName)?
    let limits: RequestLimits
    /// The peer's address.
    let clientAddress: String
    /// Whose `X-Forwarded-For` names the client of a request, in place of the peer.
    let proxies: TrustedProxies

    init(clientAddress: String, limits: RequestLimits, proxies: TrustedProxies = TrustedProxies(), now: UInt64) {
        self.clientAddress = clientAddress
        self.limits = limits
        self.proxies = proxies
        state = .awaitingRequest(since: now)
    }

    // MARK: inputs

    /// The request line is parsed (libmicrohttpd's URI callback); `target` is its raw target.
    mutating func receivedRequestLine(target: UnsafeBufferPointer<UInt8>) {
        guard case .awaitingRequest(let since) = state else { return }
        if target.count > limits.maxTargetSize {
            let problem = Problem(status: 414, title: "URI Too Long", detail: "the request target is longer than \(limits.maxTargetSize) bytes")
            state = .receivingHead(since: since, .tooLong(problem))
            return
        }
        do {
            state = .receivingHead(since: since, .parsed(try RequestTarget(target)))
        } catch {
            state = .receivingHead(since: since, .refused(error))
        }
    }

    /// What to do once the headers are in.
    enum HeadersAction {
        /// Read the body (or go on to the end of the request).
        case readBody
        /// Queue this at once; libmicrohttpd then closes the connection, dropping any body unread.
        case respond(Response)
        /// As `respond`, for the server's own refusal: let the middlewares see it first
        /// (``Pipeline/refuse(_:with:)``).
        case refuse(Request, Response)
        /// The connection was cut meanwhile: give up on it (return `MHD_NO`).
        case close
    }

    /// All headers are in (the first call of the access handler). `admit` counts the
    /// request in the server's requests in flight, or refuses it while the server stops;
    /// it is called only for a request this connection still wants. `screen` sees the
    /// request (routing it) before any body is read, and may refuse it (see
    /// ``Pipeline/admit(_:)``): a refused request without a body is answered at its end and
    /// the connection kept; one with a body is answered at once and the connection closed,
    /// so the body is never read.
    mutating func receivedHeaders(
        _ head: RequestHead, admit: () -> Bool, screen: (inout Request) -> Response? = { _ in nil }
    ) -> HeadersAction {
        let since: UInt64
        let target: Target
        // Taken, so that the parsed target moves out rather than being copied; every way on
        // sets the state again.
        let current = takeState()
        switch current {
        case .receivingHead(let started, let parsed):
            since = started
            target = parsed
        case .awaitingRequest(let started):
            since = started
            target = .refused(Problem(status: 400, title: "Bad Request", detail: "the request has no target"))
        default:
            state = current
            return .close
        }
        isChunked = head.version != "HTTP/1.0"
        let fields = Self.fields(head.headers)
        let client = proxies.isEmpty
            ? clientAddress : proxies.client(peer: clientAddress, forwardedFor: fields.filter { $0.name == "x-forwarded-for" }.map(\.value))
        // As much of the request as is known, for the middlewares to see a refusal of it.
        let path = if case .parsed(let parsed) = target { parsed.path } else { "" }
        var refused: Request { Request(method: head.method, path: path, headers: fields, clientAddress: client) }
        guard admit() else {
            state = .rejected
            return .refuse(refused, Self.closing(Problem(status: 503, title: "Service Unavailable", detail: "the server is stopping; nothing was changed")))
        }
        var host: HostName?
        if let problem = headProblem(head, fields: fields, path: path, host: &host) {
            state = .answered
            return .refuse(refused, Self.closing(problem))
        }
        switch target {
        case .parsed(let parsed):
            var request = Request(method: head.method, path: parsed.path, headers: fields, query: parsed.query, clientAddress: client)
            request.parsedHost = host
            let length = head.headers.first(where: { $0.name == "content-length" }).flatMap { Int($0.value) } ?? 0
            if let refusal = screen(&request) {
                // Framing was checked above: no Transfer-Encoding and no Content-Length means no body.
                guard request.hasBody else {
                    state = .discarding(since: since, .final(refusal))
                    return .readBody
                }
                state = .answered
                var closing = refusal
                closing.headers.append(("Connection", "close"))
                return .respond(closing)
            }
            // A Content-Length is only a claim until the bytes come: at most 1 MiB is reserved on it.
            if length > 0 { request.body.reserveCapacity(min(length, 1 << 20)) }
            state = .reading(since: since, request)
        case .refused(let problem):
            // The framing is sound, so the body is drained and the connection kept.
            state = .discarding(since: since, .refusal(refused, .problem(problem)))
        case .tooLong(let problem):
            state = .answered
            return .refuse(refused, Self.closing(problem))
        }
        return .readBody
    }

    /// A piece of the body arrived.
    mutating func receivedBody(_ bytes: UnsafeRawBufferPointer) {
        guard case .reading(let since, var request) = state else { return }
        state = .modifying
        let maxBodySize = limits.maxBodySize(for: request.path)
        if request.body.count + bytes.count > maxBodySize {
            request.body = []
            state = .discarding(since: since, .refusal(request, Self.closing(Problem(
                status: 413, title: "Content Too Large",
                detail: "request body is larger than the limit of \(maxBodySize) bytes"
            ))))
        } else {
            request.body.append(contentsOf: bytes)
            state = .reading(since: since, request)
        }
    }

    /// What to do when the access handler is called with no data after the headers.
    enum EndAction {
        /// Run the handler on this request.
        case handle(Request)
        /// Queue this response.
        case respond(Response)
        /// Queue this later answer to this request, once the middlewares have finished it
        /// (``Pipeline/finish(_:_:)``).
        case finish(Request, Response)
        /// Queue this refusal of the server's own, once the middlewares have seen it.
        case refuse(Request, Response)
        /// Nothing to do yet.
        case wait
        /// Give up on the connection (return `MHD_NO`).
        case close
    }

    /// The access handler was called with no data: the request has fully arrived, or a
    /// suspended connection was resumed. `isStopping` tells whether the server is stopping,
    /// which a stream queued now must know (asked only then).
    mutating func receivedEnd(isStopping: () -> Bool) -> EndAction {
        // Taken, so that the request or response moves out rather than being copied.
        let current = takeState()
        switch current {
        case .reading(_, let request):
            state = .handling
            return .handle(request)
        case .discarding(_, .final(let response)):
            state = .answered
            return .respond(response)
        case .discarding(_, .refusal(let request, let response)):
            state = .answered
            return .refuse(request, response)
        case .replied(let request, let response):
            answer(response, isStopping: isStopping)
            return .finish(request, response)
        case .handling, .suspended, .answered, .rejected:
            state = current
            return .wait
        case .streaming, .streamOwned, .streamEnding, .streamFailing, .abandoned, .awaitingRequest, .receivingHead, .modifying:
            state = current
            return .close
        }
    }

    /// The state, leaving ``State/modifying`` in its place until the caller sets it.
    private mutating func takeState() -> State {
        var taken = State.modifying
        swap(&taken, &state)
        return taken
    }

    /// What to do when the handler answers later.
    enum DeferAction {
        /// Suspend the connection (under the lock), then start the work.
        case suspend
        /// The server gave up on the connection meanwhile: do not start the work, close.
        case close
    }

    /// The handler answers later; its answer to `request` is finished when it comes.
    mutating func handlerDeferred(finishing request: Request) -> DeferAction {
        switch state {
        case .handling:
            state = .suspended(request)
            return .suspend
        case .abandoned:
            return .close
        default:
            preconditionFailure("deferred in state \(state)")
        }
    }

    /// What to do with a handler's reply.
    enum ReplyAction {
        /// Queue it now (the reply came on the daemon thread, within the access handler).
        case queue(Response)
        /// Resume the connection; the daemon then calls back and the reply is queued.
        case resume
        /// Nothing: a reply came twice (a handler bug), and the first one stands.
        case none
    }

    /// The handler replied: at once on the daemon thread, or later from any thread (then
    /// the caller resumes the connection under the lock). `isStopping` as for ``receivedEnd(isStopping:)``.
    mutating func handlerReplied(_ response: Response, isStopping: () -> Bool) -> ReplyAction {
        switch state {
        case .handling:
            answer(response, isStopping: isStopping)
            return .queue(response)
        case .suspended(let request):
            state = .replied(request, response)
            return .resume
        default:
            return .none
        }
    }

    /// A response is being queued. A stream queued while the server stops ends at its first
    /// read: the server's pass that ends streams may already have looked at this connection.
    private mutating func answer(_ response: Response, isStopping: () -> Bool) {
        switch response.body {
        case .bytes, .omitted: state = .answered
        case .stream: state = isStopping() ? .streamEnding : .streaming
        }
    }

    /// What the stream's reader (libmicrohttpd's content reader) does.
    enum StreamReadAction {
        /// The head is sent: suspend the connection (under the lock), hand the body to the
        /// stream writer, and return 0. `chunked` says how the writer frames it.
        case handOver(chunked: Bool)
        /// End the body cleanly (for HTTP/1.1, libmicrohttpd's last chunk).
        case end
        /// End the connection abruptly.
        case fail
    }

    /// libmicrohttpd asks for the stream's bytes: the first time once the head is sent, again
    /// only after the connection was resumed.
    mutating func streamWillRead() -> StreamReadAction {
        switch state {
        case .streaming:
            state = .streamOwned
            return .handOver(chunked: isChunked)
        case .streamEnding:
            return .end
        default:
            return .fail
        }
    }

    /// Whether the stream writer may write the body to the socket now: the connection is
    /// suspended and nobody has taken it back.
    var ownsStream: Bool {
        if case .streamOwned = state { return true }
        return false
    }

    /// What handing a stream's connection back means.
    enum HandBackAction {
        case none
        /// Resume the connection (under the lock); libmicrohttpd then calls the reader.
        case resume
    }

    /// The stream writer is done with the body: it ended (`clean`), or the peer is gone or a
    /// send failed. The connection is resumed once; the reader then ends the body.
    mutating func streamHandedBack(clean: Bool) -> HandBackAction {
        guard case .streamOwned = state else { return .none }
        state = clean ? .streamEnding : .streamFailing
        return .resume
    }

    /// What ending a connection's stream requires when the server stops.
    enum StopAction {
        /// No stream, or already ending.
        case none
        /// The stream ends at the reader's first call.
        case end
        /// The stream writer owns the body: it must end it (then it hands the connection back).
        case endInWriter
    }

    /// The server is stopping: a stream ends with a clean end of its body.
    mutating func serverStopping() -> StopAction {
        switch state {
        case .streaming:
            state = .streamEnding
            return .end
        case .streamOwned:
            return .endInWriter
        default:
            return .none
        }
    }

    /// What giving up on a connection requires.
    enum AbandonAction {
        case none
        /// End the counted request.
        case release
        /// Resume the suspended connection (under the lock), so none is left suspended
        /// when libmicrohttpd stops, and end the counted request.
        case resumeAndRelease
    }

    /// The server stops waiting for this connection (its drain time is over) and is about to
    /// stop libmicrohttpd, which closes it. From now on nothing suspends or resumes it.
    mutating func abandon() -> AbandonAction {
        let action: AbandonAction
        switch state {
        case .suspended, .streamOwned:
            action = .resumeAndRelease
        case .reading, .discarding, .handling, .replied, .answered, .streaming, .streamEnding, .streamFailing:
            action = .release
        case .awaitingRequest, .receivingHead, .rejected, .abandoned, .modifying:
            action = .none
        }
        state = .abandoned
        return action
    }

    /// What the completion of a request means for the server's count.
    enum CompletionAction {
        case none
        /// The request was counted: end it.
        case release
    }

    /// libmicrohttpd finished the request (response sent, or the connection failed). The
    /// next request's deadline starts now.
    mutating func completed(now: UInt64) -> CompletionAction {
        let wasCounted: Bool
        switch state {
        case .reading, .discarding, .handling, .suspended, .replied, .answered, .streaming, .streamOwned, .streamEnding, .streamFailing:
            wasCounted = true
        case .awaitingRequest, .receivingHead, .rejected, .modifying:
            wasCounted = false
        case .abandoned:
            return .none  // the connection is closing; it stays abandoned
        }
        state = .awaitingRequest(since: now)
        return wasCounted ? .release : .none
    }

    /// What to do about a connection whose request is late.
    enum DeadlineAction {
        case none
        /// No request has started to be handled: shut the socket down.
        case close
        /// Headers were in and the body is late: send this 408, shut the socket down, and
        /// end the counted request.
        case answerAndClose(Response)
    }

    /// The sweeper checks the request deadline. A request that has fully arrived is never
    /// cut: its handler, a deferred reply, or a slow reader of the response may take longer.
    mutating func deadlinePassed(now: UInt64) -> DeadlineAction {
        switch state {
        case .awaitingRequest(let since), .receivingHead(let since, _):
            guard now >= since, now - since > limits.requestTimeout else { return .none }
            state = .abandoned
            return .close
        case .reading(let since, _), .discarding(let since, _):
            guard now >= since, now - since > limits.requestTimeout else { return .none }
            state = .abandoned
            return .answerAndClose(Self.closing(Problem(
                status: 408, title: "Request Timeout",
                detail: "the request did not arrive within \(limits.requestTimeout / 1_000_000_000) seconds"
            )))
        case .handling, .suspended, .replied, .answered, .streaming, .streamOwned, .streamEnding, .streamFailing, .rejected, .abandoned, .modifying:
            return .none
        }
    }

    /// Whether the request line is in but the headers have not reached the access handler:
    /// the only state in which libmicrohttpd itself may refuse a complete header block.
    var isReceivingHead: Bool {
        if case .receivingHead = state { return true }
        return false
    }

    // MARK: rules

    /// A problem response that also closes the connection.
    static func closing(_ problem: Problem) -> Response {
        .problem(problem, headers: [("Connection", "close")])
    }

    /// Why a request to `path` must be refused, and its connection closed, from its head
    /// alone (`fields`: its header fields as ``fields(_:)`` gives them); `host` is set to what its
    /// `Host` names, once checked.
    private mutating func headProblem(_ head: RequestHead, fields: [(name: String, value: String)], path: String, host: inout HostName?) -> Problem? {
        if head.headerSize > limits.maxHeaderSize {
            return Problem(
                status: 431, title: "Request Header Fields Too Large",
                detail: "the request line and header fields are larger than \(limits.maxHeaderSize) bytes"
            )
        }
        return hostProblem(head.version, fields, host: &host) ?? Self.framingProblem(head, maxBodySize: limits.maxBodySize(for: path))
    }

    /// RFC 9112 §3.2: an HTTP/1.1 request names its host, a request names it at most once,
    /// and as `host[:port]`. (libmicrohttpd 0.9.75 only logs a missing one.) `parsed` is set
    /// to the host it names, kept for the middlewares (``Request/hostName``).
    private mutating func hostProblem(_ version: String, _ fields: [(name: String, value: String)], host parsed: inout HostName?) -> Problem? {
        var host: String?
        for (name, value) in fields where name == "host" {
            guard host == nil else { return Problem(status: 400, title: "Bad Request", detail: "the request has more than one Host header field") }
            host = value
        }
        guard let host else {
            return version == "HTTP/1.1" ? Problem(status: 400, title: "Bad Request", detail: "an HTTP/1.1 request needs a Host header field") : nil
        }
        if let last = lastHost, last.value == host {
            parsed = last.name
            return nil
        }
        parsed = HostName(host)
        if let parsed { lastHost = (host, parsed) }
        return parsed == nil ? Problem(status: 400, title: "Bad Request", detail: "Host must be host[:port]") : nil
    }

    /// The header fields as the request carries them: each value without the whitespace after it,
    /// which is not the value's (RFC 9112 §5; libmicrohttpd takes off only what comes before it).
    /// The framing checks read the values as sent, as libmicrohttpd frames the body by them.
    static func fields(_ headers: [(name: String, value: String)]) -> [(name: String, value: String)] {
        guard headers.contains(where: { $0.value.utf8.last.map(isWhitespace) == true }) else { return headers }
        return headers.map { ($0.name, String($0.value[...].trimmingOWS)) }
    }

    private static func isWhitespace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 }

    /// Message framing by RFC 9112 §6: a request whose body length is ambiguous is refused
    /// (and the connection closed), since a front end could read it differently and take
    /// the rest of the body for another request.
    static func framingProblem(_ head: RequestHead, maxBodySize: Int) -> Problem? {
        // The first length, and any others: nearly every request sends one number, so no
        // list is made (nor split) for it.
        var length: Substring?
        var otherLengths: [Substring] = []
        func found(_ value: Substring) {
            if length == nil { length = value } else { otherLengths.append(value) }
        }
        var codings: [Substring] = []
        var hasTransferEncoding = false
        for (name, value) in head.headers {
            if name == "content-length" {
                if value.utf8.contains(UInt8(ascii: ",")) {
                    for part in value.split(separator: ",", omittingEmptySubsequences: false) { found(part.trimmingOWS) }
                } else {
                    found(value[...].trimmingOWS)
                }
            } else if name == "transfer-encoding" {
                hasTransferEncoding = true
                codings.append(contentsOf: value.split(separator: ",", omittingEmptySubsequences: false).map(\.trimmingOWS))
            }
        }
        func bad(_ detail: String) -> Problem { Problem(status: 400, title: "Bad Request", detail: detail) }
        if hasTransferEncoding {
            if head.version == "HTTP/1.0" { return bad("Transfer-Encoding is not allowed in an HTTP/1.0 request") }
            for coding in codings {
                let name = coding.split(separator: ";", maxSplits: 1).first.map(\.trimmingOWS) ?? ""
                if name.isEmpty { return bad("Transfer-Encoding has an empty coding") }
                if name.lowercased() != "chunked" {
                    return Problem(status: 501, title: "Not Implemented", detail: "transfer coding \"\(name)\" is not supported; send the body with Content-Length or chunked")
                }
            }
            // libmicrohttpd reads a chunked body only when the first Transfer-Encoding is
            // exactly `chunked`; any other spelling it would read to the end of the connection.
            let first = head.headers.first { $0.name == "transfer-encoding" }?.value.lowercased()
            if codings.count != 1 || first != "chunked" { return bad("Transfer-Encoding must be chunked, once") }
            if length != nil { return bad("a request may not have both Transfer-Encoding and Content-Length") }
            return nil
        }
        guard let length else { return nil }
        func isDecimal(_ value: Substring) -> Bool { !value.isEmpty && value.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 } }
        guard isDecimal(length), otherLengths.allSatisfy(isDecimal) else { return bad("Content-Length must be a decimal number") }
        guard otherLengths.allSatisfy({ $0 == length }) else { return bad("the request has differing Content-Length values") }
        guard let size = Int(length), size <= maxBodySize else {
            return Problem(status: 413, title: "Content Too Large", detail: "request body is larger than the limit of \(maxBodySize) bytes")
        }
        return nil
    }
}
