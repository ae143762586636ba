import Foundation
import Testing
@testable import LifecycleHTTP

/// The connection state machine, driven without a socket.
@Suite("connection machine")
struct ConnectionMachineTests {
    static let second: UInt64 = 1_000_000_000
    static let limits = RequestLimits(maxBodySize: 10, maxTargetSize: 20, maxHeaderSize: 100, requestTimeout: 5 * second)

    /// A head with these fields, and `Host` unless they name it (or `host` is `nil`).
    static func head(
        _ headers: [(String, String)] = [], method: String = "POST", version: String = "HTTP/1.1", size: Int = 50, host: String? = "example.test"
    ) -> RequestHead {
        let fields = headers.contains { $0.0 == "host" } || host == nil ? headers : [("host", host!)] + headers
        return RequestHead(method: method, version: version, headers: fields.map { (name: $0.0, value: $0.1) }, headerSize: size)
    }

    static func feed(_ machine: inout ConnectionMachine, _ text: String) {
        Array(text.utf8).withUnsafeBytes { machine.receivedBody($0) }
    }

    /// A machine whose request line `target` has arrived at time 0.
    static func machine(target: String = "/items/a%2Db?x=1") -> ConnectionMachine {
        var machine = ConnectionMachine(clientAddress: "192.0.2.1", limits: limits, now: 0)
        Array(target.utf8).withUnsafeBufferPointer { machine.receivedRequestLine(target: $0) }
        return machine
    }

    static func status(_ action: ConnectionMachine.HeadersAction) -> Int? {
        switch action {
        case .respond(let response), .refuse(_, let response): response.status
        default: nil
        }
    }

    @Test("a request with a body: read, handled, answered at once, completed")
    func immediateReply() throws {
        var machine = Self.machine()
        var admitted = 0
        guard case .readBody = machine.receivedHeaders(Self.head([("content-length", "4")]), admit: { admitted += 1; return true }) else {
            Issue.record("headers refused")
            return
        }
        #expect(admitted == 1)
        Self.feed(&machine, "ab")
        Self.feed(&machine, "cd")
        guard case .handle(let request) = machine.receivedEnd(isStopping: { false }) else {
            Issue.record("not handled")
            return
        }
        #expect(request.method == "POST" && request.path == "/items/a-b" && request.body == Array("abcd".utf8))
        #expect(request.query.map(\.name) == ["x"] && request.query.map(\.value) == ["1"])
        #expect(request.clientAddress == "192.0.2.1")
        guard case .queue(let response) = machine.handlerReplied(Response(status: 204), isStopping: { false }) else {
            Issue.record("not queued")
            return
        }
        #expect(response.status == 204)
        guard case .release = machine.completed(now: 7 * Self.second) else {
            Issue.record("a counted request must be released")
            return
        }
        // The next request's deadline runs from the completion.
        guard case .none = machine.deadlinePassed(now: 11 * Self.second) else {
            Issue.record("cut before its deadline")
            return
        }
        guard case .close = machine.deadlinePassed(now: 13 * Self.second) else {
            Issue.record("not cut after its deadline")
            return
        }
    }

    @Test("a deferred reply: suspended, resumed from another thread, finished and queued on the next call")
    func deferredReply() {
        var machine = Self.machine()
        _ = machine.receivedHeaders(Self.head(method: "GET"), admit: { true })
        guard case .handle(let request) = machine.receivedEnd(isStopping: { false }) else {
            Issue.record("not handled")
            return
        }
        var prepared = request
        prepared.id = "prepared"
        guard case .suspend = machine.handlerDeferred(finishing: prepared) else {
            Issue.record("not suspended")
            return
        }
        guard case .wait = machine.receivedEnd(isStopping: { false }) else {
            Issue.record("a suspended request has nothing to queue")
            return
        }
        // However late the reply, a fully received request is never cut.
        guard case .none = machine.deadlinePassed(now: 1000 * Self.second) else {
            Issue.record("a deferred request was cut")
            return
        }
        guard case .resume = machine.handlerReplied(Response(status: 201), isStopping: { false }) else {
            Issue.record("not resumed")
            return
        }
        guard case .none = machine.handlerReplied(Response(status: 500), isStopping: { false }) else {
            Issue.record("a second reply must be ignored")
            return
        }
        guard case .finish(let finishing, let response) = machine.receivedEnd(isStopping: { false }) else {
            Issue.record("the reply was not queued")
            return
        }
        #expect(response.status == 201)
        #expect(finishing.id == "prepared")
        guard case .release = machine.completed(now: 0) else {
            Issue.record("not released")
            return
        }
    }

