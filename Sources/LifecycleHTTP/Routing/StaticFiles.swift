import Foundation

/// Serves files below one folder, and nothing outside it.
///
/// The path arrives already percent-decoded, so `%2e%2e` is `..` by now; any `.`
/// or `..` segment is refused, and the resolved file (symlinks followed) must
/// still lie inside the root. `/` is `index.html`; no other folder is served.
public struct StaticFiles: Sendable {
    /// The folder served, symlinks resolved.
    public let root: String

    /// `nil` when the folder does not exist.
    public init?(root: String) {
        let resolved = URL(fileURLWithPath: root).resolvingSymlinksInPath().path
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: resolved, isDirectory: &isDirectory), isDirectory.boolValue else { return nil }
        self.root = resolved
    }

    /// The file the path names under ``root``, or 404; only GET and HEAD (405 otherwise).
    public func respond(to request: Request) -> Response {
        guard request.method == "GET" || request.method == "HEAD" else {
            return .methodNotAllowed(request, allow: "GET, HEAD")
        }
        let notFound = Response.notFound(request)
        // A file's path has no trailing slash: `/index.html/` names a folder, which is not
        // served (as a page, it would load its scripts from `/index.html/js/...`).
        guard request.path == "/" || !request.path.hasSuffix("/") else { return notFound }
        let segments = request.path.split(separator: "/", omittingEmptySubsequences: true)
        guard !segments.contains(where: { $0 == "." || $0 == ".." || $0.contains("\0") || $0.contains("\\") }) else {
            return notFound
        }
        var relative = segments.joined(separator: "/")
        if relative.isEmpty { relative = "index.html" }
        let resolved = URL(fileURLWithPath: root + "/" + relative).resolvingSymlinksInPath().path
        guard resolved.hasPrefix(root + "/") else { return notFound }
        var status = stat()
        guard stat(resolved, &status) == 0, status.st_mode & S_IFMT == S_IFREG else { return notFound }
        // `no-cache`: a browser keeps the file but asks each time whether it changed, so an
        // upgraded dashboard is picked up at once and an unchanged one costs a 304.
        let version = Self.validators(size: Int64(status.st_size), modified: status.st_mtim)
        let headers = [("Cache-Control", "no-cache"), ("ETag", version.etag), ("Last-Modified", version.lastModified)]
        guard let data = FileManager.default.contents(atPath: resolved) else { return notFound }
        if Self.isUnchanged(request, etag: version.etag, lastModified: version.lastModified) {
            return .notModified(headers: headers, body: Array(data))
        }
        return Response(status: 200, headers: [("Content-Type", Self.contentType(of: resolved))] + headers, body: Array(data))
    }

    /// An entity tag and `Last-Modified` value from the file's size and modification time
    /// (to the nanosecond): an upgrade that replaces a file changes at least one of them.
    static func validators(size: Int64, modified: timespec) -> (etag: String, lastModified: String) {
        let etag = "\"\(String(size, radix: 16))-\(String(modified.tv_sec, radix: 16)).\(String(modified.tv_nsec, radix: 16))\""
        return (etag, httpDate(Int(modified.tv_sec)))
    }

    /// Whether a conditional GET or HEAD may be answered 304 (RFC 9110 §13.1): `If-None-Match`
    /// when sent (weak comparison, `*` matches any), otherwise `If-Modified-Since` when it
    /// is the file's own `Last-Modified`, as browsers send it back. A date that differs is
    /// answered in full: never stale, at worst a file sent again.
    static func isUnchanged(_ request: Request, etag: String, lastModified: String) -> Bool {
        request.ifNoneMatch(names: etag) ?? (request.header("if-modified-since") == lastModified)
    }

    /// An IMF-fixdate (RFC 9110 §5.6.7), e.g. `Sun, 06 Nov 1994 08:49:37 GMT`.
    static func httpDate(_ secondsSince1970: Int) -> String {
        var time = time_t(secondsSince1970)
        var parts = tm()
        gmtime_r(&time, &parts)
        let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        let two = { (value: Int32) in value < 10 ? "0\(value)" : "\(value)" }
        return "\(days[Int(parts.tm_wday)]), \(two(parts.tm_mday)) \(months[Int(parts.tm_mon)]) \(parts.tm_year + 1900) "
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) GMT"
    }

    static func contentType(of path: String) -> String {
        switch (path as NSString).pathExtension.lowercased() {
        case "html", "htm": "text/html; charset=utf-8"
        case "css": "text/css; charset=utf-8"
        case "js", "mjs": "text/javascript; charset=utf-8"
        case "json": "application/json"
        case "svg": "image/svg+xml"
        case "png": "image/png"
        case "jpg", "jpeg": "image/jpeg"
        case "ico": "image/x-icon"
        case "txt": "text/plain; charset=utf-8"
        case "woff2": "font/woff2"
        default: "application/octet-stream"
        }
    }
}
