/// A parameter value carried by an event or action.
///
/// Lifecycle parameters are flat: strings, booleans and numbers. Keeping the
/// set closed lets models declare a type for each parameter and lets the engine
/// validate input without a general JSON tree.
public enum Value: Sendable, Hashable, Codable, CustomStringConvertible {
    case string(String)
    case bool(Bool)
    case integer(Int64)
    case number(Double)

    /// The type name used in model files and error messages.
    public var typeName: String {
        switch self {
        case .string: "string"
        case .bool: "boolean"
        case .integer: "integer"
        case .number: "number"
        }
    }

    public var description: String {
        switch self {
        case .string(let s): "\"\(s)\""
        case .bool(let b): String(b)
        case .integer(let i): String(i)
        case .number(let d): String(d)
        }
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let b = try? container.decode(Bool.self) {
            self = .bool(b)
        } else if let i = try? container.decode(Int64.self) {
            self = .integer(i)
        } else if let d = try? container.decode(Double.self) {
            self = .number(d)
        } else {
            self = .string(try container.decode(String.self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .string(let s): try container.encode(s)
        case .bool(let b): try container.encode(b)
        case .integer(let i): try container.encode(i)
        case .number(let d): try container.encode(d)
        }
    }
}

/// The declared type of a parameter.
public enum ParameterType: String, Sendable, Codable, CaseIterable {
    case string, boolean, integer, number

    /// The longest string value an input may carry, in characters (Unicode scalars, as JSON
    /// Schema's `maxLength` counts them, so `openapi.yaml` can state it exactly). With at most
    /// ``maxParametersPerInput`` parameters, it bounds a record (which may repeat an input's
    /// parameters as the action it replaced), and so what pages and streams of records weigh.
    public static let maxStringLength = 8192
    /// The most parameters an event or action may declare, and so an input carry.
    public static let maxParametersPerInput = 32

    /// Whether `value` is acceptable for this type; an integer is a valid number. Infinity
    /// and NaN are not numbers here: a record holding one could not be written as JSON.
    public func accepts(_ value: Value) -> Bool {
        switch (self, value) {
        case (.number, .number(let number)):
            number.isFinite
        case (.string, .string), (.boolean, .bool), (.integer, .integer), (.number, .integer):
            true
        default:
            false
        }
    }
}
