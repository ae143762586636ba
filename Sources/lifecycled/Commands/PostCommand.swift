import Foundation
import LifecycleClient
import LifecycleKit

/// `lifecycled post|action|relaunch|create [--queue DIR …] INSTANCE …`: one write to one
/// instance, sent at once or through a reporter journal, so that a rig can build a device's
/// whole queue from the shell.
struct PostCommand {
    /// Which write the command makes; each is a single request and a kind of batch item.
    enum Kind {
        /// `post`: `POST /v1/instances/{id}/events`.
        case event
        /// `action`: `POST /v1/instances/{id}/actions`.
        case action
        /// `relaunch`: `POST /v1/instances/{id}/relaunches`.
        case relaunch
        /// `create`: `PUT /v1/instances/{id}`.
        case create

        var command: String {
            switch self {
            case .event: "post"
            case .action: "action"
            case .relaunch: "relaunch"
            case .create: "create"
            }
        }

        /// The positional arguments after INSTANCE, as usage names them.
        var operands: String {
            switch self {
            case .event: "EVENT [NAME=VALUE ...]"
            case .action: "ACTION [NAME=VALUE ...]"
            case .relaunch: ""
            case .create: "[MODEL]"
            }
        }

        /// Whether the app's report (`--believed`, `--ran`) goes with it.
        var takesReport: Bool { self == .event || self == .action }
    }

    static func usage(_ kind: Kind) -> String {
        let what: String
        switch kind {
        case .event:
            what = """
                Sends EVENT to INSTANCE (POST /v1/instances/INSTANCE/events) and prints its record as
                JSON. NAME=VALUE parameters take the types the instance's model declares
                (isTesting=true is a boolean); when the service cannot be asked, those of the built-in
                model declaring EVENT, else the value's look (true/false, an integer, a number, else a
                string). A NAME the body itself uses (event, action, believedState, ranHooks,
                occurredAt) is a bad command line: give the report with --believed and --ran.

                exit status: 0 recorded; 3 the event was unexpected (recorded and counted: its record is
                printed); 1 refused (the problem on standard error) or the service unreachable; 2 a bad
                command line.
                """
        case .action:
            what = """
                Performs ACTION on INSTANCE (POST /v1/instances/INSTANCE/actions) and prints its record
                as JSON (its disposition says whether it was handled or buffered). NAME=VALUE
                parameters are typed as for lifecycled post.

                exit status: 0 recorded; 1 refused (the problem on standard error) or the service
                unreachable; 2 a bad command line.
                """
        case .relaunch:
            what = """
                Records a new process of INSTANCE (POST /v1/instances/INSTANCE/relaunches): back to its
                model's initial state, the breadcrumb kept. Prints the record as JSON.

                exit status: 0 recorded; 1 refused (the problem on standard error) or the service
                unreachable; 2 a bad command line.
                """
        case .create:
            what = """
                Creates INSTANCE of MODEL (default: the service's, ios-app) if it is absent
                (PUT /v1/instances/INSTANCE) and prints {"id", "model", "state", "version", "created"}
                as JSON: created is false when it existed with that model.

                exit status: 0 created or found; 1 refused (another model: 409; the problem on standard
                error) or the service unreachable; 2 a bad command line.
                """
        }
        let report = kind.takesReport ? """

              --believed STATE    the state the app's code believes it is in afterwards (believedState)
              --ran HOOK,HOOK...  the hooks the app's code ran, in order (ranHooks); --ran= for none
            """ : ""
        return """
            usage: lifecycled \(kind.command) [options] INSTANCE\(kind.operands.isEmpty ? "" : " " + kind.operands)

            \(what)

            With --queue DIR it is queued first, then the queue is delivered; if the service cannot
            be reached (or answers 5xx or 429) it stays queued: "queued" and exit 0. A refusal that
            waiting will not cure (401, 403) exits 1 at once, the item kept. Before it is queued, an
            event or action is checked against the instance's model: the service's, else the copy
            kept in DIR/models.json from its last answer (or the model a queued create named). A
            name or parameter the model lacks exits 2 naming the closest one, nothing queued; with
            no model of the instance at hand and no built-in model declaring the name, it is queued
            with a warning.

            options:
            \(QueueOptions.help)\(report)

            """ + ServerOptions.help + "\n"
    }

