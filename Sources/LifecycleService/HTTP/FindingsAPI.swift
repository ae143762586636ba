import Foundation
import LifecycleKit
import LifecycleStore
import LifecycleHTTP

extension API {
    /// `GET /v1/findings`: one item per signature, most widespread first, from the findings
    /// each commit keeps (docs/TRIAGE.md); nothing here reads history.
    ///
    /// `since` keeps the findings seen at or after that time (`lastSeen`); their counts, first
    /// sighting and examples stay the totals over all time (or over the `label`'s instances).
    func listFindings(_ request: Request) throws(Problem) -> Response {
        try request.checkQuery(allowing: ["model", "kind", "since", "label", "limit"])
        let limit = Int(try request.integerQuery("limit", default: 100, in: 1...1000))
        let model = request.query("model")
        try checkModelFilter(model)
        var kind: FindingKind?
        if let text = request.query("kind") {
            guard let named = FindingKind(rawValue: text) else {
                throw .badRequest("query parameter \"kind\" must be one of \(FindingKind.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            kind = named
        }
        var since: Date?
        if let text = request.query("since") {
            guard let time = DeviceTime(rfc3339: text) else {
                throw .badRequest("query parameter \"since\" must be an RFC 3339 date-time with an offset, such as 2026-12-02T05:00:00Z")
            }
            since = time.date
        }
        let label = try request.labelQuery().first
        let findings = registry.findings(label: label, limit: limit) { finding in
            (model == nil || finding.subject.model == model) && (kind == nil || finding.subject.kind == kind)
                && (since.map { finding.totals.lastSeen >= $0 } ?? true)
        }
        return .json(["items": findings.map(FindingView.init)])
    }
}

/// A finding as the API shows it (openapi `Finding`).
struct FindingView: Encodable {
    let finding: StoredFinding

    init(_ finding: StoredFinding) { self.finding = finding }

    enum CodingKeys: String, CodingKey {
        case signature, kind, model, state, event, action, step, diverged, count, instances, firstSeen, lastSeen, examples, links
    }

    /// The characters a query value keeps as they are (RFC 3986's unreserved).
    private static let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

    func encode(to encoder: any Encoder) throws {
        let subject = finding.subject
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(subject.signature, forKey: .signature)
        try c.encode(subject.kind.rawValue, forKey: .kind)
        try c.encode(subject.model, forKey: .model)
        switch subject.kind {
        case .unexpected:
            try c.encode(subject.state, forKey: .state)
            try c.encode(subject.name, forKey: subject.aspect == "action" ? .action : .event)
        case .incompleteLaunch:
            try c.encode(subject.name, forKey: .step)
        case .divergence:
            try c.encode(subject.state, forKey: .state)
            try c.encode([subject.aspect ?? "": subject.name ?? ""], forKey: .diverged)
        case .gap:
            break
        }
        let totals = finding.totals
        try c.encode(totals.count, forKey: .count)
        try c.encode(totals.instances, forKey: .instances)
        try c.encode(totals.firstSeen, forKey: .firstSeen)
        try c.encode(totals.lastSeen, forKey: .lastSeen)
        try c.encode(totals.examples, forKey: .examples)
        let encoded = subject.signature.addingPercentEncoding(withAllowedCharacters: Self.unreserved) ?? subject.signature
        try c.encode(["instances": "/v1/instances?finding=\(encoded)"], forKey: .links)
    }
}
