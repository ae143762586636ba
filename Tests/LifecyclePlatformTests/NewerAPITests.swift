import Foundation
import Testing

/// The client library's sources (LifecycleClient and the modules it depends on) against the APIs
/// newer than its oldest systems (iOS 15, macOS 12).
///
/// No Apple SDK exists on the Linux machines that build and test this package, so nothing here
/// compiles them for iOS; this audit is what stands between them and an
/// API an app that supports iOS 15 cannot link. The list is `NewerAPIs.txt`, beside this file.
@Suite("APIs newer than iOS 15 in the client library")
struct NewerAPITests {
    /// One entry of NewerAPIs.txt.
    struct Entry: Sendable {
        let pattern: NSRegularExpression
        let source: String
        let firstOS: String
        let reason: String
    }

    /// A line that uses a listed API where nothing says it may.
    struct Finding: CustomStringConvertible {
        let file: String
        let line: Int
        let text: String
        let entry: Entry
        var description: String { "\(file):\(line): \(entry.source) (\(entry.firstOS): \(entry.reason)): \(text.trimmingCharacters(in: .whitespaces))" }
    }

    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let audited = ["Sources/LifecycleClient", "Sources/LifecycleKit", "Sources/LifecycleLocks", "Sources/LifecycleTesting"]
    /// What says a use is fine without an `#available` around it: on the line itself, with a reason.
    static let marker = "// available:"

    static func entries() throws -> [Entry] {
        let list = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("NewerAPIs.txt")
        return try String(contentsOf: list, encoding: .utf8).split(separator: "\n").compactMap { line in
            guard !line.hasPrefix("#"), !line.trimmingCharacters(in: .whitespaces).isEmpty else { return nil }
            let fields = line.components(separatedBy: " | ")
            guard fields.count == 3, fields.allSatisfy({ !$0.isEmpty }) else {
                Issue.record("NewerAPIs.txt: not `pattern | first OS | reason`: \(line)")
                return nil
            }
            return Entry(pattern: try NSRegularExpression(pattern: fields[0]), source: fields[0], firstOS: fields[1], reason: fields[2])
        }
    }

    /// Every listed use in `text` that is neither marked nor inside an availability check.
    static func findings(in text: String, file: String, entries: [Entry]) -> [Finding] {
        let lines = text.components(separatedBy: "\n")
        let guarded = availabilityGuarded(lines)
        var found: [Finding] = []
        for (index, line) in lines.enumerated() where !guarded[index] {
            if let marked = line.range(of: marker), !line[marked.upperBound...].trimmingCharacters(in: .whitespaces).isEmpty { continue }
            let code = withoutComment(line)
            let range = NSRange(code.startIndex..., in: code)
            for entry in entries where entry.pattern.firstMatch(in: code, range: range) != nil {
                found.append(Finding(file: file, line: index + 1, text: line, entry: entry))
            }
        }
        return found
    }

    /// Which lines lie inside a block an `#available` or `@available` opens: from the line that
    /// names it to the brace that closes what it opened (an `} else {` ends it: the fallback is
    /// audited like any other code).
    static func availabilityGuarded(_ lines: [String]) -> [Bool] {
        var guarded = Array(repeating: false, count: lines.count)
        var depth = 0
        // The depth each open region started at, and whether its first brace has opened yet.
        var regions: [(depth: Int, opened: Bool)] = []
        for (index, line) in lines.enumerated() {
            let code = withoutComment(line)
            if code.contains("#available(") || code.contains("@available(") { regions.append((depth, false)) }
            if !regions.isEmpty { guarded[index] = true }
            for character in code {
                if character == "{" {
                    depth += 1
                    if let last = regions.indices.last, !regions[last].opened { regions[last].opened = true }
                } else if character == "}" {
                    depth -= 1
                    while let last = regions.last, last.opened, depth <= last.depth { regions.removeLast() }
                }
            }
        }
        return guarded
    }

