/// The request methods a route can be registered for (RFC 9110 §9, and PATCH), in the order
/// an `Allow` header lists them. A request whose method is none of these matches no route: it
/// is answered 405 where the path has routes, and by the fallback elsewhere.
public enum HTTPMethod: String, CaseIterable, Sendable {
    case get = "GET"
    case head = "HEAD"
    case post = "POST"
    case put = "PUT"
    case patch = "PATCH"
    case delete = "DELETE"
    case options = "OPTIONS"
    case trace = "TRACE"
    case connect = "CONNECT"

    /// The method `name` spells exactly (methods are case-sensitive), or `nil`.
    ///
    /// On the UTF-8 bytes, without hashing or allocating: this runs on every request.
    public init?(_ name: String) {
        var name = name
        guard let method = name.withUTF8(Self.method(spelled:)) else { return nil }
        self = method
    }

    static func method(spelled bytes: UnsafeBufferPointer<UInt8>) -> HTTPMethod? {
        guard let first = bytes.first else { return nil }
        // The first byte and the length tell the nine apart but for PUT/PATCH and POST, which
        // the second byte does; the whole name is then compared.
        let candidate: HTTPMethod
        switch (first, bytes.count) {
        case (UInt8(ascii: "G"), 3): candidate = .get
        case (UInt8(ascii: "H"), 4): candidate = .head
        case (UInt8(ascii: "P"), 4): candidate = .post
        case (UInt8(ascii: "P"), 3): candidate = .put
        case (UInt8(ascii: "P"), 5): candidate = .patch
        case (UInt8(ascii: "D"), 6): candidate = .delete
        case (UInt8(ascii: "O"), 7): candidate = .options
        case (UInt8(ascii: "T"), 5): candidate = .trace
        case (UInt8(ascii: "C"), 7): candidate = .connect
        default: return nil
        }
        return candidate.rawValue.utf8.elementsEqual(bytes) ? candidate : nil
    }

    /// The method's place in ``allCases``: a bit of ``Router``'s method sets, a column of its table.
    var ordinal: Int {
        switch self {
        case .get: 0
        case .head: 1
        case .post: 2
        case .put: 3
        case .patch: 4
        case .delete: 5
        case .options: 6
        case .trace: 7
        case .connect: 8
        }
    }
}
