import LifecycleHTTP

/// Labels: who an instance is (an app's version and build, the OS version, the device model, a
/// test run's id), set when it is created and never changed. Keys are 1 to 64 characters from
/// `[A-Za-z0-9._-]`; values 1 to 256 characters (Unicode scalars), none a control character;
/// at most 16 labels. The store and every list take them as checked here.
enum InstanceLabels {
    static let maxCount = 16
    static let maxKeyLength = 64
    static let maxValueLength = 256

    /// The labels of a create's body (`labels`, absent or `null` for none). Anything else is
    /// refused with 422 naming the member (`labels.app version`), so nothing is stored.
    static func parse(_ member: JSONValue?) throws(Problem) -> [String: String] {
        let object: [String: JSONValue]
        switch member {
        case nil, .null?: return [:]
        case .object(let members)?: object = members
        default: throw .unprocessable("\"labels\" must be an object of strings, such as {\"app.version\": \"2.1\"}")
        }
        guard object.count <= maxCount else {
            throw .unprocessable("\"labels\" holds \(object.count) labels; an instance takes at most \(maxCount)")
        }
        var labels: [String: String] = [:]
        for key in object.keys.sorted() {
            guard isValidKey(key) else {
                throw .unprocessable("labels.\(key): a label's key must be 1 to \(maxKeyLength) characters from A-Z a-z 0-9 . _ -")
            }
            guard case .string(let value) = object[key]! else { throw .unprocessable("labels.\(key) must be a string") }
            guard isValidValue(value) else {
                throw .unprocessable("labels.\(key): a label's value must be 1 to \(maxValueLength) characters, none a control character")
            }
            labels[key] = value
        }
        return labels
    }

    /// Whether `key` may name a label.
    static func isValidKey(_ key: String) -> Bool {
        (1...maxKeyLength).contains(key.utf8.count) && key.utf8.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || byte == 0x2E || byte == 0x5F || byte == 0x2D
        }
    }

    /// Whether `value` may be a label's value.
    static func isValidValue(_ value: String) -> Bool {
        (1...maxValueLength).contains(value.unicodeScalars.count) && !value.unicodeScalars.contains { $0.properties.generalCategory == .control }
    }
}

/// One `key=value` a list asks its items to carry.
struct LabelMatch: Hashable, Sendable {
    var key: String
    var value: String

    /// How indexes file it: `key=value` (a key holds no `=`, so this names one pair).
    var text: String { "\(key)=\(value)" }
}

extension Request {
    /// The `label` arguments (repeatable, each `key=value`, split at the first `=`): every one
    /// must match. One that is not a valid key and value is refused with 400.
    func labelQuery() throws(Problem) -> [LabelMatch] {
        var matches: [LabelMatch] = []
        for (name, argument) in query where name == "label" {
            guard let equals = argument.firstIndex(of: "="),
                  case let key = String(argument[..<equals]), case let value = String(argument[argument.index(after: equals)...]),
                  InstanceLabels.isValidKey(key), InstanceLabels.isValidValue(value) else {
                throw .badRequest("query parameter \"label\" must be key=value, such as label=run=abc: a key of A-Z a-z 0-9 . _ - and a value of 1 to 256 characters")
            }
            matches.append(LabelMatch(key: key, value: value))
        }
        return matches
    }
}