    /// The line without its `//` comment, string literals kept (a URL's `//` is code).
    static func withoutComment(_ line: String) -> String {
        var inString = false
        var previous: Character?
        var index = line.startIndex
        while index < line.endIndex {
            let character = line[index]
            if character == "\"" && previous != "\\" { inString.toggle() }
            if !inString && character == "/" && previous == "/" { return String(line[..<line.index(before: index)]) }
            previous = character
            index = line.index(after: index)
        }
        return line
    }

    @Test("no source line of LifecycleClient, LifecycleKit, LifecycleLocks or LifecycleTesting uses a listed API unguarded")
    func audit() throws {
        let entries = try Self.entries()
        #expect(entries.count >= 20)
        var files = 0
        var findings: [Finding] = []
        for folder in Self.audited {
            let root = Self.repository.appendingPathComponent(folder)
            let enumerator = try #require(FileManager.default.enumerator(at: root, includingPropertiesForKeys: nil))
            for case let url as URL in enumerator where url.pathExtension == "swift" {
                files += 1
                let relative = String(url.path.dropFirst(Self.repository.path.count + 1))
                findings += Self.findings(in: try String(contentsOf: url, encoding: .utf8), file: relative, entries: entries)
            }
        }
        #expect(files > 20, "the audit read \(files) files: is the repository where #filePath says?")
        #expect(findings.isEmpty, "APIs newer than iOS 15 / macOS 12:\n\(findings.map(\.description).joined(separator: "\n"))")
    }

