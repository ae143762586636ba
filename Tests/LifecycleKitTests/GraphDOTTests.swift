import Foundation
import Testing
@testable import LifecycleKit

/// A model whose names hold what DOT, Graphviz's escapes and XML each treat specially.
let oddModelJSON = #"""
{"name": "odd \"model\"",
 "states": [
   {"name": "say \"hi\"", "kind": "initial"},
   {"name": "back\\slash", "kind": "transient"},
   {"name": "a&amp;b <c>", "kind": "permanent"},
   {"name": "line\nbreak \\N", "kind": "terminal"}
 ],
 "events": [{"name": "go \"now\"", "parameters": [{"name": "mode", "type": "string"}]}],
 "transitions": [
   {"from": "say \"hi\"", "event": "go \"now\"", "when": [{"parameter": "mode", "equals": "x\"\\y"}], "to": "back\\slash"},
   {"from": "back\\slash", "event": "go \"now\"", "to": "a&amp;b <c>"},
   {"from": "a&amp;b <c>", "event": "go \"now\"", "when": [{"parameter": "mode", "present": true}], "to": "line\nbreak \\N"},
   {"from": "a&amp;b <c>", "event": "go \"now\"", "when": [{"parameter": "mode", "present": false}]}
 ]}
"""#

@Suite("graph DOT")
struct GraphDOTTests {
    /// Each state's node line: its kind (from the class) and the attributes after its label.
    static func nodes(in dot: String) throws -> [String: (kind: String, look: String)] {
        // A DOT string's contents, escapes included: `\"` and `\\` do not end it.
        let contents = #"((?:[^"\\]|\\.)*)"#
        let line = try Regex(#"^  "\#(contents)" \[id="state-\#(contents)" class="state (\w+)" label="\#(contents)" (.*)\]$"#)
        var nodes: [String: (String, String)] = [:]
        for text in dot.split(separator: "\n") {
            guard let match = try line.wholeMatch(in: String(text)) else { continue }
            let name = String(try #require(match[1].substring)), kind = String(try #require(match[3].substring))
            #expect(match[2].substring.map(String.init) == name && match[4].substring.map(String.init) == name, "\(text)")
            #expect(nodes.updateValue((kind, String(try #require(match[5].substring))), forKey: name) == nil, "\(name) twice")
        }
        return nodes
    }

    @Test("ios-app: a node per state with its id and kind, an edge per row with its id, event and guard")
    func iosApp() throws {
        let dot = Model.iosApp.dot
        let nodes = try Self.nodes(in: dot)
        #expect(nodes.count == 7)
        for state in Model.iosApp.definition.states {
            #expect(nodes[state.name]?.kind == state.kind.rawValue, "\(state.name)")
        }
        let edges = dot.split(separator: "\n").filter { $0.contains(" -> ") }
        #expect(edges.count == Model.iosApp.definition.transitions.count)
        for (index, edge) in edges.enumerated() { #expect(edge.contains(" [id=\"edge-r\(index + 1)\" "), "\(edge)") }
        #expect(edges[0] == #"  "initializing" -> "simulated" [id="edge-r1" label="didFinishLaunching [isTesting == true]"]"#)
        #expect(edges[1] == #"  "initializing" -> "launching" [id="edge-r2" label="didFinishLaunching [isTesting != true, setupError absent]"]"#)
        #expect(edges[3] == #"  "launching" -> "connected" [id="edge-r4" label="willConnectToWindow"]"#)
        // A row without a target stays: a loop.
        #expect(edges[6] == #"  "connected" -> "connected" [id="edge-r7" label="willEnterForeground"]"#)
        #expect(dot.hasPrefix("digraph \"ios-app\" {\n") && dot.hasSuffix("}\n"))
        // The same model gives the same text (the SVG's ETag depends on it).
        #expect(try Model(json: Data(BuiltinModels.iosApp.utf8)).dot == dot)
    }

    @Test("initial, transient, permanent and terminal states look different; states of one kind alike")
    func kindsStyledApart() throws {
        var looks: [String: Set<String>] = [:]
        for model in [Model.iosApp, Model.androidActivity] {
            for (_, node) in try Self.nodes(in: model.dot) { looks[node.kind, default: []].insert(node.look) }
        }
        #expect(looks.keys.sorted() == ["initial", "permanent", "terminal", "transient"])
        #expect(looks.values.allSatisfy { $0.count == 1 })
        #expect(Set(looks.values.compactMap(\.first)).count == 4)
    }

    @Test("odd names from a model file are quoted for DOT and for Graphviz's escapes")
    func oddNames() throws {
        let dot = try Model(json: Data(oddModelJSON.utf8)).dot
        let lines = dot.split(separator: "\n").map(String.init)
        #expect(lines[0] == #"digraph "odd \"model\"" {"#)
        #expect(try Self.nodes(in: dot).map { "\($0.key) \($0.value.kind)" }.sorted() == [
            #"a&amp;amp;b <c> permanent"#, #"back\\slash transient"#, "line\u{FFFD}break \\\\N terminal", #"say \"hi\" initial"#,
        ])
        #expect(lines.filter { $0.contains(" -> ") } == [
            #"  "say \"hi\"" -> "back\\slash" [id="edge-r1" label="go \"now\" [mode == \"x\"\\y\"]"]"#,
            #"  "back\\slash" -> "a&amp;amp;b <c>" [id="edge-r2" label="go \"now\""]"#,
            "  \"a&amp;amp;b <c>\" -> \"line\u{FFFD}break \\\\N\" [id=\"edge-r3\" label=\"go \\\"now\\\" [mode present]\"]",
            #"  "a&amp;amp;b <c>" -> "a&amp;amp;b <c>" [id="edge-r4" label="go \"now\" [mode absent]"]"#,
        ])
    }
}
