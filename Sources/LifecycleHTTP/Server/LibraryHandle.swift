/// A C pointer that more than one thread holds: a libmicrohttpd connection or daemon, or the
/// struct of callbacks a daemon reads until it stops.
///
/// A connection's is used on its own daemon thread, except for `MHD_resume_connection`,
/// which libmicrohttpd allows from any thread (and which is only called under the
/// connection's lock, while its machine says it is suspended). A daemon's, and its
/// callbacks', pass from `HTTPServer.start()` to `stop()` through the server's lock.
// @unchecked: a C pointer is never Sendable; each use from another thread is one libmicrohttpd allows, or follows its stop.
struct LibraryHandle: @unchecked Sendable {
    let pointer: OpaquePointer
}