    let kind: Kind
    let server: ServerOptions
    let queue: QueueOptions?
    let instance: String
    /// The event's or action's name, or the model of a create.
    let name: String?
    let words: [String]
    let believedState: String?
    let ranHooks: [String]?

    init(_ kind: Kind, _ arguments: [String], environment: [String: String]) throws {
        self.kind = kind
        let command = kind.command
        let valued = ServerOptions.flags.union(QueueOptions.flags).union(kind.takesReport ? ["--believed", "--ran"] : [])
        let parsed = try Arguments(arguments, command: command, valued: valued, switches: [])
        server = try ServerOptions(parsed, environment: environment, command: command)
        queue = try QueueOptions(parsed, command: command)
        believedState = try parsed.single("--believed", command: command)
        ranHooks = try parsed.single("--ran", command: command).map { $0.isEmpty ? [] : $0.split(separator: ",", omittingEmptySubsequences: false).map(String.init) }
        if ranHooks?.contains("") == true { throw UsageError("--ran has an empty hook name; see lifecycled \(command) --help") }
        let operands = parsed.positional.count
        switch kind {
        case .event, .action:
            guard operands >= 2 else {
                throw UsageError("needs INSTANCE and \(kind == .event ? "EVENT" : "ACTION") (\(operands) given); see lifecycled \(command) --help")
            }
        case .relaunch:
            guard operands == 1 else { throw UsageError("needs INSTANCE alone (\(operands) given); see lifecycled relaunch --help") }
        case .create:
            guard (1...2).contains(operands) else { throw UsageError("needs INSTANCE and at most a MODEL (\(operands) given); see lifecycled create --help") }
        }
        instance = parsed.positional[0]
        name = parsed.positional.dropFirst().first
        words = Array(parsed.positional.dropFirst(2))
    }

    func run() async throws -> Int32 {
        let client = ClientCommand.client(server, timeout: queue == nil ? 30 : 5)
        let item: BatchItem
        switch kind {
        case .event, .action:
            let name = name ?? ""
            let definition: ModelDefinition?
            if let queue {
                definition = try await queuedDefinition(client, queue)
            } else {
                definition = words.isEmpty ? nil : await self.definition(client)
            }
            let typing = ParameterTyping(input: name, isAction: kind == .action, definition: definition, command: kind.command)
            let parameters = try typing.parameters(words)
            if queue != nil {
                let input: Input = kind == .event ? .event(name, parameters) : .action(name, parameters)
                if let definition {
                    try QueuedInputCheck.check(input, report: AppReport(believedState: believedState, ranHooks: ranHooks), against: definition)
                } else if let warning = QueuedInputCheck.warning(name: name, isAction: kind == .action, instance: instance) {
                    Output.error("lifecycled \(kind.command): \(warning)")
                }
            }
            item = kind == .event
                ? .event(name, to: instance, parameters: parameters, believedState: believedState, ranHooks: ranHooks)
                : .action(name, to: instance, parameters: parameters, believedState: believedState, ranHooks: ranHooks)
        case .relaunch:
            item = .launch(instance)
        case .create:
            if let queue { try await rememberCreate(client, queue) }
            item = .create(instance, model: name)
        }
        if let queue { return try await QueuedPost(queue: queue, client: client).post(item, command: kind.command) }
        return try Self.report(await Self.send(item, client), command: kind.command)
    }