    @Test("a body past the limit is drained, then answered 413")
    func tooLargeBody() {
        var machine = Self.machine()
        _ = machine.receivedHeaders(Self.head([("transfer-encoding", "chunked")]), admit: { true })
        Self.feed(&machine, "123456")
        Self.feed(&machine, "123456")
        Self.feed(&machine, "123456")
        // The server's own refusal: the middlewares see it (with the request, body dropped) before it is sent.
        guard case .refuse(let request, let response) = machine.receivedEnd(isStopping: { false }) else {
            Issue.record("not answered")
            return
        }
        #expect(response.status == 413 && response.headers.contains { $0.name == "Connection" && $0.value == "close" })
        #expect(request.path == "/items/a-b" && request.body.isEmpty)
    }

    // Reserving the whole declared length up front let one head (Content-Length: 10^12,
    // under a limit an operator set huge) abort the process on the allocation.
    @Test("a declared length reserves at most 1 MiB before any byte of the body has come")
    func declaredLengthIsAClaim() {
        var limits = Self.limits
        limits.maxBodySize = Int.max
        var machine = ConnectionMachine(clientAddress: "192.0.2.1", limits: limits, now: 0)
        Array("/upload".utf8).withUnsafeBufferPointer { machine.receivedRequestLine(target: $0) }
        guard case .readBody = machine.receivedHeaders(Self.head([("content-length", "1000000000000")]), admit: { true }) else {
            Issue.record("within the limit")
            return
        }
        Self.feed(&machine, "abc")
        // (libmicrohttpd calls the end only once the declared bytes are in; here it stands for them.)
        guard case .handle(let request) = machine.receivedEnd(isStopping: { false }) else {
            Issue.record("not handled")
            return
        }
        #expect(request.body == Array("abc".utf8) && request.body.capacity <= 2 << 20, "reserved \(request.body.capacity)")
    }

    @Test("a path with a body limit of its own is held to it, declared or chunked; other paths keep the server's")
    func bodyLimitByPath() {
        var limits = Self.limits
        limits.maxBodySizeByPath = ["/big": 20]
        func machine(_ target: String) -> ConnectionMachine {
            var machine = ConnectionMachine(clientAddress: "192.0.2.1", limits: limits, now: 0)
            Array(target.utf8).withUnsafeBufferPointer { machine.receivedRequestLine(target: $0) }
            return machine
        }
        var big = machine("/big?x=1")
        guard case .readBody = big.receivedHeaders(Self.head([("content-length", "15")]), admit: { true }) else {
            Issue.record("15 bytes are within /big's limit")
            return
        }
        Self.feed(&big, "123456789012345")
        guard case .handle(let request) = big.receivedEnd(isStopping: { false }) else {
            Issue.record("not handled")
            return
        }
        #expect(request.body.count == 15)
        var declared = machine("/big")
        #expect(Self.status(declared.receivedHeaders(Self.head([("content-length", "21")]), admit: { true })) == 413)
        var other = machine("/other")
        #expect(Self.status(other.receivedHeaders(Self.head([("content-length", "15")]), admit: { true })) == 413)
        var chunked = machine("/big")
        _ = chunked.receivedHeaders(Self.head([("transfer-encoding", "chunked")]), admit: { true })
        Self.feed(&chunked, "1234567890")
        Self.feed(&chunked, "1234567890")
        Self.feed(&chunked, "1")
        guard case .refuse(_, let response) = chunked.receivedEnd(isStopping: { false }) else {
            Issue.record("not refused")
            return
        }
        #expect(response.status == 413)
    }

    @Test("a request screened out at its head, without a body: answered at its end, connection kept")
    func screenedWithoutBody() {
        var machine = Self.machine()
        var screened: Request?
        let refusal = Response.problem(Problem(status: 401, title: "Unauthorized", detail: "no token"))
        guard case .readBody = machine.receivedHeaders(Self.head(method: "GET"), admit: { true }, screen: { screened = $0; return refusal }) else {
            Issue.record("a request without a body is answered at its end")
            return
        }
        #expect(screened?.path == "/items/a-b" && screened?.query.first?.value == "1" && screened?.clientAddress == "192.0.2.1")
        guard case .respond(let response) = machine.receivedEnd(isStopping: { false }) else {
            Issue.record("not answered")
            return
        }
        #expect(response.status == 401 && !response.headers.contains { $0.name == "Connection" })
    }

