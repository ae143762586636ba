import Foundation
import LifecycleKit

/// Any JSON value: what a problem document's extension members hold (`record`, `limit`,
/// `failingSince`, …), kept whole so that nothing the service said is lost.
public enum JSONValue: Sendable, Hashable, Codable {
    case null
    case bool(Bool)
    /// A number written without a fraction or exponent that fits in 64 bits.
    case integer(Int64)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    public init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() {
            self = .null
        } else if let value = try? c.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? c.decode(Int64.self) {
            self = .integer(value)
        } else if let value = try? c.decode(Double.self) {
            self = .number(value)
        } else if let value = try? c.decode(String.self) {
            self = .string(value)
        } else if let value = try? c.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try c.decode([String: JSONValue].self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .null: try c.encodeNil()
        case .bool(let value): try c.encode(value)
        case .integer(let value): try c.encode(value)
        case .number(let value): try c.encode(value)
        case .string(let value): try c.encode(value)
        case .array(let value): try c.encode(value)
        case .object(let value): try c.encode(value)
        }
    }

    /// The string, when this is one.
    public var stringValue: String? {
        if case .string(let value) = self { value } else { nil }
    }

    /// The integer, when this is one.
    public var integerValue: Int64? {
        if case .integer(let value) = self { value } else { nil }
    }
}

/// A refusal from the service: an RFC 9457 `application/problem+json` document, typed.
///
/// The service answers every refusal with one (`type` is `/problems/<kind>`, which it serves
/// as a page explaining the kind). The four members every problem has are properties; the
/// whole document stays in ``document`` (and its bytes in ``body``) for the members a kind
/// adds, such as an instance limit's `limit` or a storage outage's `failingSince`.
public struct LifecycleProblem: Error, Sendable, Equatable, CustomStringConvertible {
    /// The HTTP status (the item's status within a batch).
    public var status: Int
    /// A relative reference such as `/problems/not-found`.
    public var type: String
    public var title: String
    public var detail: String
    /// Every member of the document, those above included.
    public var document: [String: JSONValue]
    /// The document as the service sent it.
    public var body: Data
    /// Seconds to wait before sending again, from `Retry-After` (429 and 503 answers, and a
    /// batch whose item was answered 503); `nil` when the answer gave none.
    public var retryAfter: TimeInterval?

    public init(status: Int, type: String, title: String, detail: String, document: [String: JSONValue], body: Data, retryAfter: TimeInterval? = nil) {
        self.status = status
        self.type = type
        self.title = title
        self.detail = detail
        self.document = document
        self.body = body
        self.retryAfter = retryAfter
    }

    /// The kind: the last part of ``type`` (`not-found`, `unexpected-event`, …).
    public var kind: String { String(type.split(separator: "/").last ?? Substring(type)) }

    /// The record an unexpected event's problem carries: it was recorded, in a batch as alone.
    public var record: Record? {
        guard let member = document["record"], let data = try? JSONEncoder().encode(member) else { return nil }
        return try? LifecycleClient.decoder.decode(Record.self, from: data)
    }

    public var description: String { "\(status) \(title): \(detail)" }

    /// Reads a problem document; `nil` when `body` is not a JSON object.
    init?(status: Int, body: Data, retryAfter: TimeInterval?) {
        guard let document = try? JSONDecoder().decode([String: JSONValue].self, from: body) else { return nil }
        self.init(status: status, document: document, body: body, retryAfter: retryAfter)
    }

    init(status: Int, document: [String: JSONValue], body: Data, retryAfter: TimeInterval?) {
        self.init(
            status: status, type: document["type"]?.stringValue ?? "about:blank", title: document["title"]?.stringValue ?? "",
            detail: document["detail"]?.stringValue ?? "", document: document, body: body, retryAfter: retryAfter
        )
    }
}

