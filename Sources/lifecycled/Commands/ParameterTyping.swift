import LifecycleKit

/// How `NAME=VALUE` words become typed parameters.
///
/// The rule (docs/CLI.md): a parameter the model declares for the event gets the
/// declared type for the event or action (`isTesting=true` is a boolean, `count=3` an integer, `window=3` the string
/// `"3"`); a value that is not of it is a bad command line. The model is the instance's, as
/// the service has it; when the service cannot be asked (or has no such instance yet), the
/// built-in model that declares the event (`ios-app`, then `android-activity`); a name no
/// model at hand declares is typed by its look: `true`/`false` a boolean, an integer literal
/// an integer, another number a number, anything else a string (the service then refuses
/// what the model does not take, as it would from any client). A name the body itself uses
/// (the reserved `believedState`, `ranHooks`, `occurredAt`; `event` or `action`, unless the
/// model declares the other kind's name as a parameter) is a bad command line: sent, it would
/// be taken for that member or overwritten by it, without a word.
struct ParameterTyping {
    /// The input's declared parameters, or `nil` when no model at hand declares the input.
    let declared: [ParameterDefinition]?
    /// The name field of the input's body (`event` or `action`).
    let nameField: String
    /// The command, for its messages.
    let command: String

    /// The declaration of the event (or action) `name` in `definition`, or in the built-in
    /// models when there is none.
    init(input name: String, isAction: Bool, definition: ModelDefinition?, command: String) {
        let candidates = definition.map { [$0] } ?? [Model.iosApp.definition, Model.androidActivity.definition]
        declared = candidates.lazy.compactMap { model in
            isAction ? model.actions.first { $0.name == name }?.parameters : model.events.first { $0.name == name }?.parameters
        }.first
        nameField = isAction ? "action" : "event"
        self.command = command
    }

    /// The typed parameters of `words` (`NAME=VALUE` each), in the order given.
    func parameters(_ words: [String]) throws(UsageError) -> [String: Value] {
        var parameters: [String: Value] = [:]
        for word in words {
            guard let equals = word.firstIndex(of: "="), equals != word.startIndex else {
                throw UsageError("parameter \"\(word)\" is not NAME=VALUE; see lifecycled \(command) --help")
            }
            let name = String(word[..<equals])
            let text = String(word[word.index(after: equals)...])
            guard parameters[name] == nil else { throw UsageError("parameter \(name) given twice") }
            let type = declared?.first(where: { $0.name == name })?.type
            guard !AppReport.reservedNames.contains(name) else {
                throw UsageError("\(name) is not a parameter: give it with --believed or --ran; see lifecycled \(command) --help")
            }
            // The body's own name member would overwrite the parameter, or the parameter it (the
            // other kind's name is a parameter only where the model declares one so called).
            guard name != nameField, type != nil || !["event", "action"].contains(name) else {
                throw UsageError("\(name) is a member of the request body, not a parameter; see lifecycled \(command) --help")
            }
            if let type {
                guard let value = Self.value(text, as: type) else {
                    throw UsageError("parameter \(name) is a\(type == .integer ? "n" : "") \(type.rawValue) in the model, not \"\(text)\"")
                }
                parameters[name] = value
            } else {
                parameters[name] = Self.value(byLook: text)
            }
        }
        return parameters
    }

    static func value(_ text: String, as type: ParameterType) -> Value? {
        switch type {
        case .string: .string(text)
        case .boolean: text == "true" ? .bool(true) : text == "false" ? .bool(false) : nil
        case .integer: Int64(text).map(Value.integer)
        case .number: Int64(text).map(Value.integer) ?? Double(text).flatMap { $0.isFinite ? Value.number($0) : nil }
        }
    }

    static func value(byLook text: String) -> Value {
        if let bool = value(text, as: .boolean) { return bool }
        if let integer = Int64(text) { return .integer(integer) }
        if let number = Double(text), number.isFinite, text.allSatisfy({ "0123456789+-.eE".contains($0) }) { return .number(number) }
        return .string(text)
    }
}
