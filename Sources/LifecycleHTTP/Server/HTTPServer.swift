import CLifecycleMicroHTTPD
import Foundation
import LifecycleLog
import LifecycleLocks
#if canImport(Glibc)
import Glibc
#endif

/// An HTTP server on libmicrohttpd's internal epoll thread pool.
///
/// The files of this module are the only Swift that touches libmicrohttpd; the daemon
/// pointer is owned here, started in `start()` and stopped in `stop()` or `deinit`.
///
/// Each connection has a ``ConnectionMachine`` (in a ``ConnectionContext``, the
/// connection's socket context) driven by libmicrohttpd's callbacks (see ``DaemonContext``).
/// Connections are limited per client address (counted here rather than by libmicrohttpd's
/// per-IP limit, so that trusted proxies, which carry many clients, are not held to it) and
/// in all (the accept policy, below libmicrohttpd's own limit, at which it would stop
/// accepting and leave new clients hanging); both refuse a client at once by closing its
/// socket. A sweeper thread closes connections whose request has not arrived in time.
///
/// A response body may be a ``ResponseStream``: a libmicrohttpd callback response, chunked,
/// whose connection is suspended once its head is sent and whose body the server's stream
/// writer thread writes (see `StreamBody` and `StreamWriter`). The connection table, with each connection's state, is the registry of
/// open streams that `stop()` ends first.
public final class HTTPServer: Sendable {
    /// How the server listens and what it accepts, as given.
    public let configuration: ServerConfiguration
    /// The limit on open connections in force: the configured one, lowered to fit the
    /// process's open-file limit (see ``init(configuration:logger:pipeline:)``).
    public let maxConnections: Int
    private let logger: LineLogger
    /// What the server runs for each request: tests and callers in-process run it without a socket.
    public let pipeline: Pipeline
    private let limits: RequestLimits
    private let state = LockedValue(State())

    private struct State {
        var running: Running?
        /// Kept after `stop()`, as clients and tests still name it.
        var port: UInt16 = 0
    }

    /// A started daemon and what it must outlive, from `start()` to `stop()`.
    private struct Running {
        let daemon: LibraryHandle
        /// The callbacks' C struct (an `lc_mhd_callbacks`), which the daemon reads until it stops.
        let callbacks: LibraryHandle
        /// What the callbacks act on; retained here, as the struct holds it unretained.
        let context: DaemonContext
        let sweeper: Sweeper
    }

    /// The port actually bound (useful when configured with 0); 0 until started.
    public var port: UInt16 { state.withLock { $0.port } }

    /// A server that serves `pipeline` once started.
    ///
    /// Raises the process's soft limit on open files to its hard limit, and keeps the
    /// connection limit below it (less ``ServerConfiguration/reservedDescriptors``), so
    /// accepting never fails for want of a descriptor.
    public init(configuration: ServerConfiguration, logger: LineLogger = LineLogger(), pipeline: Pipeline) {
        self.configuration = configuration
        self.logger = logger
        self.pipeline = pipeline
        limits = RequestLimits(
            maxBodySize: configuration.maxBodySize, maxBodySizeByPath: configuration.maxBodySizeByPath, maxTargetSize: configuration.maxTargetSize, maxHeaderSize: configuration.maxHeaderSize,
            // At most a year, so that its nanoseconds fit.
            requestTimeout: UInt64(min(max(1, configuration.requestTimeout), 365 * 86_400)) * 1_000_000_000
        )
        let openFiles = OpenFiles.raiseLimit()
        let ceiling = max(1, openFiles - ServerConfiguration.reservedDescriptors)
        maxConnections = min(configuration.maxConnections ?? ceiling, ceiling)
        if let wanted = configuration.maxConnections, wanted > ceiling {
            logger.warning("connection limit lowered to fit the open-file limit", ["wanted": String(wanted), "limit": String(ceiling), "openFiles": String(openFiles)])
        }
    }

    deinit { stop() }

