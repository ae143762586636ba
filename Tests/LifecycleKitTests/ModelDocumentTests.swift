import Foundation
import Testing
@testable import LifecycleKit

/// docs/MODEL.md carries each built-in model's tables as the model itself has them: a change to
/// a row in `BuiltinModels.swift` that the document does not follow fails here, with the
/// tables it should hold.
@Suite("docs/MODEL.md")
struct ModelDocumentTests {
    static let document = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("docs/MODEL.md")

    /// The Markdown of a model's tables: states, inputs, then the rows with their ids.
    static func tables(of model: Model) -> String {
        let definition = model.definition
        func code(_ items: [String]) -> String { items.map { "`\($0)`" }.joined(separator: ", ") }
        func parameters(_ list: [ParameterDefinition]) -> String {
            list.map { p in
                "`\(p.name)` \(p.type.rawValue)" + (p.isRequired ? ", required" : "")
                    + (p.minLength.map { ", at least \($0) character\($0 == 1 ? "" : "s")" } ?? "")
            }.joined(separator: "; ")
        }
        var lines = ["| state | kind | events it has no row for | action hook |", "|---|---|---|---|"]
        for state in definition.states {
            let unmatched = state.otherEvents == .ignored ? "ignored" : "unexpected"
            lines.append("| `\(state.name)` | \(state.kind.rawValue) | \(unmatched) | \(state.actionHook.map { "`\($0)`" } ?? "") |")
        }
        lines += ["", "| input | parameters | effects in every state |", "|---|---|---|"]
        for event in definition.events {
            lines.append("| event `\(event.name)` | \(parameters(event.parameters)) | \(code(event.effects.map(\.description))) |")
        }
        for action in definition.actions {
            lines.append("| action `\(action.name)` | \(parameters(action.parameters)) |  |")
        }
        lines += ["", "| row | from | event | when | to | hooks | effects | outcome |", "|---|---|---|---|---|---|---|---|"]
        for (index, row) in definition.transitions.enumerated() {
            let target = row.to ?? row.from
            let outcome = row.outcome ?? (target == row.from ? .stayed : .transitioned)
            let cells = [
                Model.rowID(index), "`\(row.from)`", "`\(row.event)`", code(row.when.map(\.description)),
                "`\(target)`", code(row.hooks), code(row.effects.map(\.description)), outcome.rawValue,
            ]
            lines.append("| " + cells.joined(separator: " | ") + " |")
        }
        return lines.joined(separator: "\n")
    }

    @Test("holds each built-in model's states, inputs and rows, in the model's order", arguments: ["ios-app", "android-activity"])
    func tablesMatchTheModel(name: String) throws {
        let text = try String(contentsOf: Self.document, encoding: .utf8)
        let model = try #require(Model.builtins[name])
        let expected = Self.tables(of: model)
        #expect(text.contains(expected), "docs/MODEL.md does not hold the tables of \(name) as the model has them:\n\(expected)")
    }
}
