import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
import LifecycleKit
import Testing
@testable import LifecycleService

/// What an SVG document holds, as an XML parser reads it: each `<g>` with an id (its class
/// and the text of its `<text>` elements), and every element and attribute name used.
final class SVGContents: NSObject, XMLParserDelegate {
    struct Group { var id: String; var classes: String; var text: [String] = [] }
    private(set) var groups: [Group] = []
    private(set) var elements: Set<String> = []
    private(set) var attributes: Set<String> = []
    private var inText = false

    static func parse(_ body: [UInt8]) throws -> SVGContents {
        let contents = SVGContents()
        let parser = XMLParser(data: Data(body))
        parser.delegate = contents
        guard parser.parse() else { throw HTTPClientError(description: "not XML: \(String(describing: parser.parserError))") }
        return contents
    }

    /// Groups whose id starts with `prefix`, in document order (Graphviz's, not the model's).
    func groups(_ prefix: String) -> [Group] { groups.filter { $0.id.hasPrefix(prefix) } }

    func group(_ id: String) -> Group? { groups.first { $0.id == id } }

    func parser(_ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?, attributes: [String: String]) {
        elements.insert(name)
        self.attributes.formUnion(attributes.keys)
        if name == "g", let id = attributes["id"] { groups.append(Group(id: id, classes: attributes["class"] ?? "")) }
        if name == "text" { inText = true; groups[groups.count - 1].text.append("") }
    }

    func parser(_ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?) {
        if name == "text" { inText = false }
    }

    func parser(_ parser: XMLParser, foundCharacters string: String) {
        if inText { groups[groups.count - 1].text[groups[groups.count - 1].text.count - 1] += string }
    }
}

@Suite("model graphs")
struct GraphTests {
    @Test("each built-in model's SVG parses as XML: one node state-<name> per state with its kind, one edge per row")
    func builtinSVGs() throws {
        let server = try TestServer()
        let c = try server.connect()
        for model in [Model.iosApp, Model.androidActivity] {
            let response = try c.request("GET", "/v1/models/\(model.name)/graph.svg")
            #expect(response.status == 200)
            #expect(response.header("content-type") == "image/svg+xml")
            #expect(response.header("etag")?.hasPrefix("\"") == true)
            let svg = try SVGContents.parse(response.body)
            #expect(svg.groups("state-").map(\.id).sorted() == model.definition.states.map { "state-" + $0.name }.sorted(), "\(model.name)")
            for state in model.definition.states {
                let node = svg.group("state-" + state.name)
                #expect(node?.classes == "node state \(state.kind.rawValue)" && node?.text == [state.name], "\(state.name)")
            }
            let rows = model.definition.transitions
            #expect(svg.groups("edge-").map(\.id).sorted() == rows.indices.map { "edge-" + Model.rowID($0) }.sorted(), "\(model.name)")
            for (index, row) in rows.enumerated() {
                let edge = svg.group("edge-" + Model.rowID(index))
                #expect(edge?.classes == "edge" && edge?.text.first?.hasPrefix(row.event) == true, "\(model.name) row \(index + 1)")
            }
            // Inlined by a page under `default-src 'self'`: nothing to run, fetch or block.
            #expect(svg.elements.isDisjoint(with: ["script", "a", "image", "foreignObject", "style"]))
            #expect(svg.attributes.isDisjoint(with: ["style", "href", "xlink:href"]))
            #expect(!response.text.contains("<!DOCTYPE"))
            // Drawn once and kept: the same bytes again.
            #expect(try c.request("GET", "/v1/models/\(model.name)/graph.svg").body == response.body)
        }
        let guarded = try SVGContents.parse(try c.request("GET", "/v1/models/ios-app/graph.svg").body).group("edge-r2")
        #expect(guarded?.text == ["didFinishLaunching [isTesting != true, setupError absent]"])
    }

