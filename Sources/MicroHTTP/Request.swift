import Foundation

/// An HTTP request as handlers see it: no C pointers, body fully read.
public struct Request: Sendable {
    public var method: String
    /// The decoded path, without the query string.
    public var path: String
    /// Header fields with lowercased names, in arrival order.
    public var headers: [(name: String, value: String)]
    /// Decoded query arguments, in arrival order.
    public var query: [(name: String, value: String)]
    public var body: [UInt8]
    /// Values of `{name}` segments of the matched route.
    public var parameters: [String: String] = [:]

    public init(method: String, path: String, headers: [(name: String, value: String)] = [], query: [(name: String, value: String)] = [], body: [UInt8] = []) {
        self.method = method
        self.path = path
        self.headers = headers
        self.query = query
        self.body = body
    }

    /// The first header with this name (case-insensitive).
    public func header(_ name: String) -> String? {
        let lowered = name.lowercased()
        return headers.first { $0.name == lowered }?.value
    }

    /// The first query argument with this name.
    public func query(_ name: String) -> String? {
        query.first { $0.name == name }?.value
    }

    /// The media type of the body, without parameters, lowercased.
    public var mediaType: String? {
        guard let value = header("content-type") else { return nil }
        let type = value.split(separator: ";", maxSplits: 1).first ?? ""
        return type.trimmingCharacters(in: .whitespaces).lowercased()
    }
}

