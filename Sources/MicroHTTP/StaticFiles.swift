import Foundation

/// Serves files below one folder, and nothing outside it.
///
/// The path arrives already percent-decoded, so `%2e%2e` is `..` by now; any `.`
/// or `..` segment is refused, and the resolved file (symlinks followed) must
/// still lie inside the root.
public struct StaticFiles: Sendable {
    public let root: String

    /// `nil` when the folder does not exist.
    public init?(root: String) {
        let resolved = URL(fileURLWithPath: root).resolvingSymlinksInPath().path
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: resolved, isDirectory: &isDirectory), isDirectory.boolValue else { return nil }
        self.root = resolved
    }

    public func respond(to request: Request) -> Response {
        guard request.method == "GET" || request.method == "HEAD" else {
            return .methodNotAllowed(request, allow: "GET, HEAD")
        }
        let notFound = Response.notFound(request)
        let segments = request.path.split(separator: "/", omittingEmptySubsequences: true)
        guard !segments.contains(where: { $0 == "." || $0 == ".." || $0.contains("\0") || $0.contains("\\") }) else {
            return notFound
        }
        var relative = segments.joined(separator: "/")
        if relative.isEmpty { relative = "index.html" }
        let resolved = URL(fileURLWithPath: root + "/" + relative).resolvingSymlinksInPath().path
        guard resolved.hasPrefix(root + "/") else { return notFound }
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: resolved, isDirectory: &isDirectory), !isDirectory.boolValue,
              let data = FileManager.default.contents(atPath: resolved)
        else { return notFound }
        return Response(status: 200, headers: [("Content-Type", Self.contentType(of: resolved)), ("Cache-Control", "no-cache")], body: Array(data))
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
