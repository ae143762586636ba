import Foundation
import Testing
@testable import LifecycleService

/// README.md must document every way lifecycled can be configured, so that a flag added
/// later cannot go undocumented, and must not document one that is gone.
@Suite("README.md")
struct DocumentationTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func readme() throws -> String {
        try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
    }

    /// The options `--help` lists: each flag, with the variable named in brackets at the end
    /// of its line (`nil` for `--help` and `--version`, which have none).
    static func usageOptions() -> [(flag: String, variable: String?)] {
        Configuration.usage.split(separator: "\n").compactMap { line in
            guard line.hasPrefix("  --") else { return nil }
            let flag = String(line.dropFirst(2).prefix { $0 != " " })
            var variable: String?
            if line.hasSuffix("]"), let open = line.lastIndex(of: "[") {
                variable = String(line[line.index(after: open)..<line.index(before: line.endIndex)])
            }
            return (flag, variable)
        }
    }

    /// Rows of README tables whose first cell is a flag: the flag, and the whole row.
    static func documentedFlags(in readme: String) -> [String: String] {
        var rows: [String: String] = [:]
        for line in readme.split(separator: "\n") where line.hasPrefix("| `--") {
            let flag = line.dropFirst(3).prefix { $0 != "`" }
            rows[String(flag)] = String(line)
        }
        return rows
    }

    /// `LIFECYCLED_*` names in the service's sources: variables read outside the option table too.
    static func variablesInSources() throws -> Set<String> {
        let sources = root.appendingPathComponent("Sources")
        let files = try #require(FileManager.default.enumerator(at: sources, includingPropertiesForKeys: nil))
        let pattern = try NSRegularExpression(pattern: "LIFECYCLED_[A-Z0-9_]*[A-Z0-9]")
        var names: Set<String> = []
        for case let file as URL in files where file.pathExtension == "swift" {
            let text = try String(contentsOf: file, encoding: .utf8)
            for match in pattern.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
                names.insert(String(text[Range(match.range, in: text)!]))
            }
        }
        return names
    }

    @Test("every flag of --help has a README table row naming it and its variable; the table names no other flag")
    func flagsDocumented() throws {
        let options = Self.usageOptions()
        #expect(options.count > 20)
        #expect(options.contains { $0.flag == "--version" } && options.contains { $0.flag == "--help" })
        let rows = Self.documentedFlags(in: try Self.readme())
        let undocumented = options.filter { rows[$0.flag] == nil }.map(\.flag)
        #expect(undocumented.isEmpty, "README.md has no table row for \(undocumented)")
        let unnamed = options.filter { option in
            guard let variable = option.variable, let row = rows[option.flag] else { return false }
            return !row.contains("`\(variable)`")
        }.map(\.flag)
        #expect(unnamed.isEmpty, "README.md's rows for \(unnamed) do not name their variables")
        let flags = Set(options.map(\.flag))
        let unknown = rows.keys.sorted().filter { !flags.contains($0) }
        #expect(unknown.isEmpty, "README.md documents \(unknown), which --help does not list")
    }

    @Test("every LIFECYCLED_* variable the sources name is in README.md")
    func variablesDocumented() throws {
        let readme = try Self.readme()
        let variables = try Self.variablesInSources().union(Self.usageOptions().compactMap(\.variable))
        #expect(variables.contains("LIFECYCLED_PORT") && variables.contains("LIFECYCLED_MAX_SUBSCRIBERS"))
        let missing = variables.sorted().filter { !readme.contains("`\($0)`") }
        #expect(missing.isEmpty, "README.md does not mention \(missing)")
    }

    @Test("--version prints the version from its one place and exits 0")
    func version() throws {
        #expect(throws: Configuration.ParseError.versionRequested) {
            try Configuration.parse(arguments: ["--port", "1", "--version"], environment: [:])
        }
        let run = try LifecycledProcess(arguments: ["--version"]).finish()
        #expect(run.status == 0)
        #expect(run.stdout == "lifecycled \(Configuration.version)\n")
        #expect(Configuration.version.split(separator: ".").count == 3)
        // And the start-up line says which version is serving.
        let data = TemporaryDirectory()
        let server = try LifecycledProcess.serving(dataDirectory: data.path)
        server.signal(SIGTERM)
        let served = server.finish()
        #expect(served.status == 0)
        let started = served.stderr.split(separator: "\n").first { $0.contains("lifecycled started") } ?? ""
        #expect(started.hasSuffix(" version=\(Configuration.version)"), "\(served.stderr)")
    }
}