    @Test("graph.dot is the model's DOT text; an unknown model is a 404 problem for both")
    func dotAndUnknownModel() throws {
        let server = try TestServer()
        let c = try server.connect()
        let dot = try c.request("GET", "/v1/models/android-activity/graph.dot")
        #expect(dot.status == 200)
        #expect(dot.header("content-type") == "text/vnd.graphviz; charset=utf-8")
        #expect(dot.text == Model.androidActivity.dot)
        for path in ["/v1/models/nope/graph.dot", "/v1/models/nope/graph.svg"] {
            let missing = try c.request("GET", path)
            #expect(missing.status == 404 && missing.header("content-type") == "application/problem+json", "\(path)")
            #expect(missing.json["detail"] as? String == "no model \"nope\"")
        }
    }

    @Test("an ETag per document: If-None-Match with it (weak or strong, or *) is 304 without a body, another tag 200")
    func conditionalRequests() throws {
        let server = try TestServer()
        let c = try server.connect()
        for path in ["/v1/models/ios-app/graph.svg", "/v1/models/ios-app/graph.dot"] {
            let first = try c.request("GET", path)
            let etag = try #require(first.header("etag"))
            #expect(first.header("cache-control") == "no-cache")
            for tags in [etag, "W/\(etag)", "\"other\", \(etag)", "*"] {
                let again = try c.request("GET", path, headers: [("If-None-Match", tags)])
                #expect(again.status == 304 && again.body.isEmpty && again.header("etag") == etag, "\(path) \(tags)")
            }
            let changed = try c.request("GET", path, headers: [("If-None-Match", "\"other\"")])
            #expect(changed.status == 200 && changed.body == first.body)
        }
        let svgTag = try c.request("GET", "/v1/models/ios-app/graph.svg").header("etag")
        #expect(svgTag != (try c.request("GET", "/v1/models/ios-app/graph.dot").header("etag")))
        #expect(svgTag != (try c.request("GET", "/v1/models/android-activity/graph.svg").header("etag")))
    }

    @Test("a model file's odd names come out of Graphviz as they went in: ids, labels and guards")
    func oddNames() throws {
        let names = ["say \"hi\"", "back\\slash", "a&amp;b <c>", "tab\there \\N"]
        let states = zip(names, ["initial", "transient", "permanent", "terminal"]).map { #"{"name": \#(json($0)), "kind": "\#($1)"}"# }
        let model = """
        {"name": "odd", "states": [\(states.joined(separator: ", "))],
         "events": [{"name": "go \\"now\\"", "parameters": [{"name": "mode", "type": "string"}]}],
         "transitions": [
           {"from": \(json(names[0])), "event": "go \\"now\\"", "when": [{"parameter": "mode", "equals": "x&y"}], "to": \(json(names[1]))},
           {"from": \(json(names[1])), "event": "go \\"now\\"", "to": \(json(names[2]))},
           {"from": \(json(names[2])), "event": "go \\"now\\"", "to": \(json(names[3]))}]}
        """
        let models = TemporaryDirectory()
        try model.write(toFile: models.path + "/odd.json", atomically: true, encoding: .utf8)
        let server = try TestServer { $0.modelsDirectory = models.path }
        let response = try server.connect().request("GET", "/v1/models/odd/graph.svg")
        #expect(response.status == 200)
        let svg = try SVGContents.parse(response.body)
        // XML cannot carry the tab: it is U+FFFD in the graph.
        let shown = names.map { $0.replacingOccurrences(of: "\t", with: "\u{FFFD}") }
        #expect(svg.groups("state-").map(\.id).sorted() == shown.map { "state-" + $0 }.sorted())
        #expect(shown.map { svg.group("state-" + $0)?.text } == shown.map { [$0] })
        #expect(["edge-r1", "edge-r2", "edge-r3"].map { svg.group($0)?.text } == [[#"go "now" [mode == "x&y"]"#], [#"go "now""#], [#"go "now""#]])
    }

    private func json(_ text: String) -> String {
        String(decoding: try! JSONEncoder().encode(text), as: UTF8.self)
    }
}
