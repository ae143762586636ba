import Foundation
import Logging
import MicroHTTP
import Synchronization

/// One line per request at info, when its answer is complete: method (a method of
/// ``RequestMetrics``'s list, else `other`, so a client cannot write its own text), route
/// template (not the path, which may carry ids or a token), status, duration, body bytes,
/// request id and client. A streamed answer is logged when the stream ends, with what it sent.
struct AccessLog: Middleware {
    let logger: Logger

    func reply(to request: Request, next: Responder) -> Reply {
        guard logger.isLogging(.info) else { return next(request) }
        let started = DispatchTime.now().uptimeNanoseconds
        return next(request).map((request, started, logger)) { context, response in
            let (request, started, logger) = context
            let line = Line(request: request, status: response.status, started: started, logger: logger)
            switch response.body {
            case .bytes(let bytes):
                line.write(bytes: bytes.count)
                return response
            case .omitted:
                line.write(bytes: 0)
                return response
            case .stream(let stream):
                var logged = response
                logged.body = .stream(LoggedStream(stream, line: line))
                return logged
            }
        }
    }

    /// What is known of a request's line before its body's size is.
    struct Line: Sendable {
        var request: Request
        var status: Int
        var started: UInt64
        var logger: Logger

        func write(bytes: Int) {
            let micros = (DispatchTime.now().uptimeNanoseconds - started) / 1000
            logger.log(.info, "request", fields: [
                ("method", RequestMetrics.methodName(request.method)), ("route", request.route ?? Pipeline.refusedTemplate), ("status", String(status)),
                ("duration_ms", String(format: "%.3f", Double(micros) / 1000)), ("bytes", String(bytes)),
                ("request_id", request.id), ("client", request.clientAddress),
            ])
        }
    }
}

/// A stream that counts what it sends and writes its request's line when it finishes.
private final class LoggedStream: ResponseStream {
    private let inner: any ResponseStream
    private let line: AccessLog.Line
    private let sent = Atomic<Int>(0)

    init(_ inner: any ResponseStream, line: AccessLog.Line) {
        self.inner = inner
        self.line = line
    }

    func start(waker: StreamWaker) { inner.start(waker: waker) }

    func read(into buffer: UnsafeMutableRawBufferPointer) -> StreamRead {
        let read = inner.read(into: buffer)
        if case .wrote(let count) = read { sent.add(count, ordering: .relaxed) }
        if case .wroteAll(let count) = read { sent.add(count, ordering: .relaxed) }
        return read
    }

    func finish() {
        inner.finish()
        line.write(bytes: sent.load(ordering: .relaxed))
    }
}