    @Test("a request screened out at its head, with a body: answered at once, closing, the body never read", arguments: [
        [("content-length", "4")], [("transfer-encoding", "chunked")],
    ])
    func screenedWithBody(headers: [(String, String)]) {
        var machine = Self.machine()
        let refusal = Response.problem(Problem(status: 401, title: "Unauthorized", detail: "no token"))
        let action = machine.receivedHeaders(Self.head(headers), admit: { true }, screen: { _ in refusal })
        guard case .respond(let response) = action else {
            Issue.record("not answered at the headers: \(action)")
            return
        }
        #expect(response.status == 401 && response.headers.contains { $0.name == "Connection" && $0.value == "close" })
        Self.feed(&machine, "abcd")
        guard case .wait = machine.receivedEnd(isStopping: { false }) else {
            Issue.record("a body after the refusal must not reach a handler")
            return
        }
    }

    @Test("refusals at the headers", arguments: [
        (head(), "/ok", false, 503),
        (head(), "/" + String(repeating: "a", count: 30), true, 414),
        (head(size: 101), "/ok", true, 431),
        (head([("content-length", "11")]), "/ok", true, 413),
        (head([("content-length", "2"), ("content-length", "3")]), "/ok", true, 400),
        (head([("content-length", "2, 3")]), "/ok", true, 400),
        (head([("content-length", " 2,2 , x")]), "/ok", true, 400),
        (head([("content-length", " \t ")]), "/ok", true, 400),
        (head([("content-length", "2,")]), "/ok", true, 400),
        (head([("content-length", "2 2")]), "/ok", true, 400),
        (head([("transfer-encoding", "chunked"), ("content-length", "3")]), "/ok", true, 400),
        (head([("transfer-encoding", "br")]), "/ok", true, 501),
        (head([("transfer-encoding", "chunked")], version: "HTTP/1.0"), "/ok", true, 400),
        (head(method: "GET", host: nil), "/ok", true, 400),
        (head([("host", "a.test"), ("host", "b.test")], method: "GET"), "/ok", true, 400),
        (head(method: "GET", host: "a b"), "/ok", true, 400),
        (head(method: "GET", host: "[::1"), "/ok", true, 400),
    ])
    func refusals(head: RequestHead, target: String, isAdmitted: Bool, status: Int) {
        var machine = Self.machine(target: target)
        let action = machine.receivedHeaders(head, admit: { isAdmitted })
        #expect(Self.status(action) == status)
        // Counted (admitted) refusals are released at completion; a 503 was never counted.
        if case .release = machine.completed(now: 0) {
            #expect(isAdmitted)
        } else {
            #expect(!isAdmitted)
        }
    }

    @Test("each request's Host is checked and named on its own, on a kept connection")
    func hostPerRequest() {
        var machine = Self.machine(target: "/ok")
        for (host, named) in [("A.test", "a.test"), ("A.test", "a.test"), ("b.test:8080", "b.test"), ("a b", nil), ("A.test", "a.test")] {
            let action = machine.receivedHeaders(Self.head(method: "GET", host: host), admit: { true })
            if let named {
                guard case .handle(let request) = machine.receivedEnd(isStopping: { false }) else {
                    Issue.record("\(host) not handled")
                    return
                }
                #expect(request.hostName?.name == named)
                _ = machine.handlerReplied(Response(status: 204), isStopping: { false })
            } else {
                #expect(Self.status(action) == 400)
            }
            _ = machine.completed(now: 0)
            Array("/ok".utf8).withUnsafeBufferPointer { machine.receivedRequestLine(target: $0) }
        }
    }

    @Test("a Content-Length list of one number, said twice, reads that many bytes")
    func repeatedLength() {
        var machine = Self.machine(target: "/ok")
        // Spaces and tabs around each value are not part of it (RFC 9110 §5.5).
        guard case .readBody = machine.receivedHeaders(Self.head([("content-length", "\t2 ,  2\t")]), admit: { true }) else {
            Issue.record("refused")
            return
        }
        Self.feed(&machine, "ab")
        guard case .handle(let request) = machine.receivedEnd(isStopping: { false }) else {
            Issue.record("not handled")
            return
        }
        #expect(request.body == Array("ab".utf8))
    }

