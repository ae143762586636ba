import Foundation
import Testing

/// The container's build stage copies every folder the package names. SwiftPM checks that each
/// target's folder exists, benchmarks and tests included, even to build one product, so a target
/// added with a `path:` the Dockerfile does not copy breaks only `podman build`, the slowest
/// step of `make test`; this finds it in a second.
@Suite("Dockerfile", .sqliteOnly("reads the Dockerfile; opens no store"))
struct DockerfileTests {

    /// The folders the package's targets live in: each `path:`, and the default folders.
    static func packageFolders(_ manifest: String) throws -> Set<String> {
        let path = try NSRegularExpression(pattern: #"path:\s*"([^"]+)""#)
        let named = path.matches(in: manifest, range: NSRange(manifest.startIndex..., in: manifest)).map {
            String(manifest[Range($0.range(at: 1), in: manifest)!])
        }
        return Set(named + ["Sources", "Tests"])
    }

    /// What the build context gives the build: each `COPY source… destination` that copies from
    /// the context (not `--from` another stage).
    static func copiedSources(_ dockerfile: String) -> [String] {
        dockerfile.split(separator: "\n").compactMap { line -> [String]? in
            let words = line.split(separator: " ").map(String.init)
            guard words.first == "COPY", !words.contains(where: { $0.hasPrefix("--from") }), words.count >= 3 else { return nil }
            return Array(words[1..<(words.count - 1)])
        }.flatMap { $0 }
    }

    static func isCovered(_ folder: String, by sources: [String]) -> Bool {
        sources.contains { folder == $0 || folder.hasPrefix($0 + "/") }
    }

    @Test("the build stage copies every target's folder that Package.swift names")
    func copiesEveryTargetFolder() throws {
        let manifest = try String(contentsOf: repositoryRoot.appendingPathComponent("Package.swift"), encoding: .utf8)
        let dockerfile = try String(contentsOf: repositoryRoot.appendingPathComponent("Dockerfile"), encoding: .utf8)
        let folders = try Self.packageFolders(manifest)
        #expect(folders.contains("Benchmarks/http-layer"))
        let sources = Self.copiedSources(dockerfile)
        let missing = folders.filter { !Self.isCovered($0, by: sources) }.sorted()
        #expect(missing.isEmpty, "the Dockerfile copies none of \(missing); podman build would fail with 'invalid custom path'")
    }

    @Test("the reading rules: a folder is covered by itself or a parent, not by a name it merely starts with")
    func readingRules() throws {
        let sources = Self.copiedSources("COPY Package.swift ./\nCOPY Sources Sources\nCOPY --from=build /out/x /usr/bin/x\nCOPY Benchmarks/a Benchmarks/a\n")
        #expect(sources == ["Package.swift", "Sources", "Benchmarks/a"])
        #expect(Self.isCovered("Sources/Kit", by: sources))
        #expect(Self.isCovered("Benchmarks/a", by: sources))
        #expect(!Self.isCovered("Benchmarks/ab", by: sources))
        #expect(!Self.isCovered("/out/x", by: sources))
        #expect(try Self.packageFolders(#".target(name: "a", path: "Benchmarks/a")"#) == ["Benchmarks/a", "Sources", "Tests"])
    }
}
