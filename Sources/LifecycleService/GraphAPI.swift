import Foundation
import LifecycleGraph
import LifecycleKit
import MicroHTTP
import Synchronization

/// `GET /v1/models/{model}/graph.dot` and `graph.svg`: each model's transition graph.
///
/// A model cannot change while the service runs, so each document is made once: the DOT
/// text when the router is made (pure and cheap: about 1 ms for both built-in models in a
/// debug build), the SVG by Graphviz on its first request (the first drawing in a process
/// loads Graphviz's plugins, 30 to 370 ms measured, which start-up should not wait for; each
/// later model takes 1 to 5 ms). Each carries an ETag naming its bytes; `If-None-Match` with
/// it is answered 304 (by ``Caching``).
final class ModelGraphs: Sendable {
    /// A document and its entity tag.
    struct Document: Sendable {
        let body: [UInt8]
        let etag: String

        init(_ body: [UInt8]) {
            self.body = body
            etag = "\"" + SHA256.digest(body).prefix(12).map { String(format: "%02x", $0) }.joined() + "\""
        }
    }

    private let dots: [String: Document]
    /// Drawn on first request, under this lock: a second request for a model being drawn
    /// waits for that drawing rather than making another.
    private let svgs = Mutex<[String: Document]>([:])
    private let logger: Logger

    init(models: [String: Model], logger: Logger) {
        dots = models.mapValues { Document(Array($0.dot.utf8)) }
        self.logger = logger
    }

    func dot(_ request: Request) throws(Problem) -> Response {
        let name = request.parameters["model"] ?? ""
        guard let dot = dots[name] else { throw .notFound("no model \"\(name)\"") }
        return Self.answer(dot, contentType: "text/vnd.graphviz; charset=utf-8")
    }

    func svg(_ request: Request) throws(Problem) -> Response {
        let name = request.parameters["model"] ?? ""
        guard let dot = dots[name] else { throw .notFound("no model \"\(name)\"") }
        let svg = try svgs.withLock { drawn throws(Problem) -> Document in
            if let svg = drawn[name] { return svg }
            let started = DispatchTime.now().uptimeNanoseconds
            do throws(GraphvizError) {
                let svg = Document(try Graphviz.svg(fromDOT: String(decoding: dot.body, as: UTF8.self)))
                drawn[name] = svg
                logger.info("graph drawn", [
                    "model": name, "bytes": String(svg.body.count),
                    "millis": String(format: "%.1f", Double(DispatchTime.now().uptimeNanoseconds - started) / 1e6),
                ])
                return svg
            } catch {
                logger.error("graph not drawn", ["model": name, "reason": error.description])
                throw .internalError("the graph of model \"\(name)\" could not be drawn: \(error.description)")
            }
        }
        return Self.answer(svg, contentType: "image/svg+xml")
    }

    /// 200 with the document and its tag (``Caching`` answers a matching `If-None-Match`).
    private static func answer(_ document: Document, contentType: String) -> Response {
        Response(status: 200, headers: [("Content-Type", contentType), ("ETag", document.etag)], body: document.body)
    }
}