    /// Binds and starts serving; returns once the daemon's threads are running. Call once.
    public func start() throws(ServerError) {
        let socket = try ListeningSocket(host: configuration.host, port: configuration.port)
        let flags = MHD_USE_EPOLL_INTERNAL_THREAD.rawValue | MHD_ALLOW_SUSPEND_RESUME.rawValue | MHD_USE_ERROR_LOG.rawValue
        var options: [MHD_OptionItem] = [
            MHD_OptionItem(option: .LISTEN_SOCKET, value: Int(socket.descriptor), ptr_value: nil),
            MHD_OptionItem(option: .CONNECTION_TIMEOUT, value: configuration.connectionTimeout, ptr_value: nil),
            MHD_OptionItem(option: .CONNECTION_MEMORY_LIMIT, value: configuration.connectionMemory, ptr_value: nil),
            // libmicrohttpd splits its limit evenly between threads and a thread at its share
            // stops accepting, so each share is kept above the whole limit enforced here.
            MHD_OptionItem(option: .CONNECTION_LIMIT, value: (maxConnections + 1) * configuration.threads, ptr_value: nil),
        ]
        if configuration.threads > 1 {
            options.append(MHD_OptionItem(option: .THREAD_POOL_SIZE, value: configuration.threads, ptr_value: nil))
        }
        options.append(MHD_OptionItem(option: .END, value: 0, ptr_value: nil))

        // As many stream writers as daemon threads: streams use the cores the requests do.
        var streams: [StreamWriter] = []
        do {
            for _ in 0..<configuration.threads { streams.append(try StreamWriter(logger: logger)) }
        } catch {
            close(socket.descriptor)
            for writer in streams { writer.stop() }
            throw error
        }
        let context = DaemonContext(
            configuration: configuration, maxConnections: maxConnections, limits: limits, pipeline: pipeline, logger: logger, streams: streams
        )
        let callbacks = context.makeCallbacks()
        let started = options.withUnsafeBufferPointer { items in
            lc_mhd_start(UInt32(flags), callbacks, items.baseAddress)
        }
        guard let started else {
            close(socket.descriptor)
            for writer in streams { writer.stop() }
            callbacks.deallocate()
            throw .startFailed
        }
        let interval = min(1, max(0.05, Double(limits.requestTimeout) / 4e9))
        let sweeper = Sweeper(interval: interval) { [connections = context.connections, gate = context.gate, limits, refusals = context.refusals] in
            let cut = connections.cutLateRequests(now: DispatchTime.now().uptimeNanoseconds, gate: gate)
            if cut > 0 { refusals.record(cut, reason: "request-timeout", limit: "\(limits.requestTimeout / 1_000_000_000)s") }
        }
        let running = Running(daemon: LibraryHandle(pointer: started), callbacks: LibraryHandle(pointer: OpaquePointer(callbacks)), context: context, sweeper: sweeper)
        state.withLock { $0 = State(running: running, port: socket.port) }
    }

    /// Stops accepting connections and requests, ends every open stream (each client sees
    /// the clean end of its body), lets requests in flight and the ending streams finish (up
    /// to `drainSeconds`), closes every connection (up to ``closeSeconds`` more: a handler
    /// still running holds its connection), then stops the daemon's threads.
    ///
    /// libmicrohttpd must not stop with a suspended connection (it aborts the process), and
    /// no connection may be resumed once it has stopped (its memory is freed). So, before
    /// stopping it, the server gives up on every connection still open: each suspended one
    /// is resumed, and from then on no reply or wake resumes any (see ``ConnectionMachine``).
    public func stop(drainSeconds: Double = 10) {
        let taken = state.withLock { state -> Running? in
            defer { state.running = nil }
            return state.running
        }
        guard let running = taken else { return }
        let context = running.context
        let (gate, connections) = (context.gate, context.connections)
        let deadline = DispatchTime.now() + drainSeconds
        // From here the accept policy turns every new client away at once. (Not
        // `MHD_quiesce_daemon`: in 0.9.75 with a thread pool on epoll it races a worker that
        // wakes meanwhile to take the listening socket out of the same epoll set, and the
        // loser aborts the process. The socket stays open until `MHD_stop_daemon` closes it.)
        gate.close()
        // After closing the gate: a stream queued from now on starts out ending.
        let streams = connections.all.reduce(0) { $0 + ($1.endStream() ? 1 : 0) }
        // The bodies the writer owns: each ends once its bytes are out, and is handed back.
        for writer in context.streams { writer.endAll() }
        if streams > 0 { logger.info("ending streams", ["count": String(streams)]) }
        gate.drain(until: deadline)
        running.sweeper.stop()
        let abandoned = connections.all.reduce(0) { $0 + ($1.abandon(gate: gate) ? 1 : 0) }
        if abandoned > 0 { logger.error("stopping with requests unfinished", ["count": String(abandoned)]) }
        // libmicrohttpd 0.9.75 goes on reading connections until its threads notice the stop,
        // and a header block it refuses itself then (a bad Content-Length) crashes the process:
        // its `MHD_queue_response` queues nothing once stopping, and it builds the head of that
        // response from a null pointer. So no connection may be left when it is told to stop:
        // each is shut down and, as libmicrohttpd may still read what its client had sent,
        // waited for until libmicrohttpd has closed it.
        let closing = DispatchTime.now() + Self.closeSeconds
        while connections.shutDownAll() > 0, DispatchTime.now() < closing { usleep(5_000) }
        let open = connections.count
        if open > 0 { logger.error("stopping with connections still open", ["count": String(open)]) }
        MHD_stop_daemon(running.daemon.pointer)
        // Every stream is finished (let go by the writer) by now, and no callback comes any more.
        for writer in context.streams { writer.stop() }
        UnsafeMutablePointer<lc_mhd_callbacks>(running.callbacks.pointer).deallocate()
    }

    /// Longest `stop()` waits for the connections to close once their drain is over: they
    /// close at once unless a handler still holds one (then the daemon waits for it anyway).
    static let closeSeconds = 1.0
}
