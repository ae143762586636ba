import Foundation
import LifecycleTestSupport
import Testing
@testable import LifecycleService

/// The documentation must say what the code does: docs/CONFIGURATION.md every way
/// lifecycled can be configured (so that a flag added later cannot go undocumented, and one
/// that is gone is not documented), README.md and docs/API.md what their examples answer.
@Suite("README.md, docs/API.md and docs/CONFIGURATION.md")
struct DocumentationTests {

    /// A page of the documentation, by its path from the root.
    static func page(_ path: String) throws -> String {
        try String(contentsOf: repositoryRoot.appendingPathComponent(path), encoding: .utf8)
    }

    /// The pages a reader is sent to: the README, CONTRIBUTING.md and the guides in docs/.
    static func pages() throws -> [String] {
        let guides = try FileManager.default.contentsOfDirectory(atPath: repositoryRoot.appendingPathComponent("docs").path)
            .filter { $0.hasSuffix(".md") }.sorted().map { "docs/" + $0 }
        return ["README.md", "CONTRIBUTING.md"] + guides
    }

    /// Where the flags and variables are documented.
    static func configuration() throws -> String {
        try String(contentsOf: repositoryRoot.appendingPathComponent("docs/CONFIGURATION.md"), encoding: .utf8)
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

    /// Rows of tables whose first cell is a flag: the flag, and the whole row.
    static func documentedFlags(in text: String) -> [String: String] {
        var rows: [String: String] = [:]
        for line in text.split(separator: "\n") where line.hasPrefix("| `--") {
            let flag = line.dropFirst(3).prefix { $0 != "`" }
            rows[String(flag)] = String(line)
        }
        return rows
    }

    /// `LIFECYCLED_*` names in the service's sources: variables read outside the option table too.
    static func variablesInSources() throws -> Set<String> {
        let sources = repositoryRoot.appendingPathComponent("Sources")
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

    @Test("every flag of --help has a docs/CONFIGURATION.md table row naming it and its variable; the table names no other flag")
    func flagsDocumented() throws {
        let options = Self.usageOptions()
        #expect(options.count > 20)
        #expect(options.contains { $0.flag == "--version" } && options.contains { $0.flag == "--help" })
        let rows = Self.documentedFlags(in: try Self.configuration())
        for page in try Self.pages() where page != "docs/CONFIGURATION.md" {
            #expect(Self.documentedFlags(in: try Self.page(page)).isEmpty, "\(page) has a table of flags: they are documented in docs/CONFIGURATION.md, one place")
        }
        let undocumented = options.filter { rows[$0.flag] == nil }.map(\.flag)
        #expect(undocumented.isEmpty, "docs/CONFIGURATION.md has no table row for \(undocumented)")
        let unnamed = options.filter { option in
            guard let variable = option.variable, let row = rows[option.flag] else { return false }
            return !row.contains("`\(variable)`")
        }.map(\.flag)
        #expect(unnamed.isEmpty, "docs/CONFIGURATION.md's rows for \(unnamed) do not name their variables")
        let flags = Set(options.map(\.flag))
        let unknown = rows.keys.sorted().filter { !flags.contains($0) }
        #expect(unknown.isEmpty, "docs/CONFIGURATION.md documents \(unknown), which --help does not list")
    }

    @Test("every LIFECYCLED_* variable the sources name is in docs/CONFIGURATION.md")
    func variablesDocumented() throws {
        let configuration = try Self.configuration()
        let variables = try Self.variablesInSources().union(Self.usageOptions().compactMap(\.variable))
        #expect(variables.contains("LIFECYCLED_PORT") && variables.contains("LIFECYCLED_MAX_SUBSCRIBERS"))
        let missing = variables.sorted().filter { !configuration.contains("`\($0)`") }
        #expect(missing.isEmpty, "docs/CONFIGURATION.md does not mention \(missing)")
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

/// The curl examples of README.md and of docs/API.md, each page's run in order against a live
/// server of its own as one session, with each answer shown in a comment compared with the
/// live one: what a newcomer types is what the service answers, numbers and all.
///
/// A comment right after a command is its answer when it starts with `{` or `...` (JSON; a
/// `#  ` line, with two spaces, continues it) or with `retry:` (a stream's opening text,
/// block by block, through its last blank `#` line). In an answer, `...` stands for anything.
extension DocumentationTests {
    /// One `curl` of a page, with the answer shown after it, if any.
    struct Example: CustomStringConvertible {
        var file: String
        var line: Int
        var method = "GET"
        var path = ""
        var headers: [(String, String)] = []
        var body: [UInt8]?
        var isStream = false
        var answer: String?
        var description: String { "\(file):\(line) \(method) \(path)" }
    }

    /// Every `curl` to the service in the `sh` blocks of `file`, a page, in order.
    static func examples(in file: String) throws -> [Example] {
        let lines = try page(file).components(separatedBy: "\n")
        var examples: [Example] = []
        var inShell = false
        var index = 0
        while index < lines.count {
            let line = lines[index]
            index += 1
            if line.hasPrefix("```") { inShell = !inShell && line == "```sh"; continue }
            guard inShell, line.hasPrefix("curl ") else { continue }
            var command = line
            let start = index
            while command.hasSuffix("\\"), index < lines.count {
                command = String(command.dropLast()) + " " + lines[index].trimmingCharacters(in: .whitespaces)
                index += 1
            }
            var example = try parse(command, file: file, line: start)
            guard !example.path.isEmpty else { continue }
            var answer: [String] = []
            if index < lines.count, let first = commentText(lines[index]) {
                if first.hasPrefix("{") || first.hasPrefix("...") {
                    answer.append(first)
                    index += 1
                    while index < lines.count, let more = commentText(lines[index]), more.hasPrefix(" ") {
                        answer.append(more.trimmingCharacters(in: .whitespaces))
                        index += 1
                    }
                    example.answer = answer.joined()
                } else if first.hasPrefix("retry:") {
                    while index < lines.count, let more = commentText(lines[index]),
                          more.isEmpty || ["retry:", "id:", "event:", "data:"].contains(where: more.hasPrefix) {
                        answer.append(more)
                        index += 1
                    }
                    example.answer = answer.joined(separator: "\n") + "\n"
                }
            }
            examples.append(example)
        }
        return examples
    }

    /// The text of a `# ` comment line (`""` for a bare `#`), or `nil` for another line.
    static func commentText(_ line: String) -> String? {
        if line == "#" { return "" }
        return line.hasPrefix("# ") ? String(line.dropFirst(2)) : nil
    }

    /// A curl command line: `-X`, `-H`, `-d`, `-N`, `-s` and the URL; a `#` word ends it.
    static func parse(_ command: String, file: String, line: Int) throws -> Example {
        var words: [String] = []
        var word: String?
        var quote: Character?
        for character in command {
            if let open = quote {
                if character == open { quote = nil } else { word!.append(character) }
            } else if character == "'" || character == "\"" {
                quote = character
                word = word ?? ""
            } else if character == " " {
                if let done = word { words.append(done) }
                word = nil
            } else if character == "#", word == nil {
                break
            } else {
                word = (word ?? "") + String(character)
            }
        }
        if let done = word { words.append(done) }
        var example = Example(file: file, line: line)
        var rest = words.dropFirst()[...]
        func value(of option: String) throws -> String {
            guard let value = rest.popFirst() else { throw HTTPClientError(description: "\(file):\(line): \(option) without its value") }
            return value
        }
        while let word = rest.popFirst() {
            switch word {
            case "-s": break
            case "-N": example.isStream = true
            case "-X": example.method = try value(of: word)
            case "-H":
                let header = try value(of: word)
                let colon = try #require(header.firstIndex(of: ":"))
                example.headers.append((String(header[..<colon]), header[header.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
            case "-d":
                example.body = Array(try value(of: word).utf8)
                if example.method == "GET" { example.method = "POST" }
            default:
                for prefix in ["http://127.0.0.1:8080", "localhost:8080"] where word.hasPrefix(prefix) {
                    example.path = String(word.dropFirst(prefix.count))
                }
                #expect(!example.path.isEmpty, "\(file):\(line): \(word) is not an option this test knows or the service's URL")
            }
        }
        return example
    }

    /// Whether `text` is `pattern` with each `...` standing for anything (the text around
    /// each `...` trimmed of spaces, as the pages set it off).
    static func matches(_ text: String, _ pattern: String) -> Bool {
        let pieces = pattern.components(separatedBy: "...")
        let trimmed = pieces.enumerated().map { index, piece in
            pieces.count == 1 ? piece : index == 0 ? String(piece.reversed().drop { $0 == " " }.reversed())
                : index == pieces.count - 1 ? String(piece.drop { $0 == " " }) : piece.trimmingCharacters(in: .whitespaces)
        }
        guard text.hasPrefix(trimmed[0]) else { return false }
        var rest = text.dropFirst(trimmed[0].count)
        for (index, piece) in trimmed.enumerated().dropFirst() {
            if index == trimmed.count - 1 { return rest.hasSuffix(piece) }
            guard let found = rest.range(of: piece) else { return false }
            rest = rest[found.upperBound...]
        }
        return rest.isEmpty
    }

    /// Member names of a JSON value, nested ones too, except the parameter names in a
    /// `parameters` object (those are the model's).
    static func memberNames(_ value: Any) -> Set<String> {
        switch value {
        case let object as [String: Any]:
            object.reduce(into: Set(object.keys)) { names, member in
                if member.key != "parameters" { names.formUnion(memberNames(member.value)) }
            }
        case let array as [Any]: array.reduce(into: []) { $0.formUnion(memberNames($1)) }
        default: []
        }
    }

    /// A section's text, from its heading (`## Title`) to the next heading of its level or
    /// above (outside code blocks, where `#` starts a comment).
    static func section(_ title: String, of file: String) throws -> String {
        let lines = try page(file).components(separatedBy: "\n")
        let start = try #require(lines.firstIndex(of: title), "\(file) has no \(title)")
        let level = title.prefix { $0 == "#" }.count
        var inCode = false
        var end = start + 1
        while end < lines.count {
            let line = lines[end]
            if line.hasPrefix("```") { inCode.toggle() }
            let hashes = line.prefix { $0 == "#" }.count
            if !inCode, hashes > 0, hashes <= level, line.dropFirst(hashes).hasPrefix(" ") { break }
            end += 1
        }
        return lines[start..<end].joined(separator: "\n")
    }

    /// One page's examples run against one live server, and what their answers showed.
    final class Session {
        let server: TestServer
        let connection: WireClient
        /// The members of the instances and records the answers and streams held.
        var members: Set<String> = []
        /// The `event:` types the streams named for records.
        var streamTypes: Set<String> = []

        init() throws {
            server = try TestServer()
            connection = try server.connect()
        }

        /// Notes the members of an answer: an instance's or a record's, a history page's, a problem's record.
        func note(_ json: Any, path: String) {
            let isInstanceOrRecord = path.hasPrefix("/v1/instances/") && !path.contains("/history") && !path.contains("/stream")
            if let object = json as? [String: Any], let items = object["items"] as? [Any], path.contains("/history") {
                members.formUnion(DocumentationTests.memberNames(items))
            } else if let object = json as? [String: Any], object["status"] is Int {  // a problem, maybe with its record
                if let record = object["record"] { members.formUnion(DocumentationTests.memberNames(record)) }
            } else if isInstanceOrRecord {
                members.formUnion(DocumentationTests.memberNames(json))
            }
        }

        /// Checks a stream's frames: each record's `event:` is its kind (`record` for an event's).
        func noteStream(_ text: String) {
            var type: String?
            for line in text.split(separator: "\n") {
                if line.hasPrefix("event: ") { type = String(line.dropFirst(7)) }
                guard line.hasPrefix("data: "), let type, !["gap", "reset", "overflow"].contains(type) else { continue }
                let json = try? JSONSerialization.jsonObject(with: Data(line.dropFirst(6).utf8))
                let kind = (json as? [String: Any])?["kind"] as? String
                #expect(type == ["event": "record", "gap": "dropped"][kind ?? ""] ?? kind, "a stream names a \(kind ?? "?") record \(type)")
                streamTypes.insert(type)
                if let json { members.formUnion(DocumentationTests.memberNames(json)) }
            }
        }

        /// Runs the examples in order, each answer compared with the one its page shows.
        func run(_ examples: [Example]) throws {
            for example in examples {
                if example.isStream {
                    let stream = try EventStream(port: server.port, path: example.path, headers: example.headers)
                    #expect(stream.status == 200, "\(example)")
                    guard let answer = example.answer else { continue }
                    let blocks = answer.components(separatedBy: "\n\n").count - 1
                    let text = stream.text(blocks: blocks, timeout: 5)
                    #expect(DocumentationTests.matches(text, answer), "\(example) answered\n\(text)\nnot as \(example.file) shows:\n\(answer)")
                    noteStream(text)
                    continue
                }
                let response = try connection.request(example.method, example.path, headers: example.headers, body: example.body, contentType: nil)
                let text = String(response.text.dropLast())  // the newline ending every body
                if let answer = example.answer {
                    #expect(DocumentationTests.matches(text, answer), "\(example) answered\n\(text)\nnot as \(example.file) shows:\n\(answer)")
                }
                if let json = try? JSONSerialization.jsonObject(with: Data(response.body)) { note(json, path: example.path) }
            }
        }
    }

    @Test("README.md's taste answers what it shows, its stream too, on a fresh server")
    func taste() throws {
        let examples = try Self.examples(in: "README.md")
        #expect(examples.count >= 4)
        #expect(examples.filter { $0.answer != nil }.count == examples.count, "README.md shows a curl without its answer")
        #expect(examples.contains { $0.isStream && $0.answer?.contains("event: record") == true }, "README.md shows no stream with records")
        let session = try Session()
        try session.run(examples)
        #expect(session.streamTypes == ["created", "record"])
    }

    @Test("docs/API.md's curl examples answer what it shows, streams too; every member of an instance or a record is in \"Words you will meet\"")
    func walkThrough() throws {
        let file = "docs/API.md"
        let examples = try Self.examples(in: file)
        #expect(examples.count > 15)
        #expect(examples.contains { $0.isStream && $0.answer?.contains("\nid: ") == true && $0.answer?.contains("event:") == false },
                "\(file) shows no stream opening at now, with its bare id:")
        #expect(examples.contains { $0.isStream && $0.answer?.contains("event: ") == true }, "\(file) shows no stream with records")
        let session = try Session()
        try session.run(examples)
        // Members the walk-through may not show: an action replaced, delivered, cleared; a
        // window changed; a deletion, as streamed.
        let extra = try EventStream(port: session.server.port, path: "/v1/stream")
        for (path, body) in [
            ("PUT /v1/instances/words", nil), ("POST /v1/instances/words/actions", #"{"action": "openURL", "url": "https://a.example"}"#),
            ("POST /v1/instances/words/actions", #"{"action": "openURL", "url": "https://b.example"}"#), ("GET /v1/instances/words", nil),
            ("POST /v1/instances/words/events", #"{"event": "didFinishLaunching"}"#),
            ("POST /v1/instances/words/events", #"{"event": "willConnectToWindow", "window": "main"}"#),
            ("POST /v1/instances/words/events", #"{"event": "willConnectToWindow", "window": "other"}"#),
            ("POST /v1/instances/words/events", #"{"event": "didBecomeActive"}"#),
            ("POST /v1/instances/words/events", #"{"event": "didEnterBackground"}"#),
            ("POST /v1/instances/words/actions", #"{"action": "openURL", "url": "https://c.example"}"#),
            ("POST /v1/instances/words/events", #"{"event": "didEnterBackground"}"#),
            ("POST /v1/instances/words/relaunches", nil), ("POST /v1/instances/words/gaps", #"{"dropped": 3}"#), ("GET /v1/instances/words", nil), ("DELETE /v1/instances/words", nil),
        ] as [(String, String?)] {
            let parts = path.split(separator: " ")
            let response = try session.connection.request(String(parts[0]), String(parts[1]), body: body.map { Array($0.utf8) })
            #expect(response.status < 300, "\(path)")
            if let json = try? JSONSerialization.jsonObject(with: Data(response.body)) { session.note(json, path: String(parts[1])) }
        }
        session.noteStream(extra.text(blocks: 2 + 13, timeout: 5))  // retry:, id:, then a record per write
        for name in ["window", "kind", "instance", "parameters", "windowChanged", "disposition", "replacedAction", "deliveredAction", "clearedAction", "model", "state", "dropped"] {
            #expect(session.members.contains(name), "the session never showed \(name)")
        }
        let words = try Self.section("## Words you will meet", of: file)
        let undocumented = session.members.sorted().filter { !words.contains("`\($0)`") }
        #expect(undocumented.isEmpty, "\(file)'s \"Words you will meet\" does not name \(undocumented)")
        #expect(session.streamTypes == ["record", "action", "relaunch", "dropped", "created", "deleted"])
        let streams = try Self.section("## Watching records live", of: file)
        let unnamed = session.streamTypes.sorted().filter { !streams.contains("`\($0)`") }
        #expect(unnamed.isEmpty, "\(file)'s streams section does not name the event types \(unnamed)")
    }
}
