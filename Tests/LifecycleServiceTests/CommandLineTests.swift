import Foundation
import LifecycleTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Runs the built `lifecycled CLIENT-COMMAND …` to its end, against the service on `port`
/// (through `LIFECYCLED_SERVER`, as a script would) when one is given.
func lifecycledCommand(_ arguments: [String], port: UInt16? = nil, environment: [String: String] = [:], within seconds: Double = 30) throws -> (
    status: Int32, stdout: String, stderr: String
) {
    var environment = environment
    if let port { environment["LIFECYCLED_SERVER"] = "http://127.0.0.1:\(port)" }
    return try LifecycledProcess(arguments: arguments, environment: environment).finish(within: seconds)
}

/// JSON text as an object (a test failure, not a crash, when it is not one).
func jsonObject(_ text: String) -> [String: Any] {
    (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any] ?? [:]
}

/// A model whose string parameter looks like a number: only the model's declaration types it right.
let keypadModel = """
{"name": "keypad", "states": [{"name": "locked", "kind": "initial"}, {"name": "open", "kind": "permanent"}],
 "events": [{"name": "enter", "parameters": [{"name": "code", "type": "string", "required": true}]}],
 "transitions": [{"from": "locked", "event": "enter", "to": "open", "hooks": ["Keypad.open"]}]}
"""

@Suite("the command line: post, flush, tail, check", .serialized)
struct CommandLineTests {
    @Test("lifecycled --help names every command; each command's --help prints its usage and exits 0")
    func help() throws {
        let top = try LifecycledProcess(arguments: ["--help"]).finish()
        #expect(top.status == 0)
        for command in ["post", "action", "relaunch", "create", "flush", "tail", "check"] {
            #expect(top.stdout.contains("lifecycled \(command) "), "lifecycled --help does not mention \(command)")
            let run = try lifecycledCommand([command, "--help"])
            #expect(run.status == 0, "\(command) --help: \(run.stderr)")
            #expect(run.stdout.hasPrefix("usage: lifecycled \(command) "), "\(command) --help printed \(run.stdout)")
            #expect(run.stdout.contains("--server URL") && run.stdout.contains("LIFECYCLED_TOKEN"), "\(command) --help names --server and --token")
        }
    }

    @Test("a bad command line exits 2 with one line naming the reason, and sends nothing", arguments: [
        (["post", "only-instance"], "needs INSTANCE and EVENT"),
        (["post", "--bogus", "a", "b"], "unknown option --bogus"),
        (["post", "a", "didFinishLaunching", "isTesting"], "not NAME=VALUE"),
        (["post", "a", "didFinishLaunching", "isTesting=maybe"], "isTesting is a boolean"),
        (["post", "a", "didFinishLaunching", "believedState=launching"], "--believed"),
        (["post", "--server", "ftp://example.com", "a", "b"], "--server"),
        (["post", "--token", "has space", "a", "b"], "--token"),
        (["post", "--queue"], "--queue needs a value"),
        (["flush"], "--queue"),
        (["flush", "--queue", "/tmp/x", "extra"], "extra"),
        (["tail", "--after", "soon"], "--after"),
        (["tail", "--outcome", "exploded"], "--outcome"),
        (["tail", "--json=yes"], "takes no value"),
        (["check", "ios-app"], "MODEL and FILE"),
        (["check", "ios-app", "/nonexistent/trace.json"], "/nonexistent/trace.json"),
    ])
    func badCommandLine(arguments: [String], reason: String) throws {
        // No service is there: a command that tried to reach one would fail otherwise (exit 1).
        let run = try lifecycledCommand(arguments, port: freePort())
        #expect(run.status == 2, "\(arguments) exited \(run.status): \(run.stderr)")
        #expect(run.stdout.isEmpty)
        let lines = run.stderr.split(separator: "\n")
        #expect(lines.count == 1 && run.stderr.contains(reason), "\(arguments): \(run.stderr)")
    }

