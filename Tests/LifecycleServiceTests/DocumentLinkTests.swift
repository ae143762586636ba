import Foundation
import Testing

/// Every reference to a Markdown file, in the docs and in the code's comments, names a file
/// in the repository, and every `#anchor` a heading that file has: the docs the code cites
/// are the repository's own, and a renamed section breaks a test instead of a reader's link.
@Suite("Markdown references", .sqliteOnly("reads the docs; opens no store"))
struct DocumentLinkTests {

    /// The files whose references are checked: docs, sources, tests, the spec, the dashboard.
    /// Scripts are left out: the benchmarks' write Markdown files that exist only after a run.
    static let checkedExtensions: Set<String> = ["md", "swift", "yaml", "js", "html"]

    /// A reference as written: the file it sits in, its line, the path and the anchor.
    struct Reference: CustomStringConvertible {
        var file: String
        var line: Int
        var path: String
        var anchor: String?
        var description: String { "\(file):\(line): \(path)\(anchor.map { "#\($0)" } ?? "")" }
    }

    /// Files under the root, relative to it, skipping build output and hidden folders.
    static func files() throws -> [String] {
        let enumerator = try #require(FileManager.default.enumerator(
            at: repositoryRoot, includingPropertiesForKeys: [.isDirectoryKey], options: [.skipsHiddenFiles]))
        var found: [String] = []
        for case let url as URL in enumerator {
            let relative = String(url.path.dropFirst(repositoryRoot.path.count + 1))
            if relative == "Benchmarks/results" || relative.hasPrefix("node_modules") { enumerator.skipDescendants() }
            if checkedExtensions.contains(url.pathExtension) { found.append(relative) }
        }
        return found.sorted()
    }

    /// GitHub's anchors for a Markdown text's headings: lower case, punctuation but `-` and `_`
    /// dropped, spaces as `-`, and `-1`, `-2`… on repeats.
    static func anchors(in markdown: String) -> Set<String> {
        var seen: [String: Int] = [:]
        var anchors: Set<String> = []
        var inFence = false
        for line in markdown.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("```") { inFence.toggle() }
            guard !inFence, line.hasPrefix("#") else { continue }
            let title = line.drop { $0 == "#" }.trimmingCharacters(in: .whitespaces)
            let slug = String(title.lowercased().unicodeScalars.compactMap { scalar -> Character? in
                if scalar == " " { return "-" }
                if CharacterSet.alphanumerics.contains(scalar) || scalar == "-" || scalar == "_" { return Character(scalar) }
                return nil
            })
            let count = seen[slug, default: 0]
            seen[slug] = count + 1
            anchors.insert(count == 0 ? slug : "\(slug)-\(count)")
        }
        return anchors
    }

    /// The Markdown references in a text: paths ending in `.md` with an optional anchor, and in
    /// Markdown files the links to an anchor of the same file (`](#words-you-will-meet)`).
    static func references(in text: String, file: String) throws -> [Reference] {
        let path = try NSRegularExpression(pattern: #"(?<![\w/.-])((?:\.{1,2}/)*[A-Za-z0-9_][\w./-]*\.md)(?:#([\w-]+))?"#)
        let local = try NSRegularExpression(pattern: #"\]\(#([\w-]+)\)"#)
        var found: [Reference] = []
        for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = String(line)
            let range = NSRange(line.startIndex..., in: line)
            for match in path.matches(in: line, range: range) {
                let target = String(line[Range(match.range(at: 1), in: line)!])
                let anchor = Range(match.range(at: 2), in: line).map { String(line[$0]) }
                found.append(Reference(file: file, line: index + 1, path: target, anchor: anchor))
            }
            if file.hasSuffix(".md") {
                for match in local.matches(in: line, range: range) {
                    let anchor = String(line[Range(match.range(at: 1), in: line)!])
                    found.append(Reference(file: file, line: index + 1, path: (file as NSString).lastPathComponent, anchor: anchor))
                }
            }
        }
        return found
    }

    /// Where a reference leads: beside the file that makes it (as Markdown links go), else from
    /// the repository's root (as comments name files).
    static func resolve(_ reference: Reference) -> URL? {
        let beside = repositoryRoot.appendingPathComponent(reference.file).deletingLastPathComponent()
            .appendingPathComponent(reference.path).standardizedFileURL
        let fromRoot = repositoryRoot.appendingPathComponent(reference.path).standardizedFileURL
        return [beside, fromRoot].first { FileManager.default.fileExists(atPath: $0.path) }
    }

    @Test("every .md file and #anchor that a doc, a source or a test cites exists")
    func referencesResolve() throws {
        var references: [Reference] = []
        for file in try Self.files() {
            let text = try String(contentsOf: repositoryRoot.appendingPathComponent(file), encoding: .utf8)
            references += try Self.references(in: text, file: file)
        }
        #expect(references.count > 50, "found only \(references.count) references: the scan is broken")
        #expect(references.contains { $0.path == "docs/MODEL.md" && $0.file.hasPrefix("Sources/") })
        var broken: [String] = []
        for reference in references {
            guard let target = Self.resolve(reference) else {
                broken.append("\(reference): no such file")
                continue
            }
            if let anchor = reference.anchor {
                let text = try String(contentsOf: target, encoding: .utf8)
                if !Self.anchors(in: text).contains(anchor) { broken.append("\(reference): no such heading") }
            }
        }
        #expect(broken.isEmpty, "broken references:\n\(broken.joined(separator: "\n"))")
    }

    @Test("anchors are GitHub's: punctuation dropped, spaces as hyphens, repeats numbered")
    func anchorRules() {
        let anchors = Self.anchors(in: "# A walk-through with `curl`\n## On a network: token, and rate limits\n## Notes\n## Notes\n```\n# not a heading\n```\n")
        #expect(anchors == ["a-walk-through-with-curl", "on-a-network-token-and-rate-limits", "notes", "notes-1"])
    }
}