/// Why a call failed.
public enum LifecycleClientError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The service refused the request and said why.
    case problem(LifecycleProblem)
    /// No answer: the connection failed or timed out (why, in one line naming the host and
    /// port: "cannot connect to 10.0.0.5:8080: connection refused"). Whether a write was
    /// applied is unknown; send it again with the same `Idempotency-Key`.
    case unreachable(String)
    /// An answer this client cannot read: an unexpected status, content type or body.
    case badResponse(String)

    /// The problem, when the service sent one.
    public var problem: LifecycleProblem? {
        if case .problem(let problem) = self { problem } else { nil }
    }

    /// The error in one line of at most 120 characters, elided in its middle when longer (the
    /// whole problem document is in ``problem``).
    public var description: String {
        switch self {
        case .problem(let problem): "lifecycled refused: \(problem)".oneLine()
        case .unreachable(let reason): "lifecycled unreachable: \(reason)".oneLine()
        case .badResponse(let reason): "unreadable answer from lifecycled: \(reason)".oneLine()
        }
    }

    /// Why `error`, thrown by `URLSession` for a request to `url`, got no answer: one line
    /// naming the host and port, from the error's code (and the system's errno where it gives
    /// one) rather than its description, which runs to hundreds of characters.
    static func unreachableReason(_ error: any Error, url: URL) -> String {
        let host = url.host ?? "?"
        let port = url.port ?? (url.scheme == "https" ? 443 : 80)
        let target = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        let posix = posixReason(of: error)?.lowercased()
        guard let code = (error as? URLError)?.code else { return "cannot reach \(target): \(posix ?? String(describing: error))".oneLine() }
        let reason: String = switch code {
        case .cannotConnectToHost: "cannot connect to \(target): \(posix ?? "connection refused")"
        case .cannotFindHost, .dnsLookupFailed: "cannot find host \(host) (\(target)): the name does not resolve"
        case .timedOut: "no answer from \(target) in time"
        case .networkConnectionLost: "the connection to \(target) was lost"
        case .notConnectedToInternet: "cannot reach \(target): the device is offline"
        case .appTransportSecurityRequiresSecureConnection: "cannot reach \(target): App Transport Security requires https"
        case .secureConnectionFailed, .serverCertificateUntrusted, .serverCertificateHasBadDate, .serverCertificateNotYetValid,
             .serverCertificateHasUnknownRoot, .clientCertificateRejected, .clientCertificateRequired:
            "cannot reach \(target): the TLS handshake failed (URLError \(code.rawValue))"
        default: "cannot reach \(target): \(posix ?? "URLError \(code.rawValue)")"
        }
        return reason.oneLine()
    }
}

/// The system's words for the errno that `error` carries, itself or among the errors it wraps
/// (Foundation wraps ENOSPC, ECONNREFUSED… in errors of its own); nil when it carries none.
func posixReason(of error: any Error) -> String? {
    var current = error as NSError
    while current.domain != NSPOSIXErrorDomain {
        guard let underlying = current.userInfo[NSUnderlyingErrorKey] as? NSError else { return nil }
        current = underlying
    }
    return String(cString: strerror(Int32(current.code)))
}

extension String {
    /// This on one line (line breaks and tabs as spaces) of at most `limit` characters: a
    /// longer one keeps its start and its end (where a reason usually is) around an ellipsis.
    func oneLine(limit: Int = 120) -> String {
        let flat = String(map { $0.isNewline || $0 == "\t" ? " " : $0 })
        guard flat.count > limit else { return flat }
        let head = (limit - 1) / 2
        return flat.prefix(head) + "…" + flat.suffix(limit - 1 - head)
    }
}

// `localizedDescription`, which an app shows or logs, says the one line `description` does
// (without it, Foundation's generic "The operation couldn't be completed").
extension LifecycleProblem: LocalizedError {
    /// The one-line ``description``.
    public var errorDescription: String? { description }
}

extension LifecycleClientError: LocalizedError {
    /// The one-line ``description``.
    public var errorDescription: String? { description }
}

extension DeliveryTimeout: LocalizedError {
    /// The one-line ``description``.
    public var errorDescription: String? { description }
}

extension LifecycleReporter.ReportError: LocalizedError {
    /// The one-line ``description``.
    public var errorDescription: String? { description }
}
