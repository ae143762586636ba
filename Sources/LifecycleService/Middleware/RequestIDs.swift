import LifecycleHTTP
import LifecycleLocks

/// Gives every request an id, for its log lines and its answer's `X-Request-ID`: the
/// client's own when it sends a valid one (so a trace can follow a request across
/// services), else a new one.
final class RequestIDs: Middleware {
    /// Longest id taken from a client; a longer or oddly spelled one is replaced, not refused.
    static let maxLength = 128

    /// Ids made here are this process's random prefix and a counter: unique, cheap, and in
    /// order within one run.
    private let prefix: String
    private let counter = LockedValue<UInt64>(0)

    init(prefix: String = String(UInt32.random(in: .min ... .max), radix: 16)) {
        self.prefix = prefix + "-"
    }

    /// Letters, digits and `-._:@/+=`, at most ``maxLength``: enough for UUIDs, W3C trace ids
    /// and most tracing headers, and nothing that could break a log line or a header.
    static func isValid(_ id: String) -> Bool {
        !id.isEmpty && id.utf8.count <= maxLength && id.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
            default: "-._:@/+=".utf8.contains(byte)
            }
        }
    }

    func prepare(_ request: inout Request) {
        if let offered = request.header("x-request-id"), Self.isValid(offered) {
            request.id = offered
        } else {
            // Concatenated, not interpolated: this runs for most requests.
            request.id = prefix + String(counter.withLock { $0 += 1; return $0 })
        }
    }

    func finish(_ request: Request, _ response: inout Response) {
        response.headers.append(("X-Request-ID", request.id))
    }
}