    @Test("post: the record JSON and 0; typed parameters; believedState and ranHooks; unexpected 3 with its record; refused 1 with the problem; unreachable 1")
    func post() throws {
        let data = TemporaryDirectory()
        try keypadModel.write(toFile: data.path + "/keypad.json", atomically: true, encoding: .utf8)
        let server = try LifecycledProcess.serving(dataDirectory: data.path + "/data", extra: ["--models-dir", data.path])
        let c = try WireClient(port: server.port)
        try c.makeInstance("cli-1")
        try c.makeInstance("cli-test")
        try c.makeInstance("pad", model: "keypad")

        var run = try lifecycledCommand(["post", "cli-1", "didFinishLaunching"], port: server.port)
        #expect(run.status == 0, "\(run.stderr)")
        var record = jsonObject(run.stdout)
        #expect(record["event"] as? String == "didFinishLaunching" && record["to"] as? String == "launching" && record["version"] as? Int == 1)
        #expect(run.stdout.hasPrefix(#"{"sequence":"#) && run.stdout.hasSuffix("}\n") && run.stdout.split(separator: "\n").count == 1, "one line of JSON: \(run.stdout)")

        // The model says isTesting is a boolean: `true` is sent as true (the string "true" would be refused with 422).
        run = try lifecycledCommand(["post", "cli-test", "didFinishLaunching", "isTesting=true"], port: server.port)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(jsonObject(run.stdout)["to"] as? String == "simulated")
        // A string the model declares stays a string, however it looks (by its look, 1234 is an integer: 422).
        run = try lifecycledCommand(["post", "pad", "enter", "code=1234"], port: server.port)
        #expect(run.status == 0, "\(run.stderr)")
        #expect((jsonObject(run.stdout)["parameters"] as? [String: Any])?["code"] as? String == "1234")

        run = try lifecycledCommand(
            ["post", "--believed", "connected", "--ran", "Connected.init,Extra.hook", "cli-1", "willConnectToWindow", "window=main"], port: server.port)
        #expect(run.status == 0, "\(run.stderr)")
        record = jsonObject(run.stdout)
        #expect(record["believedState"] as? String == "connected" && record["ranHooks"] as? [String] == ["Connected.init", "Extra.hook"])
        #expect((record["divergence"] as? [String: Any])?["hooks"] != nil, "the extra hook is a divergence: \(run.stdout)")

        run = try lifecycledCommand(["post", "cli-1", "didFinishLaunching"], port: server.port)
        #expect(run.status == 3, "unexpected: \(run.stderr)")
        record = jsonObject(run.stdout)
        #expect(record["outcome"] as? String == "unexpected" && record["version"] as? Int == 3, "\(run.stdout)")

        run = try lifecycledCommand(["post", "nobody", "didFinishLaunching"], port: server.port)
        #expect(run.status == 1 && run.stdout.isEmpty)
        #expect(run.stderr.contains("/problems/not-found") && run.stderr.split(separator: "\n").count == 1, "\(run.stderr)")
        run = try lifecycledCommand(["post", "cli-1", "didBecomeActive", "window=main"], port: server.port)
        #expect(run.status == 1 && run.stderr.contains("422"), "a parameter the model does not take: \(run.stderr)")

        // Through --server rather than the variable; a service that is not there.
        run = try lifecycledCommand(["post", "--server", "http://127.0.0.1:\(server.port)", "cli-1", "didBecomeActive"])
        #expect(run.status == 0 && jsonObject(run.stdout)["to"] as? String == "foreground", "\(run.stderr)")
        run = try lifecycledCommand(["post", "cli-1", "didBecomeActive"], port: freePort())
        #expect(run.status == 1 && run.stdout.isEmpty && !run.stderr.isEmpty)

        let history = try c.fullHistory("cli-1").compactMap { $0["event"] as? String }
        #expect(history == ["didFinishLaunching", "willConnectToWindow", "didFinishLaunching", "didBecomeActive"], "the refusals stored nothing")
    }

    @Test("post and check send the token (--token or LIFECYCLED_TOKEN); without it 401 is exit 1")
    func token() throws {
        let data = TemporaryDirectory()
        let server = try LifecycledProcess.serving(dataDirectory: data.path, extra: ["--token", "cli-secret"])
        let c = try WireClient(port: server.port)
        _ = try c.request("PUT", "/v1/instances/guarded", headers: [("Authorization", "Bearer cli-secret")])
        var run = try lifecycledCommand(["post", "guarded", "didFinishLaunching"], port: server.port)
        #expect(run.status == 1 && run.stderr.contains("401"), "\(run.stderr)")
        run = try lifecycledCommand(["post", "--token", "cli-secret", "guarded", "didFinishLaunching"], port: server.port)
        #expect(run.status == 0, "\(run.stderr)")
        run = try lifecycledCommand(["post", "guarded", "willConnectToWindow", "window=main"], port: server.port, environment: ["LIFECYCLED_TOKEN": "cli-secret"])
        #expect(run.status == 0, "\(run.stderr)")
    }

