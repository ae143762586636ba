import Foundation
import LifecycleHTTP

// `http-layer PORT BODY_FILE [HEADERS]` (Benchmarks/http-bench.sh starts it): lifecycled's HTTP
// layer with nothing on it, to tell what the layer costs from what the service's work on it
// costs. The same `HTTPServer` (libmicrohttpd with lifecycled's threads, pool and limits,
// `ConnectionMachine`, admission, routing, `Response` handed over) and default
// `ServerConfiguration` as lifecycled, one route (`GET /v1/instances/{id}`), no middleware, no
// store: it answers every GET with BODY_FILE's bytes.
// HEADERS is `one` (the default: `Content-Type` alone, as the bare server answers) or
// `service` (the five headers lifecycled's GET of an instance sends, with fixed values:
// `Content-Type`, `ETag`, `Cache-Control`, `X-Content-Type-Options`, `X-Request-ID`).

let arguments = CommandLine.arguments
guard arguments.count >= 3, let port = UInt16(arguments[1]),
    let body = FileManager.default.contents(atPath: arguments[2]).map(Array.init),
    arguments.count < 4 || ["one", "service"].contains(arguments[3])
else {
    FileHandle.standardError.write(Data("usage: http-layer PORT BODY_FILE [one|service]\n".utf8))
    exit(2)
}
let headers: [(name: String, value: String)] =
    arguments.count > 3 && arguments[3] == "service"
    ? [
        ("Content-Type", "application/json"), ("ETag", #""0-1796624375303""#), ("Cache-Control", "no-cache"),
        ("X-Content-Type-Options", "nosniff"), ("X-Request-ID", "99e0e992-2"),
    ]
    : [("Content-Type", "application/json")]
var router = Router()
router.get("/v1/instances/{id}") { _ in Response(status: 200, headers: headers, body: body) }
let server = HTTPServer(configuration: ServerConfiguration(port: port), pipeline: Pipeline(router: router))
do {
    try server.start()
} catch {
    FileHandle.standardError.write(Data("http-layer: \(error)\n".utf8))
    exit(1)
}
// Serves until killed, as the bare server does.
while true { pause() }
