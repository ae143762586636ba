import Foundation
import LifecycleLog
import LifecycleHTTP
import LifecycleLocks

/// One line per request at info, when its answer is complete: method (a method of
/// ``RequestMetrics``'s list, else `other`, so a client cannot write its own text), route
/// template (not the path, which may carry ids or a token), status, duration, body bytes,
/// request id and client. A streamed answer is logged when the stream ends, with what it sent.
struct AccessLog: Middleware {
    let logger: LineLogger

    func finish(_ request: Request, _ response: inout Response) {
        guard logger.isLogging(.info) else { return }
        let line = Line(
            method: RequestMetrics.methodName(request.method), route: request.route ?? Pipeline.refusedTemplate, id: request.id,
            client: request.clientAddress, started: request.received, logger: logger
        )
        switch response.body {
        case .bytes(let bytes):
            line.write(status: response.status, bytes: bytes.count)
        case .omitted:
            line.write(status: response.status, bytes: 0)
        case .stream(let stream):
            response.body = .stream(LoggedStream(stream, line: line, status: response.status))
        }
    }

    /// What is known of a request's line before its answer is.
    struct Line: Sendable {
        let method: String
        let route: String
        let id: String
        let client: String
        let started: UInt64
        let logger: LineLogger

        func write(status: Int, bytes: Int) {
            let micros = (DispatchTime.now().uptimeNanoseconds - started) / 1000
            logger.log(.info, "request") { line in
                line.field("method", method)
                line.field("route", route)
                line.field("status", status)
                line.field("duration_ms", thousandths: micros)
                line.field("bytes", bytes)
                line.field("request_id", id)
                line.field("client", client)
            }
        }
    }
}

/// A stream that counts what it sends and writes its request's line when it finishes.
private final class LoggedStream: ResponseStream {
    private let inner: any ResponseStream
    private let line: AccessLog.Line
    private let status: Int
    private let sent = LockedValue<Int>(0)

    init(_ inner: any ResponseStream, line: AccessLog.Line, status: Int) {
        self.inner = inner
        self.line = line
        self.status = status
    }

    func start(waker: StreamWaker) { inner.start(waker: waker) }

    func read(into buffer: UnsafeMutableRawBufferPointer) -> StreamRead {
        let read = inner.read(into: buffer)
        if case .wrote(let count) = read { sent.withLock { $0 += count } }
        if case .wroteAll(let count) = read { sent.withLock { $0 += count } }
        return read
    }

    func finish() {
        inner.finish()
        line.write(status: status, bytes: sent.withLock { $0 })
    }
}