    /// What only Linux's Glibc has: on Apple platforms the module does not exist, `SOCK_STREAM`
    /// is a plain integer and `SOCK_CLOEXEC` and `MSG_NOSIGNAL` are not defined.
    static let linuxOnly = try! NSRegularExpression(pattern: #"\bGlibc\b|\bSOCK_[A-Z]+\.rawValue|\bSOCK_CLOEXEC\b|\bMSG_NOSIGNAL\b"#)

    /// The lines of `text` that use `linuxOnly` outside an `#if canImport(Glibc)` or
    /// `#if os(Linux)` block (its `#elseif` and `#else` branches are not inside it).
    static func unguardedLinuxUses(in text: String) -> [Int] {
        var stack: [Bool] = []  // per open #if: whether the branch being read is Linux-only
        var found: [Int] = []
        for (number, raw) in text.components(separatedBy: "\n").enumerated() {
            let line = withoutComment(raw).trimmingCharacters(in: .whitespaces)
            let linux = line.contains("canImport(Glibc)") || line.contains("os(Linux)")
            if line.hasPrefix("#if ") { stack.append(linux); continue }
            if line.hasPrefix("#elseif ") { if !stack.isEmpty { stack[stack.count - 1] = linux }; continue }
            if line.hasPrefix("#else") { if !stack.isEmpty { stack[stack.count - 1] = false }; continue }
            if line.hasPrefix("#endif") { _ = stack.popLast(); continue }
            let range = NSRange(line.startIndex..., in: line)
            if linuxOnly.firstMatch(in: line, range: range) != nil, !stack.contains(true) { found.append(number + 1) }
        }
        return found
    }

    @Test("Glibc's sockets are used in the client only behind #if canImport(Glibc): it builds for Apple platforms")
    func linuxOnlyIsGuarded() throws {
        var unguarded: [String] = []
        for folder in Self.audited {
            let root = Self.repository.appendingPathComponent(folder)
            let enumerator = try #require(FileManager.default.enumerator(at: root, includingPropertiesForKeys: nil))
            for case let url as URL in enumerator where url.pathExtension == "swift" {
                let relative = String(url.path.dropFirst(Self.repository.path.count + 1))
                unguarded += Self.unguardedLinuxUses(in: try String(contentsOf: url, encoding: .utf8)).map { "\(relative):\($0)" }
            }
        }
        #expect(unguarded.isEmpty, "Linux-only APIs outside #if canImport(Glibc):\n\(unguarded.joined(separator: "\n"))")
        // The check itself: an unguarded use is found, a guarded one (even under #else of another) is not.
        #expect(Self.unguardedLinuxUses(in: "import Glibc\nlet s = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)") == [1, 2])
        #expect(Self.unguardedLinuxUses(in: "#if canImport(Darwin)\nimport Darwin\n#elseif canImport(Glibc)\nimport Glibc\n#endif") == [])
        #expect(Self.unguardedLinuxUses(in: "#if canImport(Glibc)\nimport Glibc\n#else\nlet x = MSG_NOSIGNAL\n#endif") == [4])
    }

    @Test("only LifecycleTesting imports XCTest or Testing: an app target links LifecycleClient and LifecycleKit without them")
    func testFrameworksStayInTheTestingLibrary() throws {
        let framework = try NSRegularExpression(pattern: #"^\s*(@testable\s+)?import\s+(XCTest|Testing)\b"#)
        var imports: [String: [String]] = [:]
        for folder in Self.audited {
            let root = Self.repository.appendingPathComponent(folder)
            let enumerator = try #require(FileManager.default.enumerator(at: root, includingPropertiesForKeys: nil))
            for case let url as URL in enumerator where url.pathExtension == "swift" {
                for line in try String(contentsOf: url, encoding: .utf8).components(separatedBy: "\n")
                where framework.firstMatch(in: line, range: NSRange(line.startIndex..., in: line)) != nil {
                    imports[folder, default: []].append("\(url.lastPathComponent): \(line)")
                }
            }
        }
        #expect(Set(imports.keys) == ["Sources/LifecycleTesting"], "\(imports)")
    }

    @Test("one lock for the whole codebase: nothing imports Synchronization, and no OSAllocatedUnfairLock")
    func oneLock() throws {
        // Server and test code too: LockedValue is the codebase's one lock, so that a state
        // moved into the client library needs no new lock.
        let other = try NSRegularExpression(pattern: #"^\s*import\s+Synchronization\b|\bOSAllocatedUnfairLock\b"#)
        var uses: [String] = []
        for folder in ["Sources", "Tests", "Benchmarks"] {
            let root = Self.repository.appendingPathComponent(folder)
            let enumerator = try #require(FileManager.default.enumerator(at: root, includingPropertiesForKeys: nil))
            for case let url as URL in enumerator where url.pathExtension == "swift" && url.deletingLastPathComponent().lastPathComponent != "LifecyclePlatformTests" {
                for (index, line) in try String(contentsOf: url, encoding: .utf8).components(separatedBy: "\n").enumerated() {
                    let code = Self.withoutComment(line)
                    if other.firstMatch(in: code, range: NSRange(code.startIndex..., in: code)) != nil { uses.append("\(url.path):\(index + 1): \(line)") }
                }
            }
        }
        #expect(uses.isEmpty, "use LockedValue (LifecycleLocks):\n\(uses.joined(separator: "\n"))")
    }

    @Test("the audit finds an unguarded use, and spares a guarded or marked one")
    func auditCatches() throws {
        let entries = try Self.entries()
        let source = """
        import Synchronization
        let lock = Mutex(0) // a Mutex in a comment is no use: this line counts once per entry
        let url = "http://host//path" // URL(filePath: in a comment is none
        func wait() async throws {
            if #available(iOS 16, macOS 13, *) {
                try await Task.sleep(for: .seconds(1))
            } else {
                try await Task.sleep(until: .now, clock: .continuous)
            }
            try await Task.sleep(nanoseconds: 1_000)
            let start = ContinuousClock.now // available: only in tests of the audit
        }
        @available(iOS 16, *)
        func newer() -> Duration {
            .seconds(1)
        }
        let after = Duration.zero
        """
        let found = Self.findings(in: source, file: "Example.swift", entries: entries)
        #expect(Set(found.map(\.line)) == [1, 2, 8, 17])
        #expect(!found.contains { $0.text.contains("URL(filePath") })
    }
}