    @Test("a bad target: the body is drained, then 400, keeping the connection", arguments: ["/a%00b", "/a/../b", "/caf%C3%A9", ""])
    func badTarget(target: String) {
        var machine = Self.machine(target: target)
        guard case .readBody = machine.receivedHeaders(Self.head([("content-length", "4")]), admit: { true }) else {
            Issue.record("the body must be drained")
            return
        }
        Self.feed(&machine, "abcd")
        guard case .refuse(_, let response) = machine.receivedEnd(isStopping: { false }) else {
            Issue.record("not answered")
            return
        }
        #expect(response.status == 400 && !response.headers.contains { $0.name == "Connection" })
        guard case .release = machine.completed(now: 0) else {
            Issue.record("not released")
            return
        }
    }

    @Test("a late request: cut before its headers silently, after them with 408 and a release")
    func deadlines() {
        var waiting = ConnectionMachine(clientAddress: "", limits: Self.limits, now: 0)
        guard case .close = waiting.deadlinePassed(now: 6 * Self.second) else {
            Issue.record("an idle connection must be closed")
            return
        }
        // Once cut, the connection is given up whatever libmicrohttpd still delivers.
        guard case .close = waiting.receivedHeaders(Self.head(), admit: { Issue.record("admitted after the cut"); return true }) else {
            Issue.record("a cut connection took a request")
            return
        }

        var reading = Self.machine()
        _ = reading.receivedHeaders(Self.head([("content-length", "5")]), admit: { true })
        Self.feed(&reading, "12")
        guard case .answerAndClose(let response) = reading.deadlinePassed(now: 6 * Self.second) else {
            Issue.record("a late body must be answered 408")
            return
        }
        #expect(response.status == 408)
        guard case .close = reading.receivedEnd(isStopping: { false }) else {
            Issue.record("a cut request must not be handled")
            return
        }
        guard case .none = reading.completed(now: 7 * Self.second) else {
            Issue.record("a cut request was released twice")
            return
        }
    }

    /// A stream that is never read: the machine only needs a response whose body is one.
    final class IdleStream: ResponseStream {
        func start(waker: StreamWaker) {}
        func read(into buffer: UnsafeMutableRawBufferPointer) -> StreamRead { .wait }
        func finish() {}
    }

    /// A machine whose GET was answered with a stream; `isStopping` as the server says.
    static func streaming(isStopping: Bool = false) -> ConnectionMachine? {
        var machine = Self.machine()
        _ = machine.receivedHeaders(Self.head(method: "GET"), admit: { true })
        guard case .handle = machine.receivedEnd(isStopping: { false }),
              case .queue = machine.handlerReplied(Response(status: 200, stream: IdleStream()), isStopping: { isStopping })
        else { return nil }
        return machine
    }

    @Test("a stream: its first read hands the body to the writer (suspended), which owns it until it hands it back once")
    func stream() throws {
        var machine = try #require(Self.streaming())
        #expect(!machine.ownsStream)
        guard case .handOver(chunked: true) = machine.streamWillRead() else {
            Issue.record("the first read must hand the body over, chunked for HTTP/1.1")
            return
        }
        #expect(machine.ownsStream)
        // The request is complete: however long the stream lasts, it is not cut.
        guard case .none = machine.deadlinePassed(now: 1000 * Self.second) else {
            Issue.record("a stream was cut")
            return
        }
        guard case .resume = machine.streamHandedBack(clean: true), case .none = machine.streamHandedBack(clean: false) else {
            Issue.record("a stream is handed back, resuming its connection, once")
            return
        }
        #expect(!machine.ownsStream)
        guard case .end = machine.streamWillRead() else {
            Issue.record("a stream handed back cleanly must end its body")
            return
        }
        guard case .release = machine.completed(now: 0) else {
            Issue.record("a stream counts as its request until it completes")
            return
        }
        // Hand-backs and reads that come after the stream's end touch nothing.
        guard case .none = machine.streamHandedBack(clean: true), case .fail = machine.streamWillRead() else {
            Issue.record("a stale hand-back acted")
            return
        }

        var failing = try #require(Self.streaming())
        _ = failing.streamWillRead()
        guard case .resume = failing.streamHandedBack(clean: false), case .fail = failing.streamWillRead() else {
            Issue.record("a stream handed back for its peer's loss must fail its connection")
            return
        }

        // HTTP/1.0: no chunks, the close ends the body.
        var old = Self.machine()
        _ = old.receivedHeaders(Self.head(method: "GET", version: "HTTP/1.0"), admit: { true })
        guard case .handle = old.receivedEnd(isStopping: { false }),
              case .queue = old.handlerReplied(Response(status: 200, stream: IdleStream()), isStopping: { false }),
              case .handOver(chunked: false) = old.streamWillRead() else {
            Issue.record("an HTTP/1.0 stream is handed over unchunked")
            return
        }
    }

