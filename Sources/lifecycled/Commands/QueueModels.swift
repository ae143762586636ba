import Foundation
import LifecycleClient
import LifecycleKit

/// What a queue folder knows of the models of the instances it queues for: each instance's
/// model as the service last answered it (or as a queued `create` named it), and each model's
/// definition as the service last answered it, in `DIR/models.json`. With it `post --queue`
/// checks an event against the instance's own model while the service cannot be reached, so a
/// typo is refused at once instead of being queued and refused at `flush`, long after.
struct QueueModels: Codable, Equatable {
    /// Instance id to model name.
    var instances: [String: String] = [:]
    /// Model name to its definition, as the service has it.
    var models: [String: ModelDefinition] = [:]

    static func path(_ directory: String) -> String { directory + "/models.json" }

    /// The folder's copy; empty when there is none yet. A copy that cannot be read is said on
    /// standard error and set aside: it is a convenience, and the service checks every item anyway.
    static func load(_ directory: String) -> QueueModels {
        let path = path(directory)
        guard FileManager.default.fileExists(atPath: path) else { return QueueModels() }
        do {
            return try JSONDecoder().decode(QueueModels.self, from: Data(contentsOf: URL(fileURLWithPath: path)))
        } catch {
            Output.error("lifecycled: cannot read \(path), the models kept from the service (\(error)); going on without it")
            return QueueModels()
        }
    }

    /// Writes the copy whole, atomically (a rename): a command killed meanwhile leaves the old
    /// one. A copy that cannot be written (a full disk) is said on standard error and the command
    /// goes on: the item itself is what must be queued, and the journal says whether it was.
    func keep(in directory: String, command: String) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            try encoder.encode(self).write(to: URL(fileURLWithPath: Self.path(directory)), options: .atomic)
        } catch {
            Output.error("lifecycled \(command): cannot keep the models in \(Self.path(directory)) (\((error as NSError).localizedDescription)); going on without")
        }
    }

    /// The definition of `instance`'s model, as far as the folder knows it: its copy, or the
    /// built-in model of that name.
    func definition(of instance: String) -> ModelDefinition? {
        guard let model = instances[instance] else { return nil }
        return models[model] ?? Model.builtins[model]?.definition
    }
}

/// Checks an event or action about to be queued against the instance's model, as the service
/// would at delivery: its name, its parameters and the report (`--believed`, `--ran`). The
/// model's own machine does it, so the words are the service's 422's; nothing is applied.
enum QueuedInputCheck {
    /// Throws a bad command line (nothing is queued) when `definition` refuses `input`.
    static func check(_ input: Input, report: AppReport, against definition: ModelDefinition) throws {
        let model: Model
        do {
            model = try Model(definition: definition)
        } catch {
            // The service answers only valid models: this is a copy edited by hand.
            throw CommandFailure("the model \(definition.name) kept in the queue folder is not valid (\(error)); remove models.json there")
        }
        var machine = Machine(model: model)
        do {
            _ = try machine.apply(input, reported: report, at: Date(timeIntervalSince1970: 0))
        } catch {
            var reason = error.description
            if case .unknownParameter(let name, let parameter) = error {
                let declared = (definition.events.first { $0.name == name }?.parameters ?? definition.actions.first { $0.name == name }?.parameters ?? []).map(\.name)
                reason += "; " + suggestion(for: parameter, among: declared, kind: "parameter")
            }
            throw UsageError("\(reason); nothing queued")
        }
    }

    /// The warning for an input queued unchecked: no model at hand is the instance's, and no
    /// built-in one declares `name` (a model of the user's may, so it is not refused).
    static func warning(name: String, isAction: Bool, instance: String) -> String? {
        let builtins = [Model.iosApp.definition, Model.androidActivity.definition]
        let names = builtins.flatMap { isAction ? $0.actions.map(\.name) : $0.events.map(\.name) }
        guard !names.contains(name) else { return nil }
        let kind = isAction ? "action" : "event"
        let closest = closestName(to: name, among: names).map { " (did you mean \"\($0)\"?)" } ?? ""
        return "the model of \(instance) is not known here (the service did not say, and the queue holds no copy of it), "
            + "and no built-in model has the \(kind) \"\(name)\"\(closest): queued unchecked"
    }
}
