import Foundation
import LifecycleTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The CPU time (user and system) process `pid` has used, in seconds, from /proc/PID/stat.
func cpuSeconds(of pid: Int32) throws -> Double {
    let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
    // The command name (field 2) may hold spaces; the fields after its closing parenthesis do not.
    let fields = stat[stat.index(after: try #require(stat.lastIndex(of: ")")))...].split(separator: " ")
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    let ticks = try #require(Double(fields[11])) + #require(Double(fields[12]))
    return ticks / Double(sysconf(Int32(_SC_CLK_TCK)))
}

/// What the command line says about a write: the whole of a rig's queue from the shell, its
/// bounds, refusals that waiting will not cure, and what `tail` prints (issue 31, point 10).
@Suite("the command line says what happened", .serialized)
struct CommandLineOutcomeTests {
    @Test("post --queue with a wrong token exits 1 at once and says why, the item kept; flush with the right token delivers it")
    func wrongTokenIsNoOutage() throws {
        let data = TemporaryDirectory()
        let server = try LifecycledProcess.serving(dataDirectory: data.path + "/data", extra: ["--token", "rig-secret"])
        let c = try WireClient(port: server.port)
        _ = try c.request("PUT", "/v1/instances/guarded", headers: [("Authorization", "Bearer rig-secret")])
        let queue = data.path + "/queue"
        var run = try lifecycledCommand(["post", "--queue", queue, "--token", "wrong-token", "guarded", "didFinishLaunching"], port: server.port)
        #expect(run.status == 1 && run.stdout.isEmpty, "a 401 is no outage: \(run.stdout) \(run.stderr)")
        #expect(run.stderr.contains("401") && run.stderr.contains("waiting will not cure"), "\(run.stderr)")
        run = try lifecycledCommand(["create", "--queue", queue, "guarded"], port: server.port)
        #expect(run.status == 1 && run.stdout.isEmpty && run.stderr.contains("401"), "no token at all: \(run.stdout) \(run.stderr)")
        #expect(try c.fullHistory("guarded").isEmpty, "nothing stored")

        run = try lifecycledCommand(["flush", "--queue", queue], port: server.port, environment: ["LIFECYCLED_TOKEN": "rig-secret"])
        #expect(run.status == 0 && run.stdout == "2\n", "both kept and delivered: \(run.stdout) \(run.stderr)")
        #expect(try c.fullHistory("guarded").compactMap { $0["event"] as? String } == ["didFinishLaunching"])
    }

    @Test("create, action and relaunch: at once they print what was answered; with --queue they build a whole queue that flush delivers in order")
    func wholeQueueFromTheShell() throws {
        let data = TemporaryDirectory()
        let queue = data.path + "/queue"
        let port = freePort()
        let commands: [[String]] = [
            ["create", "--queue", queue, "rig-1", "ios-app"],
            ["post", "--queue", queue, "rig-1", "didFinishLaunching"],
            ["action", "--queue", queue, "--believed", "launching", "rig-1", "openURL", "url=https://example.com/a"],
            ["relaunch", "--queue", queue, "rig-1"],
        ]
        for arguments in commands {
            let run = try lifecycledCommand(arguments, port: port)
            #expect(run.status == 0 && run.stdout == "queued\n", "\(arguments): \(run.stdout) \(run.stderr)")
        }
        let server = try LifecycledProcess.serving(dataDirectory: data.path + "/data", port: port)
        let c = try WireClient(port: port)
        var run = try lifecycledCommand(["flush", "--queue", queue], port: port)
        #expect(run.status == 0 && run.stdout == "4\n", "\(run.stdout) \(run.stderr)")
        var history = try c.fullHistory("rig-1")
        #expect(history.compactMap { $0["kind"] as? String } == ["event", "action", "relaunch"], "\(history)")
        #expect(history.dropFirst().first?["action"] as? String == "openURL" && history.dropFirst().first?["believedState"] as? String == "launching")

        run = try lifecycledCommand(["create", "rig-2", "android-activity"], port: port)
        var answer = jsonObject(run.stdout)
        #expect(run.status == 0 && answer["id"] as? String == "rig-2" && answer["model"] as? String == "android-activity" && answer["created"] as? Bool == true,
                "\(run.stdout) \(run.stderr)")
        run = try lifecycledCommand(["create", "rig-2", "android-activity"], port: port)
        #expect(run.status == 0 && jsonObject(run.stdout)["created"] as? Bool == false, "found: \(run.stdout) \(run.stderr)")
        run = try lifecycledCommand(["create", "rig-2", "ios-app"], port: port)
        #expect(run.status == 1 && run.stdout.isEmpty && run.stderr.contains("409"), "another model: \(run.stderr)")
        run = try lifecycledCommand(["create", "rig-3"], port: port)
        #expect(run.status == 0 && jsonObject(run.stdout)["model"] as? String == "ios-app", "the service's default: \(run.stdout) \(run.stderr)")

        run = try lifecycledCommand(["action", "rig-1", "openURL", "url=https://example.com/b"], port: port)
        answer = jsonObject(run.stdout)
        #expect(run.status == 0 && answer["kind"] as? String == "action" && answer["disposition"] != nil, "\(run.stdout) \(run.stderr)")
        run = try lifecycledCommand(["action", "rig-1", "openURL"], port: port)
        #expect(run.status == 1 && run.stderr.contains("422"), "no url: \(run.stderr)")
        run = try lifecycledCommand(["relaunch", "rig-1"], port: port)
        #expect(run.status == 0 && jsonObject(run.stdout)["kind"] as? String == "relaunch", "\(run.stdout) \(run.stderr)")
        history = try c.fullHistory("rig-1")
        #expect(history.compactMap { $0["kind"] as? String } == ["event", "action", "relaunch", "action", "relaunch"], "the refusal stored nothing")
        _ = server
    }

    @Test("--max-items bounds a --queue command's journal: past it the oldest are dropped, said, and delivered as a gap before the rest")
    func queueBound() throws {
        let data = TemporaryDirectory()
        let queue = data.path + "/queue"
        let port = freePort()
        let events = ["didFinishLaunching", "didEnterBackground", "willEnterForeground"]
        var runs: [(status: Int32, stdout: String, stderr: String)] = []
        for event in events {
            runs.append(try lifecycledCommand(["post", "--queue", queue, "--max-items", "2", "bounded", event], port: port))
        }
        #expect(runs.allSatisfy { $0.status == 0 && $0.stdout == "queued\n" }, "\(runs)")
        #expect(runs[2].stderr.contains("dropped") && !runs[1].stderr.contains("dropped"), "the third is past the bound: \(runs.map(\.stderr))")

        let server = try LifecycledProcess.serving(dataDirectory: data.path + "/data", port: port)
        let c = try WireClient(port: port)
        try c.makeInstance("bounded")
        let run = try lifecycledCommand(["flush", "--queue", queue, "--max-items", "2"], port: port)
        #expect(run.status == 0, "\(run.stdout) \(run.stderr)")
        let history = try c.fullHistory("bounded")
        #expect(history.first?["kind"] as? String == "gap" && history.first?["dropped"] as? Int == 1, "\(history)")
        #expect(history.compactMap { $0["event"] as? String } == Array(events.dropFirst()))
        _ = server
    }

    @Test("a bad command line for the new commands and options exits 2 with the reason", arguments: [
        (["post", "a", "didFinishLaunching", "event=other"], "member of the request body"),
        (["action", "a", "openURL", "action=other"], "member of the request body"),
        (["action", "a", "openURL", "event=other"], "member of the request body"),
        (["action", "a", "openURL", "occurredAt=2026-01-01T00:00:00Z"], "--believed"),
        (["post", "--max-items", "3", "a", "didFinishLaunching"], "need --queue"),
        (["post", "--queue", "/tmp/q", "--max-bytes", "0", "a", "didFinishLaunching"], "--max-bytes"),
        (["flush", "--queue", "/tmp/q", "--max-items", "many"], "--max-items"),
        (["relaunch"], "needs INSTANCE"),
        (["relaunch", "a", "extra"], "INSTANCE alone"),
        (["relaunch", "--ran", "x", "a"], "unknown option --ran"),
        (["create", "a", "ios-app", "extra"], "at most a MODEL"),
        (["action", "a"], "needs INSTANCE and ACTION"),
    ])
    func badCommandLine(arguments: [String], reason: String) throws {
        let run = try lifecycledCommand(arguments, port: freePort())
        #expect(run.status == 2, "\(arguments) exited \(run.status): \(run.stderr)")
        #expect(run.stdout.isEmpty)
        #expect(run.stderr.split(separator: "\n").count == 1 && run.stderr.contains(reason), "\(arguments): \(run.stderr)")
    }

    @Test("a model may declare the other kind's name as a parameter: post sends action=VALUE for an event that declares it")
    func otherKindsNameDeclared() throws {
        let data = TemporaryDirectory()
        try """
        {"name": "door", "states": [{"name": "shut", "kind": "initial"}, {"name": "open", "kind": "permanent"}],
         "events": [{"name": "push", "parameters": [{"name": "action", "type": "string", "required": true}]}],
         "transitions": [{"from": "shut", "event": "push", "to": "open", "hooks": ["Door.open"]}]}
        """.write(toFile: data.path + "/door.json", atomically: true, encoding: .utf8)
        let server = try LifecycledProcess.serving(dataDirectory: data.path + "/data", extra: ["--models-dir", data.path])
        try WireClient(port: server.port).makeInstance("front", model: "door")
        var run = try lifecycledCommand(["post", "front", "push", "event=shove"], port: server.port)
        #expect(run.status == 2 && run.stderr.contains("member of the request body"), "the event's own name member: \(run.stderr)")
        run = try lifecycledCommand(["post", "front", "push", "action=shove"], port: server.port)
        #expect(run.status == 0, "\(run.stderr)")
        #expect((jsonObject(run.stdout)["parameters"] as? [String: Any])?["action"] as? String == "shove", "\(run.stdout)")
    }

    @Test("tail: what a device sent cannot repaint the terminal or forge a line; --json keeps the value, escaped")
    func tailEscapes() throws {
        let data = TemporaryDirectory()
        let server = try LifecycledProcess.serving(dataDirectory: data.path)
        let c = try WireClient(port: server.port)
        try c.makeInstance("forger", events: ["didFinishLaunching"])
        // ESC (a colour, then clear-screen), CR, LF and a forged record line, C1 CSI, NEL, the
        // line separator, a right-to-left override, DEL, a tab and a backslash.
        let window = "a\u{1B}[31mred\u{1B}[2J\rback\n99 forged v1 event x a -> b transitioned []\u{9B}2J\u{85}\u{2028}\u{202E}txt\u{7F}\t\\"
        let body = try JSONSerialization.data(withJSONObject: ["event": "willConnectToWindow", "window": window])
        #expect(try c.request("POST", "/v1/instances/forger/events", json: String(decoding: body, as: UTF8.self)).status == 200)

        let environment = ["LIFECYCLED_SERVER": "http://127.0.0.1:\(server.port)"]
        let readable = try LifecycledProcess(arguments: ["tail", "--instance", "forger", "--after", "0"], environment: environment)
        let json = try LifecycledProcess(arguments: ["tail", "--json", "--instance", "forger", "--after", "0"], environment: environment)
        // The instance's creation, then its two records.
        #expect(eventually { readable.standardOutputSoFar.hasSuffix("]\n") && json.standardOutputSoFar.split(separator: "\n").count == 3 })
        for process in [readable, json] { process.signal(SIGTERM) }
        let shown = readable.finish().stdout, printed = json.finish().stdout

        let lines = shown.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
        #expect(lines.count == 3, "one line per record and one for the creation: \(shown.debugDescription)")
        let controls = shown.unicodeScalars.filter { $0 != "\n" && ($0.value < 0x20 || (0x7F...0x9F).contains($0.value) || [0x2028, 0x202E].contains($0.value)) }
        #expect(controls.isEmpty, "nothing a terminal acts on: \(controls.map { String($0.value, radix: 16) })")
        let line = String(lines.last ?? "")
        #expect(line.contains(#"a\u{1B}[31mred\u{1B}[2J\rback\n99 forged v1 event x a -> b transitioned []\u{9B}2J\u{85}\u{2028}\u{202E}txt\u{7F}\t\\"#), "\(line)")
        #expect(line.hasSuffix("launching -> connected transitioned [Connected.init]"), "\(line)")

        let records = printed.split(separator: "\n")
        #expect(records.count == 3, "\(printed.debugDescription)")
        let raw = printed.unicodeScalars.filter { $0 != "\n" && ($0.value < 0x20 || (0x7F...0x9F).contains($0.value) || [0x2028, 0x202E].contains($0.value)) }
        #expect(raw.isEmpty, "--json escapes them too: \(raw.map { String($0.value, radix: 16) })")
        #expect((jsonObject(String(records.last ?? ""))["parameters"] as? [String: Any])?["window"] as? String == window, "the same value, read back")
    }

    @Test("an idle tail costs next to no CPU, and a record posted then still arrives at once")
    func idleTail() throws {
        let data = TemporaryDirectory()
        let server = try LifecycledProcess.serving(dataDirectory: data.path)
        let c = try WireClient(port: server.port)
        try c.makeInstance("quiet", events: ["didFinishLaunching"])
        let tail = try LifecycledProcess(
            arguments: ["tail", "--instance", "quiet", "--after", "0"], environment: ["LIFECYCLED_SERVER": "http://127.0.0.1:\(server.port)"]
        )
        // The creation and the stored record arriving say the stream is open: what follows is idle.
        #expect(eventually { tail.standardOutputSoFar.split(separator: "\n").count == 2 }, "\(tail.standardErrorSoFar)")
        let before = try cpuSeconds(of: tail.process.processIdentifier)
        let idleStart = Date()
        while Date().timeIntervalSince(idleStart) < 2 { usleep(100_000) }
        let used = try cpuSeconds(of: tail.process.processIdentifier) - before
        // A resource bound, not a timing: FoundationNetworking's stream spent about 2 s of CPU here.
        #expect(used < 0.1, "an idle tail used \(used) s of CPU in 2 s")

        #expect(try c.event("quiet", #"{"event": "willConnectToWindow", "window": "main"}"#).status == 200)
        #expect(eventually(within: 5) { tail.standardOutputSoFar.split(separator: "\n").count == 3 }, "\(tail.standardOutputSoFar)")
        tail.signal(SIGTERM)
        #expect(tail.finish().status == SIGTERM)
    }
}