    @Test("the server stopping ends a stream: at its first read if not handed over yet, else in the writer")
    func streamStopping() throws {
        var queued = try #require(Self.streaming())
        guard case .end = queued.serverStopping(), case .end = queued.streamWillRead(), case .none = queued.serverStopping() else {
            Issue.record("a stream not handed over yet must end at its first read")
            return
        }
        var owned = try #require(Self.streaming())
        _ = owned.streamWillRead()
        guard case .endInWriter = owned.serverStopping(), owned.ownsStream else {
            Issue.record("a stream the writer owns is the writer's to end")
            return
        }
        guard case .resume = owned.streamHandedBack(clean: true), case .none = owned.serverStopping(), case .end = owned.streamWillRead() else {
            Issue.record("the writer hands the stream back once to end")
            return
        }
        // A stream queued after the server's pass over the streams starts out ending.
        var late = try #require(Self.streaming(isStopping: true))
        guard case .end = late.streamWillRead() else {
            Issue.record("a stream queued while stopping must end at once")
            return
        }
        // Requests without a stream are left to finish.
        var plain = Self.machine()
        _ = plain.receivedHeaders(Self.head(method: "GET"), admit: { true })
        guard case .none = plain.serverStopping(), case .handle = plain.receivedEnd(isStopping: { true }) else {
            Issue.record("stopping touched a request without a stream")
            return
        }
    }

    @Test("giving up on connections before libmicrohttpd stops: suspended ones are resumed, and none is suspended or resumed after")
    func abandon() throws {
        var deferred = Self.machine()
        _ = deferred.receivedHeaders(Self.head(method: "GET"), admit: { true })
        _ = deferred.receivedEnd(isStopping: { false })
        _ = deferred.handlerDeferred(finishing: Request(method: "GET", path: "/"))
        guard case .resumeAndRelease = deferred.abandon() else {
            Issue.record("a suspended deferred request must be resumed and released")
            return
        }
        guard case .none = deferred.handlerReplied(Response(status: 200), isStopping: { true }), case .close = deferred.receivedEnd(isStopping: { true }),
              case .none = deferred.completed(now: 0)
        else {
            Issue.record("a late reply must not resume, the resumed connection must close, and nothing is released twice")
            return
        }

        var handling = Self.machine()
        _ = handling.receivedHeaders(Self.head(method: "GET"), admit: { true })
        _ = handling.receivedEnd(isStopping: { false })
        guard case .release = handling.abandon(), case .close = handling.handlerDeferred(finishing: Request(method: "GET", path: "/")) else {
            Issue.record("a handler that defers after the server gave up must not suspend")
            return
        }

        var ownedStream = try #require(Self.streaming())
        _ = ownedStream.streamWillRead()
        guard case .resumeAndRelease = ownedStream.abandon(), !ownedStream.ownsStream, case .none = ownedStream.streamHandedBack(clean: true),
              case .fail = ownedStream.streamWillRead() else {
            Issue.record("an abandoned stream must be resumed once, taken from the writer, and then fail")
            return
        }

        var idle = ConnectionMachine(clientAddress: "", limits: Self.limits, now: 0)
        guard case .none = idle.abandon(), case .close = idle.receivedHeaders(Self.head(), admit: { Issue.record("admitted"); return true }) else {
            Issue.record("an idle connection has nothing to release and takes no request")
            return
        }
    }

    @Test("only a connection between request line and access handler can be refused by libmicrohttpd's header checks")
    func receivingHead() {
        var machine = ConnectionMachine(clientAddress: "", limits: Self.limits, now: 0)
        #expect(!machine.isReceivingHead)
        Array("/".utf8).withUnsafeBufferPointer { machine.receivedRequestLine(target: $0) }
        #expect(machine.isReceivingHead)
        _ = machine.receivedHeaders(Self.head(method: "GET"), admit: { true })
        #expect(!machine.isReceivingHead)
    }
}