    @Test("check: 0 and conforming for a trace the model accepts; 1 and the first problem otherwise; 1 for a name the model lacks")
    func check() throws {
        let data = TemporaryDirectory()
        let server = try LifecycledProcess.serving(dataDirectory: data.path + "/data")
        let good = data.path + "/good.json"
        try #"{"steps": [{"event": "didFinishLaunching", "believedState": "launching"}, {"event": "willConnectToWindow", "window": "main"}, {"event": "didBecomeActive"}]}"#
            .write(toFile: good, atomically: true, encoding: .utf8)
        var run = try lifecycledCommand(["check", "ios-app", good], port: server.port)
        #expect(run.status == 0, "\(run.stdout) \(run.stderr)")
        #expect(run.stdout.contains("conforming") && run.stdout.contains("foreground"), "\(run.stdout)")

        // A bare array of steps is a trace too; here step 1 is unexpected.
        let bad = data.path + "/bad.json"
        try #"[{"event": "didFinishLaunching"}, {"event": "didBecomeActive"}]"#.write(toFile: bad, atomically: true, encoding: .utf8)
        run = try lifecycledCommand(["check", "ios-app", bad], port: server.port)
        #expect(run.status == 1, "\(run.stderr)")
        #expect(run.stdout.hasPrefix("step 1: unexpected: didBecomeActive in launching; the model expects "), "\(run.stdout)")

        let typo = data.path + "/typo.json"
        try #"{"steps": [{"event": "didFinishLaunchin"}]}"#.write(toFile: typo, atomically: true, encoding: .utf8)
        run = try lifecycledCommand(["check", "ios-app", typo], port: server.port)
        #expect(run.status == 1 && run.stderr.contains("didFinishLaunching"), "the 422 suggests the name: \(run.stderr)")
        run = try lifecycledCommand(["check", "no-such-model", good], port: server.port)
        #expect(run.status == 1 && run.stderr.contains("404"), "\(run.stderr)")
        let junk = data.path + "/junk.json"
        try "not json".write(toFile: junk, atomically: true, encoding: .utf8)
        run = try lifecycledCommand(["check", "ios-app", junk], port: server.port)
        #expect(run.status == 2 && run.stderr.contains("junk.json"), "a file that is no trace is a bad command line: \(run.stderr)")
    }

    @Test("post --queue with the service down prints queued and exits 0; flush exits 1 keeping them; once it is up flush delivers them in order, exit 0")
    func queueThenFlush() throws {
        let data = TemporaryDirectory()
        let queue = data.path + "/queue"
        let port = freePort()
        let events = ["didFinishLaunching", "willConnectToWindow", "didBecomeActive", "didEnterBackground"]
        for (index, event) in events.enumerated() {
            let run = try lifecycledCommand(["post", "--queue", queue, "--ran", "item-\(index)", "queued-1", event] + (index == 1 ? ["window=main"] : []), port: port)
            #expect(run.status == 0 && run.stdout == "queued\n", "\(run.stdout) \(run.stderr)")
        }
        var run = try lifecycledCommand(["flush", "--queue", queue], port: port)
        #expect(run.status == 1, "unreachable: items kept: \(run.stdout) \(run.stderr)")
        #expect(run.stdout == "0\n" && !run.stderr.isEmpty, "\(run.stdout)")

        let server = try LifecycledProcess.serving(dataDirectory: data.path + "/data", port: port)
        let c = try WireClient(port: port)
        try c.makeInstance("queued-1")
        run = try lifecycledCommand(["flush", "--queue", queue], port: port)
        #expect(run.status == 0 && run.stdout == "\(events.count)\n", "\(run.stdout) \(run.stderr)")
        let history = try c.fullHistory("queued-1")
        #expect(history.compactMap { $0["event"] as? String } == events)
        #expect(history.compactMap { ($0["ranHooks"] as? [String])?.first } == events.indices.map { "item-\($0)" })
        run = try lifecycledCommand(["flush", "--queue", queue], port: port)
        #expect(run.status == 0 && run.stdout == "0\n", "an empty queue: \(run.stdout) \(run.stderr)")

        // With the service up, post --queue delivers at once and prints the record (3 when unexpected).
        run = try lifecycledCommand(["post", "--queue", queue, "queued-1", "willEnterForeground"], port: port)
        #expect(run.status == 0 && jsonObject(run.stdout)["event"] as? String == "willEnterForeground", "\(run.stdout) \(run.stderr)")
        run = try lifecycledCommand(["post", "--queue", queue, "queued-1", "didFinishLaunching"], port: port)
        #expect(run.status == 3 && jsonObject(run.stdout)["outcome"] as? String == "unexpected", "\(run.stdout) \(run.stderr)")
        run = try lifecycledCommand(["post", "--queue", queue, "nobody", "didFinishLaunching"], port: port)
        #expect(run.status == 1 && run.stderr.contains("/problems/not-found"), "refused on its merits: not kept: \(run.stderr)")
        run = try lifecycledCommand(["flush", "--queue", queue], port: port)
        #expect(run.status == 0 && run.stdout == "0\n", "\(run.stdout) \(run.stderr)")
        #expect(try c.fullHistory("queued-1").count == events.count + 2)
        _ = server
    }

