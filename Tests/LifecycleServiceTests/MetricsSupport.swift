import Foundation

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
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        let folder = TemporaryDirectory("lifecycled-metrics")
        defer { withExtendedLifetime(folder) {} }
        let input = folder.path + "/exposition.txt"
        try text.write(toFile: input, atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", root.appendingPathComponent("metrics/parse.py").path, input]
        let output = PipeCollector()
        let errors = PipeCollector()
        process.standardOutput = output.writeEnd
        process.standardError = errors.writeEnd
        try process.run()
        try output.writeEnd.close()
        try errors.writeEnd.close()
        process.waitUntilExit()
        let (json, complaint) = (output.finish(), errors.finish())
        guard process.terminationStatus == 0 else {
            throw HTTPClientError(description: "the exposition does not parse (exit \(process.terminationStatus)): \(complaint)\n\(text)")
        }
        let parsed = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any]
        var families: [String: Family] = [:]
        for family in parsed?["families"] as? [[String: Any]] ?? [] {
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

extension HTTPConnection {
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
    let connection: HTTPConnection
    private(set) var answered: [[String]: Double] = [:]

    init(_ connection: HTTPConnection) {
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
