import CLifecycleGraphviz
import Foundation
import LifecycleLocks

/// Why Graphviz could not draw a graph.
public struct GraphvizError: Error, Sendable, CustomStringConvertible {
    /// What was being done: `start`, `parse`, `layout` or `render`.
    public var operation: String
    /// What Graphviz reported, its lines joined.
    public var message: String

    public var description: String { "Graphviz could not \(operation): \(message)" }
}

/// Draws DOT as SVG with Graphviz's C library (the `dot` layout).
///
/// Graphviz keeps process-wide state (its error handler, the graph library's string pool,
/// the loaded plugins), so every drawing in the process runs under one lock, with one
/// context made on first use and kept.
public enum Graphviz {
    /// The SVG document for a DOT graph, ending with a newline. Its DOCTYPE (which names a
    /// DTD on the web) is left out so a page can inline the document as it is.
    public static func svg(fromDOT dot: String) throws(GraphvizError) -> [UInt8] {
        try context.withLock { context throws(GraphvizError) in
            Messages.clear()
            if context == nil { context = try Context() }
            let graph = try Graph(dot: dot)
            try graph.layOut(in: context!)
            return withoutDoctype(try graph.render(in: context!, format: "svg"))
        }
    }

    /// Made on first use: loading the plugins takes tens of milliseconds.
    private static let context = LockedValue<Context?>(nil)

    private static func withoutDoctype(_ svg: [UInt8]) -> [UInt8] {
        var text = String(decoding: svg, as: UTF8.self)
        if let start = text.firstRange(of: "<!DOCTYPE"), let end = text[start.upperBound...].firstIndex(of: ">") {
            let next = text.index(after: end)
            text.removeSubrange(start.lowerBound..<(next < text.endIndex && text[next] == "\n" ? text.index(after: next) : next))
        }
        if !text.hasSuffix("\n") { text += "\n" }
        return Array(text.utf8)
    }
}

/// Graphviz's result codes (0 for success, or a null pointer) as thrown errors, carrying
/// what Graphviz reported since the drawing began.
private func check(_ succeeded: Bool, _ operation: String) throws(GraphvizError) {
    guard !succeeded else { return }
    let message = Messages.take()
    throw GraphvizError(operation: operation, message: message.isEmpty ? "no reason given" : message)
}

/// What Graphviz reports while drawing, which it would otherwise print on stderr. Its error
/// handler is a C function without a context argument, so the reports go to a global;
/// only the thread holding Graphviz's lock draws, so they are that drawing's.
private enum Messages {
    /// The pieces Graphviz hands over (`Error`, `: `, `syntax error in line 1 near '}'`).
    private static let pieces = LockedValue<[String]>([])

    static func clear() { pieces.withLock { $0.removeAll() } }

    /// The pieces reported so far as one line, and none kept.
    static func take() -> String {
        let text = pieces.withLock { pieces in defer { pieces.removeAll() }; return pieces.joined() }
        return text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }.joined(separator: " ")
    }

    /// Installed once, when the context is made.
    static let handler: agusererrf = { piece in
        if let piece { pieces.withLock { $0.append(String(cString: piece)) } }
        return 0
    }
}

/// Graphviz's context (GVC_t): its plugins, found through the configuration libgvc6 installs.
private final class Context {
    let pointer: OpaquePointer

    init() throws(GraphvizError) {
        agseterrf(Messages.handler)
        let pointer = gvContext()
        try check(pointer != nil, "start")
        self.pointer = pointer!
    }

    deinit { gvFreeContext(pointer) }
}

/// A graph parsed from DOT (agmemread), with its layout once laid out.
private final class Graph {
    let pointer: UnsafeMutablePointer<Agraph_t>
    /// Set before laying out, so that a layout that failed half-way is freed too.
    private var layoutContext: Context?

    /// The first graph in `dot`, as agmemread reads it; anything after it is dropped.
    init(dot: String) throws(GraphvizError) {
        // Graphviz 2.42's lexer keeps its line count, and what it read past a graph's end
        // (the rest of that line), from one read to the next: the count is reset here and
        // the rest read and dropped below, so the next text is read from its own start
        // (and a syntax error names its own line).
        agreadline(1)
        let pointer = agmemread(dot)
        try check(pointer != nil, "parse")
        self.pointer = pointer!
        while let rest = agmemread("") { agclose(rest) }
    }

    func layOut(in context: Context) throws(GraphvizError) {
        layoutContext = context
        try check(gvLayout(context.pointer, pointer, "dot") == 0, "layout")
    }

    func render(in context: Context, format: String) throws(GraphvizError) -> [UInt8] {
        var data: UnsafeMutablePointer<CChar>?
        var length: UInt32 = 0
        try check(gvRenderData(context.pointer, pointer, format, &data, &length) == 0 && data != nil, "render")
        // The buffer is Graphviz's, freed at once after the copy.
        defer { gvFreeRenderData(data) }
        return data!.withMemoryRebound(to: UInt8.self, capacity: Int(length)) { Array(UnsafeBufferPointer(start: $0, count: Int(length))) }
    }

    deinit {
        if let layoutContext { gvFreeLayout(layoutContext.pointer, pointer) }
        agclose(pointer)
    }
}