    @Test("tail prints one line per record, readable or --json, filtered, and resumes by itself across a restart of the service")
    func tail() throws {
        let data = TemporaryDirectory()
        var server = try LifecycledProcess.serving(dataDirectory: data.path)
        let port = server.port
        var c = try WireClient(port: port)
        try c.makeInstance("watched")
        try c.makeInstance("other", events: ["didFinishLaunching"])
        let json = try LifecycledProcess(arguments: ["tail", "--json", "--instance", "watched", "--after", "0"], environment: ["LIFECYCLED_SERVER": "http://127.0.0.1:\(port)"])
        // From the start (`--after 0`), not from now: a tail from now would miss an event posted
        // before its stream is open, and nothing tells the test when that is.
        let readable = try LifecycledProcess(
            arguments: ["tail", "--outcome", "unexpected", "--after", "0"], environment: ["LIFECYCLED_SERVER": "http://127.0.0.1:\(port)"]
        )
        func lines(_ process: LifecycledProcess) -> [String] { process.standardOutputSoFar.split(separator: "\n").map(String.init) }

        _ = try c.makeInstance("watched", events: coldStart)
        // Its creation, then a record a line.
        #expect(eventually(within: 10) { lines(json).count == 4 }, "\(json.standardOutputSoFar) \(json.standardErrorSoFar)")
        #expect(try c.event("other", #"{"event": "didFinishLaunching"}"#).status == 409)
        #expect(eventually(within: 10) { lines(readable).count == 1 }, "\(readable.standardOutputSoFar) \(readable.standardErrorSoFar)")
        let line = lines(readable).first ?? ""
        #expect(line.contains("other") && line.contains("didFinishLaunching") && line.contains("launching") && line.contains("unexpected"), "\(line)")

        server.signal(SIGTERM)
        #expect(server.finish().status == 0)
        #expect(eventually(within: 10) { json.standardErrorSoFar.contains("trying again until it answers") }, "the outage told: \(json.standardErrorSoFar)")
        server = try LifecycledProcess.serving(dataDirectory: data.path, port: port)
        c = try WireClient(port: port)
        #expect(try c.event("watched", #"{"event": "didEnterBackground"}"#).status == 200)
        #expect(try c.event("watched", #"{"event": "willEnterForeground"}"#).status == 200)
        #expect(eventually(within: 20) { lines(json).count == 6 }, "resumed after the restart: \(json.standardOutputSoFar) \(json.standardErrorSoFar)")
        let printed = lines(json).map(jsonObject)
        #expect(printed.first?["kind"] as? String == "created", "\(printed)")
        let records = Array(printed.dropFirst())
        #expect(records.compactMap { $0["version"] as? Int } == [1, 2, 3, 4, 5], "every record once, in order")
        #expect(Set(records.compactMap { $0["instance"] as? String }) == ["watched"])
        let told = json.standardErrorSoFar.split(separator: "\n").filter { $0.hasPrefix("lifecycled tail: ") && $0.contains("trying again") }
        #expect(told.count == 1, "once an outage, however many attempts: \(json.standardErrorSoFar)")
        // A gap's line says how many inputs the device dropped.
        #expect(try c.request("POST", "/v1/instances/watched/gaps", json: #"{"dropped": 7}"#).status == 200)
        let seen = String(records.last?["sequence"] as? Int ?? 0), state = records.last?["to"] as? String ?? ""
        let gaps = try LifecycledProcess(arguments: ["tail", "--instance", "watched", "--after", seen], environment: ["LIFECYCLED_SERVER": "http://127.0.0.1:\(port)"])
        #expect(eventually(within: 10) { lines(gaps).count == 1 }, "\(gaps.standardOutputSoFar) \(gaps.standardErrorSoFar)")
        #expect(lines(gaps).first?.hasSuffix(" watched v6 gap dropped=7 \(state) -> \(state) stayed []") == true, "\(lines(gaps))")
        for process in [json, readable, gaps] { process.signal(SIGTERM) }
        #expect(json.finish().status == SIGTERM && readable.finish().status == SIGTERM && gaps.finish().status == SIGTERM, "the usual signals end it")
    }
}
