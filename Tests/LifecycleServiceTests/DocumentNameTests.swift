import Foundation
import LifecycleTestSupport
import Testing
@testable import LifecycleHTTP
@testable import LifecycleService

/// Every `lifecycled` command, route and metric that a page of the docs names exists: the
/// commands as the binary runs them, the routes as the service's own router resolves them,
/// the metrics as `GET /metrics` exposes them. A renamed command, route or metric, or a page
/// that names one that never was, fails here before a reader types it.
@Suite("names in the docs", .sqliteOnly("reads the docs; its router's store is never written"))
struct DocumentNameTests {
    /// One name a page uses, and where.
    struct Name: CustomStringConvertible, Equatable {
        var file: String
        var line: Int
        /// The command's word, or the route's path (without its query).
        var text: String
        /// The method written before a path (`GET /v1/models`), if any.
        var method: String?
        var description: String { "\(file):\(line): \(method.map { "\($0) " } ?? "")\(text)" }
    }

    /// Code blocks whose lines are commands a reader runs (a shell, a CI job's steps); other
    /// languages (Swift, XML, JSON) only mention the binary.
    static let commandFences: Set<String> = ["", "sh", "shell", "bash", "console", "yaml", "groovy"]

    /// `lifecycled WORD` in code: in a command block, anywhere on a line (a `#` comment left
    /// out); in a code span, only at its start (`lifecycled check`, not a quoted log line).
    static func commands(in text: String, file: String) throws -> [Name] {
        let command = try NSRegularExpression(pattern: #"(?<![\w./=-])lifecycled ([a-z][a-z-]*)(?![\w:-])"#)
        let span = try NSRegularExpression(pattern: #"`([^`\n]+)`"#)
        var found: [Name] = []
        var fence: String?
        for (index, line) in text.components(separatedBy: "\n").enumerated() {
            if line.hasPrefix("```") {
                fence = fence == nil ? String(line.dropFirst(3)).trimmingCharacters(in: .whitespaces) : nil
                continue
            }
            var pieces: [String] = []
            if let fence {
                guard commandFences.contains(fence) else { continue }
                pieces = [line.components(separatedBy: " #").first.map { $0.hasPrefix("#") ? "" : $0 } ?? ""]
            } else {
                pieces = span.matches(in: line, range: NSRange(line.startIndex..., in: line))
                    .map { String(line[Range($0.range(at: 1), in: line)!]) }.filter { $0.hasPrefix("lifecycled ") }
            }
            for piece in pieces {
                for match in command.matches(in: piece, range: NSRange(piece.startIndex..., in: piece)) {
                    found.append(Name(file: file, line: index + 1, text: String(piece[Range(match.range(at: 1), in: piece)!])))
                }
            }
        }
        return found
    }

    /// The service's paths a page names: those under the first segment of a route (`/v1/…`,
    /// `/healthz`, `/problems/…`), with the method written before one, and the path of every
    /// `http://host:port/…` or `localhost:port/…` address. Queries and fragments are left off.
    static func routes(in text: String, file: String, roots: Set<String>) throws -> [Name] {
        let alternatives = roots.sorted().map(NSRegularExpression.escapedPattern(for:)).joined(separator: "|")
        let tail = #"[^\s`'"()\[\],|\\]*"#
        let path = try NSRegularExpression(pattern: #"(?:\b(GET|HEAD|POST|PUT|DELETE|PATCH) )?(?<![\w.:/-])(/(?:"# + alternatives + #")(?:[/?]"# + tail + #")?)(?![\w-])"#)
        let address = try NSRegularExpression(pattern: #"(?:https?://[A-Za-z0-9.\[\]-]+|\blocalhost):[0-9]+(/"# + tail + ")")
        func bare(_ path: String) -> String {
            String(path.prefix { $0 != "?" && $0 != "#" }.reversed().drop { ".:;".contains($0) }.reversed())
        }
        var found: [Name] = []
        for (index, line) in text.components(separatedBy: "\n").enumerated() {
            let range = NSRange(line.startIndex..., in: line)
            for match in path.matches(in: line, range: range) {
                let method = Range(match.range(at: 1), in: line).map { String(line[$0]) }
                found.append(Name(file: file, line: index + 1, text: bare(String(line[Range(match.range(at: 2), in: line)!])), method: method))
            }
            for match in address.matches(in: line, range: range) {
                found.append(Name(file: file, line: index + 1, text: bare(String(line[Range(match.range(at: 1), in: line)!]))))
            }
        }
        return found
    }

    /// The commands `lifecycled --help` lists (`lifecycled NAME [options]` lines).
    static func subcommands() -> Set<String> {
        Set(Configuration.usage.split(separator: "\n").compactMap { line -> String? in
            let words = line.split(separator: " ").drop { $0 == "usage:" }
            guard words.count >= 2, words.first == "lifecycled" else { return nil }
            let word = words[words.startIndex + 1]
            return word.allSatisfy(\.isLowercase) ? String(word) : nil
        })
    }

    /// The router the service answers with, as `RouteTableTests` builds it.
    static func router(of server: TestServer) throws -> Router {
        let service = try #require(server.service)
        return API(registry: service.registry, staticFiles: nil, metrics: service.metrics).makeRouter()
    }

    /// The first segment of each route's pattern: what makes a path in a page the service's.
    static func roots(of router: Router) -> Set<String> {
        Set(router.routeList.compactMap { $0.pattern.split(separator: "/").first.map(String.init) })
    }

    /// The names that no command is.
    static func unknownCommands(_ names: [Name], known: Set<String>) -> [Name] {
        names.filter { !known.contains($0.text) }
    }

    /// The paths that no route (of their method, when one is written) resolves, nor the
    /// dashboard's files: `/` and what is in `Public/`.
    static func unknownRoutes(_ names: [Name], router: Router, publicDirectory: URL) -> [Name] {
        names.filter { name in
            var request = Request(method: name.method ?? "GET", path: name.text)
            router.resolve(&request)
            if name.method != nil { return request.endpoint == nil }
            if request.route != Router.fallbackTemplate { return false }
            let isFile = FileManager.default.fileExists(atPath: publicDirectory.appendingPathComponent(name.text).path)
            return !(name.text == "/" || !name.text.hasPrefix("/v1") && isFile)
        }
    }

    static let publicDirectory = repositoryRoot.appendingPathComponent("Public")

    @Test("every command --help lists is one the binary runs, each with its own --help; another word is a bad command line")
    func commandsRun() throws {
        let commands = Self.subcommands()
        #expect(commands == ["healthcheck", "post", "action", "relaunch", "create", "flush", "tail", "check"], "\(commands)")
        for command in commands {
            let run = try LifecycledProcess(arguments: [command, "--help"]).finish()
            #expect(run.status == 0 && run.stdout.contains("lifecycled \(command) "), "lifecycled \(command) --help: \(run.status) \(run.stdout) \(run.stderr)")
        }
        let bogus = try LifecycledProcess(arguments: ["bogus"]).finish()
        #expect(bogus.status == 2, "lifecycled bogus: \(bogus.status) \(bogus.stderr)")
    }

    @Test("every `lifecycled COMMAND` in README.md, CONTRIBUTING.md and docs/ is a command lifecycled has")
    func commandsNamed() throws {
        var names: [Name] = []
        for page in try DocumentationTests.pages() {
            names += try Self.commands(in: DocumentationTests.page(page), file: page)
        }
        #expect(names.count > 30, "found only \(names.count) commands: the scan is broken")
        #expect(Set(names.map(\.text)).isSuperset(of: ["post", "tail", "check", "flush", "healthcheck"]))
        let unknown = Self.unknownCommands(names, known: Self.subcommands())
        #expect(unknown.isEmpty, "no such command:\n\(unknown.map(\.description).joined(separator: "\n"))")
    }

    @Test("every route README.md, CONTRIBUTING.md and docs/ name, with its method where written, is one the router has")
    func routesNamed() throws {
        let server = try TestServer(.router)
        let router = try Self.router(of: server)
        let roots = Self.roots(of: router)
        #expect(roots == ["healthz", "metrics", "problems", "v1"])
        var names: [Name] = []
        for page in try DocumentationTests.pages() {
            names += try Self.routes(in: DocumentationTests.page(page), file: page, roots: roots)
        }
        #expect(names.count > 100, "found only \(names.count) paths: the scan is broken")
        #expect(names.contains { $0.method == "POST" && $0.text == "/v1/batch" })
        let unknown = Self.unknownRoutes(names, router: router, publicDirectory: Self.publicDirectory)
        #expect(unknown.isEmpty, "no such route:\n\(unknown.map(\.description).joined(separator: "\n"))")
        // A problem's page the docs name is one the service has.
        let c = server.router()
        for name in names where name.text.hasPrefix("/problems/") && !name.text.contains("{") && !name.text.contains("<") {
            #expect(try c.request("GET", name.text).status == 200, "\(name)")
        }
    }

    /// `lifecycled_*` names in a text: metric families, or a histogram's series of one.
    static func metrics(in text: String, file: String) throws -> [Name] {
        let metric = try NSRegularExpression(pattern: #"\blifecycled_[a-z_]*[a-z]"#)
        return text.components(separatedBy: "\n").enumerated().flatMap { index, line in
            metric.matches(in: line, range: NSRange(line.startIndex..., in: line)).map {
                Name(file: file, line: index + 1, text: String(line[Range($0.range, in: line)!]))
            }
        }
    }

    @Test("every metric a page names is one GET /metrics exposes, and docs/METRICS.md lists every one")
    func metricsNamed() throws {
        let server = try TestServer(.router)
        let exposition = try #require(server.service?.metrics).exposition()
        let families = Set(exposition.split(separator: "\n").compactMap { line -> String? in
            line.hasPrefix("# TYPE ") ? line.split(separator: " ").dropFirst(2).first.map(String.init) : nil
        })
        #expect(families.count > 15 && families.contains("lifecycled_transitions_total"))
        var names: [Name] = []
        for page in try DocumentationTests.pages() {
            names += try Self.metrics(in: DocumentationTests.page(page), file: page)
        }
        let unknown = names.filter { name in
            !families.contains(name.text) && !["_bucket", "_sum", "_count"].contains { name.text.hasSuffix($0) && families.contains(String(name.text.dropLast($0.count))) }
        }
        #expect(unknown.isEmpty, "no such metric:\n\(unknown.map(\.description).joined(separator: "\n"))")
        let listed = Set(names.filter { $0.file == "docs/METRICS.md" }.map(\.text))
        #expect(families.subtracting(listed).isEmpty, "docs/METRICS.md does not list \(families.subtracting(listed).sorted())")
    }

    @Test("the scans find commands and routes in code and prose as a reader sees them, and the checks refuse what does not exist")
    func scanRules() throws {
        let text = """
            Run `lifecycled tail --divergent`, or `lifecycled bogus`; it logs `msg="lifecycled started"`.
            lifecycled is a service, and `GET /v1/models` or POST /v1/bogus, or `DELETE /v1/models/{model}`.
            ```sh
            lifecycled check --label run=1 # lifecycled ignored
            docker run -v lifecycled-data:/data lifecycled --port 8080
            curl http://127.0.0.1:8080/v1/instances/x/history?after=0 http://127.0.0.1:8080/nowhere
            ```
            ```swift
            print("lifecycled reporter:", event)
            ```
            See /healthz, /problems/<kind>, Tests/metrics/parse.py and /v1/instances/…/stream.
            """
        let commands = try Self.commands(in: text, file: "t")
        #expect(commands.map(\.text) == ["tail", "bogus", "check"])
        #expect(Self.unknownCommands(commands, known: Self.subcommands()).map(\.text) == ["bogus"])
        let server = try TestServer(.router)
        let router = try Self.router(of: server)
        let routes = try Self.routes(in: text, file: "t", roots: Self.roots(of: router))
        #expect(routes.map(\.description) == [
            "t:2: GET /v1/models", "t:2: POST /v1/bogus", "t:2: DELETE /v1/models/{model}",
            "t:6: /v1/instances/x/history", "t:6: /nowhere", "t:11: /healthz", "t:11: /problems/<kind>", "t:11: /v1/instances/…/stream",
        ])
        let unknown = Self.unknownRoutes(routes, router: router, publicDirectory: Self.publicDirectory)
        #expect(unknown.map(\.description) == ["t:2: POST /v1/bogus", "t:2: DELETE /v1/models/{model}", "t:6: /nowhere"])
    }
}
