/// The values of the `{name}` segments of the route a request matched, by name.
///
/// Held inline for up to two (every route the service has), so that routing a request makes
/// no dictionary: one is allocated and its keys hashed on every request otherwise.
public struct RouteParameters: Sendable, Equatable, ExpressibleByDictionaryLiteral {
    private var first: (name: String, value: String)?
    private var second: (name: String, value: String)?
    private var others: [(name: String, value: String)] = []

    /// No parameters.
    public init() {}

    /// Parameters as a literal, for tests: `["id": "7"]`.
    public init(dictionaryLiteral elements: (String, String)...) {
        for (name, value) in elements { self[name] = value }
    }

    /// The value of the segment named `name`; setting one replaces it.
    public subscript(name: String) -> String? {
        get {
            if let first, first.name == name { return first.value }
            if let second, second.name == name { return second.value }
            return others.first { $0.name == name }?.value
        }
        set {
            if first?.name == name {
                first = newValue.map { (name, $0) }
            } else if second?.name == name {
                second = newValue.map { (name, $0) }
            } else if let index = others.firstIndex(where: { $0.name == name }) {
                if let newValue { others[index].value = newValue } else { others.remove(at: index) }
            } else if let newValue {
                if first == nil {
                    first = (name, newValue)
                } else if second == nil {
                    second = (name, newValue)
                } else {
                    others.append((name, newValue))
                }
            }
        }
    }

    /// Every name and value, in no particular order.
    public var all: [(name: String, value: String)] {
        [first, second].compactMap { $0 } + others
    }

    /// Whether both hold the same names with the same values, whatever the order.
    public static func == (lhs: RouteParameters, rhs: RouteParameters) -> Bool {
        let left = lhs.all, right = rhs.all
        return left.count == right.count && left.allSatisfy { rhs[$0.name] == $0.value }
    }
}
