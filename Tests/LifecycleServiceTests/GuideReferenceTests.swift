import Foundation
import Testing

/// The README, CONTRIBUTING.md, the guides in docs/, the client library's overview and the
/// sample's README cite only what the repository has: every file or folder they link or name
/// in code, and every `make` target they tell the reader to run. A reader follows them step by
/// step, so a renamed file or target must fail here first.
@Suite("guide references", .sqliteOnly("reads the docs; opens no store"))
struct GuideReferenceTests {

    /// The documents checked, from the root: every page in docs/ besides the named ones.
    static func documents() throws -> [String] {
        let guides = try FileManager.default.contentsOfDirectory(atPath: repositoryRoot.appendingPathComponent("docs").path)
            .filter { $0.hasSuffix(".md") }.sorted().map { "docs/" + $0 }
        return ["README.md", "CONTRIBUTING.md", "Sources/LifecycleClient/LifecycleClient.docc/LifecycleClient.md", "Examples/LifecycleSample/README.md"] + guides
    }

    /// What a code span must start with to be taken for a path in the repository: its top-level
    /// folders, and its top-level files by name. (`Info.plist`, `Debug.xcconfig` are the app's.)
    static let repositoryRoots = ["Examples/", "Sources/", "Tests/", "docs/", "Benchmarks/", "Public/"]
    static let repositoryFiles: Set<String> = ["Package.swift", "Makefile", "Dockerfile", "compose.yaml", "openapi.yaml", "README.md"]

    /// What a document cites: paths (a link's target, beside the document, or a code span's,
    /// beside it or from the root) and `make` targets (in code spans and code blocks).
    struct Citations {
        var paths: [(path: String, besideDocument: Bool)] = []
        var makeTargets: Set<String> = []
    }

    static func citations(in text: String) throws -> Citations {
        var found = Citations()
        let link = try NSRegularExpression(pattern: #"\]\(([^)#\s]+)(?:#[\w-]+)?\)"#)
        let span = try NSRegularExpression(pattern: #"`([^`\n]+)`"#)
        let make = try NSRegularExpression(pattern: #"^(?:[A-Z_]+=\S+\s+)*make\s+([a-z][\w-]*)"#)
        var inFence = false
        for line in text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            let range = NSRange(line.startIndex..., in: line)
            if line.hasPrefix("```") {
                inFence.toggle()
                continue
            }
            if inFence {
                if let match = make.firstMatch(in: line, range: range) { found.makeTargets.insert(String(line[Range(match.range(at: 1), in: line)!])) }
                continue
            }
            for match in link.matches(in: line, range: range) {
                let target = String(line[Range(match.range(at: 1), in: line)!])
                if !target.contains(":") { found.paths.append((target, true)) }
            }
            for match in span.matches(in: line, range: range) {
                let code = String(line[Range(match.range(at: 1), in: line)!])
                if let target = make.firstMatch(in: code, range: NSRange(code.startIndex..., in: code)) {
                    found.makeTargets.insert(String(code[Range(target.range(at: 1), in: code)!]))
                } else if repositoryFiles.contains(code) || repositoryRoots.contains(where: code.hasPrefix) {
                    found.paths.append((code, false))
                }
            }
        }
        return found
    }

    /// The targets the Makefile defines (`name:` at the start of a line).
    static func makefileTargets() throws -> Set<String> {
        let makefile = try String(contentsOf: repositoryRoot.appendingPathComponent("Makefile"), encoding: .utf8)
        return Set(makefile.split(separator: "\n").compactMap { line -> String? in
            guard let colon = line.firstIndex(of: ":"), !line.hasPrefix("\t"), !line.contains("=") else { return nil }
            let name = line[..<colon]
            return name.allSatisfy({ $0.isLetter || $0 == "-" }) && !name.isEmpty ? String(name) : nil
        })
    }

    @Test("every file the guides and the client's overview name exists, and every make target they name is the Makefile's")
    func citationsExist() throws {
        let targets = try Self.makefileTargets()
        #expect(targets.isSuperset(of: ["run", "test", "examples-test"]), "the Makefile's targets read as \(targets)")
        var paths = 0
        var missing: [String] = []
        let documents = try Self.documents()
        #expect(documents.contains("docs/IOS-GUIDE.md") && documents.contains("docs/API.md"))
        for document in documents {
            let file = repositoryRoot.appendingPathComponent(document)
            let cited = try Self.citations(in: String(contentsOf: file, encoding: .utf8))
            for (path, besideDocument) in cited.paths {
                // A link leads beside its document, as Markdown's do; a path in code may also be
                // named from the root, as the docs name files.
                let bases = besideDocument ? [file.deletingLastPathComponent()] : [file.deletingLastPathComponent(), repositoryRoot]
                if !bases.contains(where: { FileManager.default.fileExists(atPath: $0.appendingPathComponent(path).standardizedFileURL.path) }) {
                    missing.append("\(document): \(path): no such file")
                }
            }
            for target in cited.makeTargets.subtracting(targets) { missing.append("\(document): make \(target): no such target") }
            paths += cited.paths.count
            if document == "docs/IOS-GUIDE.md" { #expect(cited.makeTargets.isSuperset(of: ["run", "examples-test"])) }
            if document == "README.md" { #expect(cited.makeTargets.isSuperset(of: ["run", "test"])) }
        }
        #expect(paths >= 10, "found only \(paths) paths: the scan is broken")
        #expect(missing.isEmpty, "\(missing.joined(separator: "\n"))")
    }

    @Test("the scan finds links, paths in code and make targets, and leaves the app's own files and prose alone")
    func scanRules() throws {
        let cited = try Self.citations(in: """
            See [the sample](../Examples/LifecycleSample#top) and `Sources/LifecycleClient`, not `Info.plist`;
            run `make examples-test`, then make the app. [Web](https://example.com)
            ```sh
            LIFECYCLED_HOST=0.0.0.0 make run
            ```
            """)
        #expect(cited.paths.map(\.path) == ["../Examples/LifecycleSample", "Sources/LifecycleClient"])
        #expect(cited.paths.map(\.besideDocument) == [true, false])
        #expect(cited.makeTargets == ["examples-test", "run"])
    }
}
