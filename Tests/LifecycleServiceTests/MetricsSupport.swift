import Foundation
import LifecycleTestSupport
import LifecycleLocks
#if canImport(Glibc)
import Glibc
#endif

/// What `GET /metrics` answered, as prometheus_client's parser read it (Tests/metrics/parse.py,
/// which also refuses what that parser lets through but the format does not mean).
struct Scrape {
    struct Sample {
        var name: String
        var labels: [String: String]
        var value: Double
    }

    struct Family {
        var type: String
        var help: String
        var samples: [Sample]
    }

    let text: String
    /// By family name as the parser names it (a counter's without `_total`).
    let families: [String: Family]

    /// Every sample named `name` (`x_total`, `x_bucket`, `x_count`, a gauge's name).
    func samples(_ name: String) -> [Sample] {
        families.values.flatMap { $0.samples.filter { $0.name == name } }
    }

    /// The samples named `name`, keyed by their values of `labels`, in that order.
    func series(_ name: String, by labels: [String]) -> [[String]: Double] {
        var series: [[String]: Double] = [:]
        for sample in samples(name) { series[labels.map { sample.labels[$0] ?? "" }] = sample.value }
        return series
    }

    /// The one sample named `name` with exactly `labels`.
    func value(_ name: String, _ labels: [String: String] = [:]) -> Double? {
        samples(name).first { $0.labels == labels }?.value
    }

    /// Parses an exposition with the real parser; throws its complaint.
    init(parsing text: String) throws {
        self.text = text
        let parsed = try JSONSerialization.jsonObject(with: try ExpositionParser.shared.parse(text)) as? [String: Any] ?? [:]
        if let error = parsed["error"] {
            throw HTTPClientError(description: "the exposition does not parse: \(error)\n\(text)")
        }
        var families: [String: Family] = [:]
        for family in parsed["families"] as? [[String: Any]] ?? [] {
            let samples = (family["samples"] as? [[String: Any]] ?? []).map { sample in
                Sample(
                    name: sample["name"] as? String ?? "", labels: sample["labels"] as? [String: String] ?? [:],
                    value: (sample["value"] as? NSNumber)?.doubleValue ?? .nan
                )
            }
            families[family["name"] as? String ?? ""] = Family(type: family["type"] as? String ?? "", help: family["help"] as? String ?? "", samples: samples)
        }
        self.families = families
    }
}

/// The Python with the tests' PyPI packages: `LIFECYCLED_TEST_PYTHON` (which `make test`
/// sets to its virtual environment's), else that environment's when `make test` has made it
/// (for `swift test` run by hand), else `python3` on the PATH.
let testPython: String = {
    if let python = ProcessInfo.processInfo.environment["LIFECYCLED_TEST_PYTHON"], !python.isEmpty { return python }
    let venv = repositoryRoot.appendingPathComponent(".build/venv/bin/python").path
    return FileManager.default.isExecutableFile(atPath: venv) ? venv : "python3"
}()

/// One `python3 Tests/metrics/parse.py --serve` for the whole test run, fed one exposition at
/// a time. Not a process per scrape: each child's end sends the test process a SIGCHLD,
/// which interrupts the poll() or timed recv() some other test's thread is in.
final class ExpositionParser: Sendable {
    static let shared = ExpositionParser()

    private let channel = LockedValue<Channel?>(nil)

    /// The process and the two ends of the socket pairs it reads and writes.
    private final class Channel {
        let process: Process
        let input: Int32
        let output: Int32
        var buffer: [UInt8] = []

        init() throws {
            let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            // Socket pairs, close-on-exec from the start, so that no other child inherits an end
            // (see PipeCollector).
            var input: [Int32] = [-1, -1]
            var output: [Int32] = [-1, -1]
            guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &input) == 0,
                  socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &output) == 0
            else { throw HTTPClientError(description: "socketpair failed: \(String(cString: strerror(errno)))") }
            process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = [testPython, root.appendingPathComponent("metrics/parse.py").path, "--serve"]
            let childInput = FileHandle(fileDescriptor: input[1], closeOnDealloc: true)
            let childOutput = FileHandle(fileDescriptor: output[1], closeOnDealloc: true)
            process.standardInput = childInput
            process.standardOutput = childOutput
            self.input = input[0]
            self.output = output[0]
            try process.run()
            try childInput.close()
            try childOutput.close()
        }

        /// Its input ends, so it exits.
        deinit {
            close(input)
            close(output)
        }

        func send(_ bytes: [UInt8]) throws {
            var offset = 0
            while offset < bytes.count {
                let sent = bytes[offset...].withUnsafeBytes { Glibc.send(input, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if sent < 0, errno == EINTR { continue }
                guard sent > 0 else { throw HTTPClientError(description: "parse.py is gone: \(String(cString: strerror(errno)))") }
                offset += sent
            }
        }

        func readLine() throws -> [UInt8] {
            while true {
                if let end = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                    defer { buffer.removeFirst(end + 1) }
                    return Array(buffer[..<end])
                }
                var chunk = [UInt8](repeating: 0, count: 65536)
                let count = Glibc.read(output, &chunk, chunk.count)
                if count < 0, errno == EINTR { continue }
                guard count > 0 else { throw HTTPClientError(description: "parse.py ended (is prometheus_client installed in \(testPython)? make test-deps)") }
                buffer += chunk[..<count]
            }
        }
    }

    /// parse.py's answer for `text`: the families, or the reason it refused them, as JSON.
    func parse(_ text: String) throws -> Data {
        let request = try JSONSerialization.data(withJSONObject: text, options: .fragmentsAllowed)
        return try channel.withLock { (channel: inout Channel?) throws -> Data in
            if channel == nil { channel = try Channel() }
            do {
                try channel!.send(Array(request) + [UInt8(ascii: "\n")])
                return Data(try channel!.readLine())
            } catch {
                // Started again for the next parse; its answer to this one is lost.
                channel = nil
                throw error
            }
        }
    }
}

extension WireClient {
    /// `GET /metrics`, checked for status and content type, and parsed.
    func scrape() throws -> Scrape {
        let response = try request("GET", "/metrics")
        guard response.status == 200, response.header("content-type") == "text/plain; version=0.0.4; charset=utf-8" else {
            throw HTTPClientError(description: "GET /metrics answered \(response.status) \(response.header("content-type") ?? "without a type"): \(response.text)")
        }
        return try Scrape(parsing: response.text)
    }
}

/// A connection that counts its requests by method, route template and status, as the
/// request counters should.
final class CountingConnection {
    let connection: WireClient
    private(set) var answered: [[String]: Double] = [:]

    init(_ connection: WireClient) {
        self.connection = connection
    }

    func request(_ method: String, _ path: String, route: String, json: String? = nil) throws -> HTTPResponse {
        let response = if let json {
            try connection.request(method, path, json: json)
        } else {
            try connection.request(method, path, body: method == "GET" ? nil : [], contentType: nil)
        }
        count(method, route, response.status)
        return response
    }

    /// A request answered on another connection (a stream's).
    func count(_ method: String, _ route: String, _ status: Int) {
        answered[[method, route, String(status)], default: 0] += 1
    }

    func scrape() throws -> Scrape {
        let scrape = try connection.scrape()
        count("GET", "/metrics", 200)
        return scrape
    }
}
