extension Model {
    /// The transition graph in Graphviz's DOT language, the same text for the same model.
    ///
    /// One node per state, in the model's order, with `id` `state-<name>` and `class`
    /// `state <kind>`; one edge per transition row, in table order, with `id` `edge-<row id>`
    /// (``rowID(_:)``) and the event as its label, followed by the row's guard in brackets
    /// (`didFinishLaunching [isTesting == true]`). A row that stays is a loop. Left to right:
    /// stacked loops keep their labels apart, which top to bottom they do not. Kinds are told
    /// apart by attributes alone (never a `style` attribute in the SVG, which a page's
    /// `default-src 'self'` policy would block), so a page can restyle them by class.
    public var dot: String {
        var text = "digraph \(DOT.quoted(name)) {\n"
        text += "  graph [rankdir=LR bgcolor=transparent fontname=\(DOT.font) nodesep=0.4 ranksep=0.5]\n"
        text += "  node [shape=box fontname=\(DOT.font) fontsize=12 margin=\"0.15,0.06\"]\n"
        text += "  edge [fontname=\(DOT.font) fontsize=10]\n"
        for state in definition.states {
            text += "  \(DOT.quoted(state.name)) [id=\(DOT.quoted("state-" + state.name)) "
            text += "class=\(DOT.quoted("state " + state.kind.rawValue)) label=\(DOT.quoted(state.name)) "
            text += DOT.attributes(of: state.kind) + "]\n"
        }
        for (index, row) in definition.transitions.enumerated() {
            var label = row.event
            if !row.when.isEmpty { label += " [" + row.when.map(\.description).joined(separator: ", ") + "]" }
            text += "  \(DOT.quoted(row.from)) -> \(DOT.quoted(row.to ?? row.from)) "
            text += "[id=\(DOT.quoted("edge-" + Model.rowID(index))) label=\(DOT.quoted(label))]\n"
        }
        return text + "}\n"
    }
}

/// Writing DOT text.
enum DOT {
    static let font = quoted("Helvetica,Arial,sans-serif")

    /// How each kind of state looks: the initial state bold and blue, transient ones dashed
    /// (passed through), permanent ones filled (where apps rest), terminal ones grey with a
    /// double border (the usual mark of a final state).
    static func attributes(of kind: StateKind) -> String {
        switch kind {
        case .initial: ##"style="rounded,filled,bold" fillcolor="#dbeafe" color="#1d4ed8" penwidth=2"##
        case .transient: ##"style="rounded,dashed""##
        case .permanent: ##"style="rounded,filled" fillcolor="#dcfce7""##
        case .terminal: ##"style="rounded,filled" fillcolor="#e5e7eb" peripheries=2"##
        }
    }

    /// `text` as a quoted DOT string that Graphviz turns back into `text` in the SVG.
    ///
    /// `\` and `"` are escaped for the DOT lexer and for Graphviz's escape sequences in `id`
    /// and `label` (`\N`, `\n`, ...). `&` becomes `&amp;`: Graphviz copies entity references
    /// into the SVG as they are, so an unescaped `&amp;` in a name would come out as `&`.
    /// XML cannot carry control characters, so each is replaced by U+FFFD. (A node's own name
    /// keeps the doubled backslashes; it shows only as the SVG `<title>`.)
    static func quoted(_ text: String) -> String {
        var quoted = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\\": quoted += "\\\\"
            case "\"": quoted += "\\\""
            case "&": quoted += "&amp;"
            case "\u{0}"..."\u{1F}", "\u{FFFE}", "\u{FFFF}": quoted.unicodeScalars.append("\u{FFFD}")
            default: quoted.unicodeScalars.append(scalar)
            }
        }
        return quoted + "\""
    }
}