    /// The instance's model for an item about to be queued: the service's answer, kept in the
    /// queue folder for the next time it cannot be asked, else the folder's copy; `nil` when
    /// neither knows (no service, and no earlier answer or queued create for the instance).
    private func queuedDefinition(_ client: LifecycleClient, _ queue: QueueOptions) async throws -> ModelDefinition? {
        let kept = QueueModels.load(queue.directory)
        let answered: ModelDescription
        do {
            answered = try await client.model(try await client.instance(instance).model)
        } catch {
            // Unreachable, no such instance yet (its create may be queued), a token reads
            // refuse: the folder's copy answers, and the write itself reports the rest.
            return kept.definition(of: instance)
        }
        let copy = QueueModels(
            instances: kept.instances.merging([instance: answered.name]) { $1 }, models: kept.models.merging([answered.name: answered.definition]) { $1 }
        )
        if copy != kept { copy.keep(in: queue.directory, command: kind.command) }
        return answered.definition
    }

    /// A queued create names the instance's model: kept in the queue folder, so that what is
    /// queued after it for the instance is checked against it. A model the service answers it
    /// does not have is a bad command line (the closest named), and nothing is queued.
    private func rememberCreate(_ client: LifecycleClient, _ queue: QueueOptions) async throws {
        guard let model = name else { return }
        var kept = QueueModels.load(queue.directory)
        do {
            let answered = try await client.model(model)
            kept.models[model] = answered.definition
        } catch let error as LifecycleClientError where error.problem?.status == 404 {
            let known = try await client.models().map(\.name)
            throw UsageError("the service has no model \"\(model)\"; \(suggestion(for: model, among: known, kind: "model")); nothing queued")
        } catch {
            // Out of reach: the service checks the create when it is delivered.
        }
        kept.instances[instance] = model
        kept.keep(in: queue.directory, command: kind.command)
    }

    /// Sends `item` alone as its single request; what it was answered.
    private static func send(_ item: BatchItem, _ client: LifecycleClient) async throws -> BatchResult {
        do {
            switch item.kind {
            case .event:
                return .record(status: 200, try await client.postEvent(
                    item.name ?? "", to: item.instance, parameters: item.parameters, believedState: item.believedState, ranHooks: item.ranHooks))
            case .action:
                return .record(status: 200, try await client.postAction(
                    item.name ?? "", to: item.instance, parameters: item.parameters, believedState: item.believedState, ranHooks: item.ranHooks))
            case .launch:
                return .record(status: 200, try await client.relaunch(item.instance))
            case .create:
                let (instance, created) = try await client.putInstance(item.instance, model: item.model)
                return .instance(status: created ? 201 : 200, instance)
            case .gap:
                throw CommandFailure("no command sends a gap")
            }
        } catch let error as LifecycleClientError {
            guard let problem = error.problem else { throw error }
            return .problem(status: problem.status, problem)
        }
    }

    /// The instance's model as the service has it, to type parameters by; `nil` when it cannot
    /// be had. Whatever stops the look-up (an unreachable service, no such instance yet, a
    /// token reads refuse) is for the write itself to report; typing falls back to the
    /// built-in models and the look of each value.
    private func definition(_ client: LifecycleClient) async -> ModelDefinition? {
        guard !words.isEmpty else { return nil }
        do {
            let model = try await client.instance(instance).model
            return try await client.model(model).definition
        } catch {
            return nil
        }
    }

    /// Prints what the item was answered; its exit status.
    static func report(_ result: BatchResult, command: String) throws -> Int32 {
        switch result {
        case .record(_, let record):
            Output.line(try Output.json(record))
            return record.outcome == .unexpected ? ClientCommand.Status.unexpected : ClientCommand.Status.success
        case .instance(let status, let instance):
            Output.line(try Output.json(instance, created: status == 201))
            return ClientCommand.Status.success
        case .problem(_, let problem):
            if let record = problem.record {
                Output.line(try Output.json(record))
                return ClientCommand.Status.unexpected
            }
            Output.error("lifecycled \(command): \(String(decoding: problem.body, as: UTF8.self))")
            return ClientCommand.Status.failure
        }
    }
}
