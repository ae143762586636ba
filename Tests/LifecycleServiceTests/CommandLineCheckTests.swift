import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
import LifecycleTestSupport
import Testing

/// A JUnit report as a CI reads it: each test case's name and, if it failed, its failure's
/// message and text. Foundation's XML parser reads it, so what it cannot parse fails the test.
private final class JUnitReader: NSObject, XMLParserDelegate {
    struct TestCase: Equatable {
        var name: String
        var classname: String
        var failureMessage: String?
        var failureText = ""
        /// A check that could not run: its `<error>`'s message.
        var errorMessage: String?
    }

    var suites: [[String: String]] = []
    var cases: [TestCase] = []
    private var inFailure = false

    static func read(_ path: String) throws -> JUnitReader {
        let reader = JUnitReader()
        let parser = XMLParser(data: try Data(contentsOf: URL(fileURLWithPath: path)))
        parser.delegate = reader
        #expect(parser.parse(), "\(path) is not XML: \(String(describing: parser.parserError))")
        return reader
    }

    func parser(_ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?, attributes: [String: String]) {
        switch name {
        case "testsuite": suites.append(attributes)
        case "testcase": cases.append(TestCase(name: attributes["name"] ?? "", classname: attributes["classname"] ?? ""))
        case "failure":
            inFailure = true
            cases[cases.count - 1].failureMessage = attributes["message"]
        case "error": cases[cases.count - 1].errorMessage = attributes["message"]
        default: break
        }
    }

    func parser(_ parser: XMLParser, foundCharacters string: String) {
        if inFailure { cases[cases.count - 1].failureText += string }
    }

    func parser(_ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?) {
        if name == "failure" { inFailure = false }
    }
}

/// The lines of `text`.
private func lines(_ text: String) -> [String] { text.split(separator: "\n").map(String.init) }

/// `lifecycled check` for CI, `post --queue` checked before it queues, `tail` saying what
/// diverged (issue 33, points 1, 4 and 5).
@Suite("the command line checks instances, files and queued input", .serialized)
struct CommandLineCheckTests {
    /// An instance whose history shows each kind of problem; its sequence numbers by event.
    private static func troubled(_ c: WireClient, _ id: String) throws -> [Int] {
        var sequences: [Int] = []
        func note(_ response: HTTPResponse) {
            let json = response.json
            sequences.append((json["record"] as? [String: Any] ?? json)["sequence"] as? Int ?? -1)
        }
        try c.makeInstance(id, events: ["didFinishLaunching", "willConnectToWindow"])
        note(try c.event(id, #"{"event": "didFinishLaunching"}"#))
        note(try c.request("POST", "/v1/instances/\(id)/relaunches"))
        note(try c.event(id, #"{"event": "didFinishLaunching"}"#))
        note(try c.event(id, #"{"event": "willConnectToWindow", "window": "main"}"#))
        note(try c.event(id, #"{"event": "didBecomeActive", "believedState": "background", "ranHooks": ["Foreground.onTransition", "<&\"'>\u001b[2J"]}"#))
        note(try c.request("POST", "/v1/instances/\(id)/gaps", json: #"{"dropped": 2}"#))
        return sequences
    }

    @Test("check --instance: 0 and clean; 1 listing each problem with its sequence number, what happened and what the model expects; --junit")
    func checkInstances() throws {
        let data = TemporaryDirectory()
        let server = try LifecycledProcess.serving(dataDirectory: data.path + "/data")
        let c = try WireClient(port: server.port)
        try c.makeInstance("good", events: coldStart)
        try c.makeInstance("half", events: ["didFinishLaunching", "willConnectToWindow"])
        let s = try Self.troubled(c, "bad")
        let halfEnd = try #require(c.fullHistory("half").last?["sequence"] as? Int)

        var run = try lifecycledCommand(["check", "--instance", "good"], port: server.port)
        #expect(run.status == 0 && run.stdout == "checked 1 instance, 3 records: clean\n", "\(run.stdout) \(run.stderr)")

        let report = data.path + "/report.xml"
        run = try lifecycledCommand(["check", "--instance", "good", "--instance", "bad", "--instance", "half", "--junit", report], port: server.port)
        #expect(run.status == 1, "\(run.stdout) \(run.stderr)")
        let expected = [
            "bad seq \(s[0]): unexpected: didFinishLaunching in connected; the model expects didBecomeActive, didEnterBackground, willEnterForeground, willConnectToWindow in connected",
            "bad seq \(s[2]): incompleteLaunch: didFinishLaunching started a launch while the one before was left at step ui-attached (a scene connected); the model expects the launch before to reach foreground or background",
            "bad seq \(s[4]): divergence: after didBecomeActive the app believed it was in background; the model expects foreground",
            "bad seq \(s[4]): divergence: for didBecomeActive the app ran Foreground.onTransition, <&\"'>\\u{1B}[2J (missing Foreground.didReturn; extra <&\"'>\\u{1B}[2J); the model expects Foreground.onTransition, Foreground.didReturn",
            "bad seq \(s[5]): gap: the app's reporter dropped 2 inputs before delivering them; the model expects every input delivered",
            "half seq \(halfEnd): incompleteLaunch: it ends part-way through a launch, at step ui-attached (a scene connected); the model expects the launch to reach foreground or background",
        ]
        #expect(lines(run.stdout) == expected + ["checked 3 instances, 13 records: 6 problems in 2 instances"], "\(run.stdout)")

        // The report: one test case per instance, in order; the failed ones with their problems,
        // what the device sent escaped as on standard output (XML cannot hold an ESC at all).
        let junit = try JUnitReader.read(report)
        #expect(junit.suites.first?["tests"] == "3" && junit.suites.first?["failures"] == "2", "\(junit.suites)")
        #expect(junit.cases.map(\.name) == ["good", "bad", "half"] && junit.cases.allSatisfy { $0.classname == "lifecycle.ios-app" })
        #expect(junit.cases[0].failureMessage == nil && junit.cases[1].failureMessage == "5 problems in 8 records" && junit.cases[2].failureMessage == "1 problem in 2 records")
        #expect(lines(junit.cases[1].failureText) == expected.prefix(5).map { String($0.dropFirst("bad ".count)) }, "\(junit.cases[1].failureText)")

        run = try lifecycledCommand(["check", "--instance", "good", "--instance", "nobody"], port: server.port)
        #expect(run.status == 1 && run.stderr.contains("404") && run.stdout.isEmpty, "\(run.stdout) \(run.stderr)")
        // A check that could not run replaces the report an earlier run left: CI would publish that one.
        run = try lifecycledCommand(["check", "--instance", "nobody", "--junit", report], port: server.port)
        let refused = try JUnitReader.read(report)
        #expect(run.status == 1 && refused.suites.first?["errors"] == "1" && refused.suites.first?["failures"] == "0", "\(refused.suites)")
        #expect(refused.cases.count == 1 && refused.cases[0].errorMessage == #"404 Not Found: no instance "nobody""#, "\(refused.cases)")
    }

    @Test("check --instance: what the counters count beyond the records retention kept is a problem; a cut history whose counters agree is clean")
    func checkCountsWhatRetentionDropped() throws {
        let data = TemporaryDirectory()
        let server = try LifecycledProcess.serving(dataDirectory: data.path + "/data", extra: ["--history-limit", "8"])
        let c = try WireClient(port: server.port)
        try c.makeInstance("cut", events: coldStart + ["didFinishLaunching"])
        try c.makeInstance("fine", events: coldStart)
        for id in ["cut", "fine"] {
            for _ in 0..<30 { _ = try c.event(id, #"{"event": "willResignActive"}"#) }
        }
        let kept = try c.fullHistory("cut")
        try #require(!kept.contains { $0["outcome"] as? String == "unexpected" } && kept.count < 33, "retention dropped the unexpected record: \(kept.count)")
        let first = try #require(kept.first?["sequence"] as? Int)

        var run = try lifecycledCommand(["check", "--instance", "cut"], port: server.port)
        #expect(run.status == 1, "\(run.stdout) \(run.stderr)")
        #expect(lines(run.stdout) == [
            "cut seq \(first): unexpected: 1 unexpected event in older records retention dropped (counted on the instance); the model expects no unexpected event",
            "checked 1 instance, \(kept.count) records: 1 problem in 1 instance",
        ], "\(run.stdout)")
        run = try lifecycledCommand(["check", "--instance", "fine"], port: server.port)
        #expect(run.status == 0 && run.stdout.hasSuffix(": clean\n"), "\(run.stdout) \(run.stderr)")
    }

    @Test("check MODEL FILE: a saved history page is checked as recorded; a trace that stops part-way through a launch is an incomplete launch; counts say 1 step")
    func checkFiles() throws {
        let data = TemporaryDirectory()
        let server = try LifecycledProcess.serving(dataDirectory: data.path + "/data")
        let c = try WireClient(port: server.port)
        let s = try Self.troubled(c, "bad")

        let page = data.path + "/page.json"
        try Data(try c.request("GET", "/v1/instances/bad/history").body).write(to: URL(fileURLWithPath: page))
        var run = try lifecycledCommand(["check", "ios-app", page], port: server.port)
        #expect(run.status == 1, "\(run.stdout) \(run.stderr)")
        let fromInstance = try lifecycledCommand(["check", "--instance", "bad"], port: server.port)
        #expect(lines(run.stdout).dropLast() == lines(fromInstance.stdout).dropLast().map { String($0.dropFirst("bad ".count)) }, "the same problems: \(run.stdout)")
        #expect(lines(run.stdout).first?.hasPrefix("seq \(s[0]): unexpected: ") == true && lines(run.stdout).last == "\(page): 8 records, 5 problems")

        func trace(_ name: String, _ json: String) throws -> String {
            try json.write(toFile: data.path + "/" + name, atomically: true, encoding: .utf8)
            return data.path + "/" + name
        }
        let junit = data.path + "/trace.xml"
        run = try lifecycledCommand(
            ["check", "--junit", junit, "ios-app", try trace("half.json", #"[{"event": "didFinishLaunching"}, {"event": "willConnectToWindow", "window": "main"}]"#)],
            port: server.port)
        #expect(run.status == 1, "not plainly conforming: \(run.stdout) \(run.stderr)")
        #expect(lines(run.stdout) == [
            "step 1: incompleteLaunch: it ends part-way through a launch, at step ui-attached (a scene connected); the model expects the launch to reach foreground or background",
            "not conforming: 1 problem in 2 steps, final state connected, rows r2 r4",
        ], "\(run.stdout)")
        let report = try JUnitReader.read(junit)
        #expect(report.cases.map(\.name) == [data.path + "/half.json"] && report.cases.first?.failureMessage == "1 problem in 2 records")

        run = try lifecycledCommand(["check", "ios-app", try trace("one.json", #"{"steps": [{"relaunch": true}]}"#)], port: server.port)
        #expect(run.status == 0 && run.stdout == "conforming: 1 step, final state initializing\n", "\(run.stdout) \(run.stderr)")

        // A step's stated belief the replay disagrees with is a divergence, as a recorded one is.
        let believed = #"[{"event": "didFinishLaunching"}, {"event": "willConnectToWindow", "window": "main"}, {"event": "didBecomeActive", "believedState": "background"}]"#
        run = try lifecycledCommand(["check", "ios-app", try trace("belief.json", believed)], port: server.port)
        #expect(run.status == 1, "\(run.stdout) \(run.stderr)")
        #expect(lines(run.stdout) == [
            "step 2: divergence: after didBecomeActive the app believed it was in background; the model expects foreground",
            "not conforming: 1 problem in 3 steps, final state foreground, rows r2 r4 r5",
        ], "\(run.stdout)")

        // A page more records follow, and another model's history, cannot be checked as the history.
        let partial = data.path + "/partial.json"
        try Data(try c.request("GET", "/v1/instances/bad/history?limit=2").body).write(to: URL(fileURLWithPath: partial))
        run = try lifecycledCommand(["check", "ios-app", partial], port: server.port)
        #expect(run.status == 2 && run.stdout.isEmpty && run.stderr.contains("is one page of a longer history") && lines(run.stderr).count == 1, "\(run.stderr)")
        run = try lifecycledCommand(["check", "android-activity", page], port: server.port)
        #expect(run.status == 2 && run.stdout.isEmpty && run.stderr.contains("is not the history of an instance of android-activity: seq "), "\(run.stderr)")

        // Not JSON as RFC 8259 writes it: a bad input, exit 2, whatever Foundation would take.
        for (name, text) in [
            ("comma.json", #"[{"event": "didFinishLaunching"},]"#), ("member.json", #"{"steps": [{"relaunch": true}],}"#),
            ("line.json", "// a trace\n[]"), ("block.json", #"[/* none */]"#), ("twice.json", #"{"steps": [], "steps": []}"#),
            ("notpage.json", #"{"items": [{"sequence": 1}]}"#), ("neither.json", #"{"trace": []}"#),
        ] {
            run = try lifecycledCommand(["check", "ios-app", try trace(name, text)], port: server.port)
            #expect(run.status == 2 && run.stdout.isEmpty && run.stderr.contains(name) && lines(run.stderr).count == 1, "\(name): \(run.stdout) \(run.stderr)")
        }
    }

    @Test("check waits: until the marker input is recorded, until quiet, bounded by --timeout (exit 1 naming what it waited for)")
    func waits() throws {
        let data = TemporaryDirectory()
        let server = try LifecycledProcess.serving(dataDirectory: data.path + "/data")
        let c = try WireClient(port: server.port)
        let environment = ["LIFECYCLED_SERVER": "http://127.0.0.1:\(server.port)"]

        // Started before the instance exists, as a UI test's check may be while the app's queue is undelivered.
        let marker = try LifecycledProcess(arguments: ["check", "--instance", "w1", "--until-input", "didEnterBackground", "--timeout", "30s"], environment: environment)
        try c.makeInstance("w1", events: coldStart + ["didEnterBackground"])
        var run = marker.finish(within: 40)
        #expect(run.status == 0 && run.stdout == "checked 1 instance, 4 records: clean\n", "\(run.stdout) \(run.stderr)")

        let quiet = try LifecycledProcess(arguments: ["check", "--instance", "q1", "--quiet-for", "4s", "--timeout", "30s"], environment: environment)
        try c.makeInstance("q1", events: coldStart)
        run = quiet.finish(within: 40)
        #expect(run.status == 0 && run.stdout == "checked 1 instance, 3 records: clean\n", "\(run.stdout) \(run.stderr)")

        run = try lifecycledCommand(["check", "--instance", "w1", "--until-input", "willEnterForeground", "--timeout", "300ms"], port: server.port)
        #expect(run.status == 1 && run.stdout.isEmpty && run.stderr == "lifecycled check: not willEnterForeground recorded within 0.3 s: still waiting for w1\n", "\(run.stderr)")

        for (arguments, reason) in [
            (["--instance", "w1", "--timeout", "5s"], "--timeout bounds a wait"),
            (["--instance", "w1", "--quiet-for", "soon"], "--quiet-for"),
            (["--instance", "w1", "--quiet-for", "0"], "above 0"),
            (["--instance", "w1", "--quiet-for", "1s", "--until-input", "x"], "give one"),
            (["--quiet-for", "1s", "ios-app", "trace.json"], "not for a FILE"),
            (["--instance", "w1", "--label", "run=1"], "give one"),
            (["--label", "run"], "KEY=VALUE"),
            (["--instance", "w1", "ios-app"], "alone"),
            // What only the service can refuse: a marker no model has, a label it cannot take.
            (["--instance", "w1", "--until-input", "testEnded"], "no model on the service has an event or action testEnded"),
            (["--label", "bad key=1"], "must be key=value"),
        ] {
            run = try lifecycledCommand(["check"] + arguments, port: server.port)
            #expect(run.status == 2 && run.stderr.contains(reason) && lines(run.stderr).count == 1, "\(arguments): \(run.stderr)")
        }
    }

    @Test("check --label: every instance carrying the label, and only those; none is exit 1 (needs the labels of GET /v1/instances?label=)")
    func checkByLabel() throws {
        let data = TemporaryDirectory()
        let server = try LifecycledProcess.serving(dataDirectory: data.path + "/data")
        let c = try WireClient(port: server.port)
        for (id, run) in [("run-a1", "a"), ("run-a2", "a"), ("run-b1", "b")] {
            #expect(try c.request("PUT", "/v1/instances/\(id)", json: #"{"model": "ios-app", "labels": {"run": "\#(run)"}}"#).status == 201)
        }
        _ = try c.event("run-a1", #"{"event": "didFinishLaunching"}"#)
        _ = try c.event("run-a1", #"{"event": "willConnectToWindow", "window": "main"}"#)
        _ = try c.event("run-a1", #"{"event": "didBecomeActive"}"#)
        _ = try c.event("run-a2", #"{"event": "didBecomeActive"}"#)
        _ = try c.event("run-b1", #"{"event": "didBecomeActive"}"#)

        var run = try lifecycledCommand(["check", "--label", "run=a"], port: server.port)
        #expect(run.status == 1, "\(run.stdout) \(run.stderr)")
        #expect(lines(run.stdout).map { $0.split(separator: " ").first.map(String.init) ?? "" } == ["run-a2", "checked"], "\(run.stdout)")
        #expect(lines(run.stdout).last == "checked 2 instances, 4 records: 1 problem in 1 instance", "\(run.stdout)")
        let report = data.path + "/report.xml"
        run = try lifecycledCommand(["check", "--label", "run=nobody", "--junit", report], port: server.port)
        #expect(run.status == 1 && run.stderr == "lifecycled check: no instance carries run=nobody\n", "\(run.stdout) \(run.stderr)")
        // Not a report of nothing failed: a rig that reported nothing is a failure.
        let junit = try JUnitReader.read(report)
        #expect(junit.suites.first?["tests"] == "1" && junit.suites.first?["failures"] == "1", "\(junit.suites)")
        #expect(junit.cases.map(\.name) == ["run=nobody"] && junit.cases.first?.failureMessage == "no instance carries run=nobody", "\(junit.cases)")
    }

    @Test("post --queue and flush on a file: not queued, exit 1, and exit 2, each saying it is a file")
    func queueOnAFile() throws {
        let data = TemporaryDirectory()
        let file = data.path + "/queue"
        try Data().write(to: URL(fileURLWithPath: file))
        var run = try lifecycledCommand(["post", "--queue", file, "phone", "didBecomeActive"], port: freePort())
        #expect(run.status == 1 && run.stderr == "lifecycled post: not queued: \(file) is a file, not a queue folder\n", "\(run.stderr)")
        run = try lifecycledCommand(["flush", "--queue", file], port: freePort())
        #expect(run.status == 2 && run.stderr.hasPrefix("lifecycled flush: \(file) is a file, not a queue folder"), "\(run.stderr)")
    }

    @Test("post --queue checks the input against the instance's model (the service's, else the folder's copy): a name it lacks exits 2 naming the closest, nothing queued")
    func queueChecks() throws {
        let data = TemporaryDirectory()
        try keypadModel.write(toFile: data.path + "/keypad.json", atomically: true, encoding: .utf8)
        let port = freePort()
        let queue = data.path + "/queue"
        var server: LifecycledProcess? = try LifecycledProcess.serving(dataDirectory: data.path + "/data", extra: ["--models-dir", data.path], port: port)
        let c = try WireClient(port: port)
        try c.makeInstance("phone")
        try c.makeInstance("pad", model: "keypad")

        var run = try lifecycledCommand(["post", "--queue", queue, "phone", "didBecomeActiv"], port: port)
        #expect(run.status == 2 && run.stdout.isEmpty && run.stderr.contains("did you mean \"didBecomeActive\"") && run.stderr.contains("nothing queued"), "\(run.stderr)")
        run = try lifecycledCommand(["post", "--queue", queue, "pad", "enter", "code=1234"], port: port)
        #expect(run.status == 0 && jsonObject(run.stdout)["to"] as? String == "open", "delivered, and the model kept: \(run.stdout) \(run.stderr)")
        #expect(try c.fullHistory("phone").isEmpty, "the typo was not queued, so not delivered with the queue")

        // The service is gone: the folder's copy of the user's model checks.
        server?.signal(SIGTERM)
        #expect(server?.finish().status == 0)
        server = nil
        run = try lifecycledCommand(["post", "--queue", queue, "pad", "entr", "code=1"], port: port)
        #expect(run.status == 2 && run.stderr.contains("did you mean \"enter\"") && run.stderr.contains("nothing queued"), "\(run.stderr)")
        run = try lifecycledCommand(["post", "--queue", queue, "pad", "enter", "cod=1"], port: port)
        #expect(run.status == 2 && run.stderr.contains("\"cod\"") && run.stderr.contains("did you mean \"code\""), "\(run.stderr)")
        run = try lifecycledCommand(["post", "--queue", queue, "pad", "enter", "code=1"], port: port)
        #expect(run.status == 0 && run.stdout == "queued\n", "\(run.stdout) \(run.stderr)")
        // A queued create names the model for what follows it.
        run = try lifecycledCommand(["create", "--queue", queue, "tablet", "ios-app"], port: port)
        #expect(run.status == 0 && run.stdout == "queued\n", "\(run.stderr)")
        run = try lifecycledCommand(["action", "--queue", queue, "tablet", "openUR", "url=https://example.com"], port: port)
        #expect(run.status == 2 && run.stderr.contains("did you mean \"openURL\""), "\(run.stderr)")
        run = try lifecycledCommand(["action", "--queue", queue, "tablet", "openURL"], port: port)
        #expect(run.status == 2 && run.stderr.contains("requires parameter \"url\""), "\(run.stderr)")
        // Only the built-in models at hand, the instance's model unknown: queued, with a warning.
        run = try lifecycledCommand(["post", "--queue", queue, "stranger", "customEvent"], port: port)
        #expect(run.status == 0 && run.stdout == "queued\n" && run.stderr.contains("queued unchecked") && lines(run.stderr).count == 1, "\(run.stdout) \(run.stderr)")

        server = try LifecycledProcess.serving(dataDirectory: data.path + "/data", extra: ["--models-dir", data.path], port: port)
        run = try lifecycledCommand(["flush", "--queue", queue], port: port)
        // pad's enter (unexpected in open), tablet's create, stranger's event (refused: no such instance).
        #expect(run.stdout == "3\n", "only what passed the check was queued: \(run.stdout) \(run.stderr)")

        let missing = data.path + "/no-such-queue"
        run = try lifecycledCommand(["flush", "--queue", missing], port: port)
        #expect(run.status == 2 && run.stderr.contains(missing) && lines(run.stderr).count == 1, "\(run.stderr)")
        #expect(!FileManager.default.fileExists(atPath: missing), "nothing created")
        _ = server
    }

    @Test("tail: a divergent record's line says the believed state beside the actual one and the missing and extra hooks; --json is the record as stored")
    func tailSaysWhatDiverged() throws {
        let data = TemporaryDirectory()
        let server = try LifecycledProcess.serving(dataDirectory: data.path)
        let c = try WireClient(port: server.port)
        try c.makeInstance("d1", events: coldStart)
        _ = try c.event("d1", #"{"event": "willResignActive", "believedState": "background", "ranHooks": ["Foreground.willLeave", "Foreground.willLeave"]}"#)
        _ = try c.event("d1", #"{"event": "didEnterBackground", "ranHooks": ["Background.didReturn"]}"#)
        let environment = ["LIFECYCLED_SERVER": "http://127.0.0.1:\(server.port)"]
        let readable = try LifecycledProcess(arguments: ["tail", "--instance", "d1", "--divergent", "--after", "0"], environment: environment)
        let json = try LifecycledProcess(arguments: ["tail", "--instance", "d1", "--divergent", "--json", "--after", "0"], environment: environment)
        #expect(eventually(within: 10) { lines(readable.standardOutputSoFar).count == 2 && lines(json.standardOutputSoFar).count == 2 })
        let shown = lines(readable.standardOutputSoFar)
        #expect(shown.first?.hasSuffix(
            " d1 v4 event willResignActive foreground -> foreground stayed [Foreground.willLeave] divergent believed=background actual=foreground extra=[Foreground.willLeave]"
        ) == true, "\(shown)")
        #expect(shown.last?.hasSuffix(" divergent missing=[Background.onTransition]") == true, "\(shown)")

        let stored = try c.fullHistory("d1").filter { $0["divergence"] != nil }
        let printed = lines(json.standardOutputSoFar).map(jsonObject)
        #expect(printed.count == 2 && zip(printed, stored).allSatisfy { NSDictionary(dictionary: $0) == NSDictionary(dictionary: $1) }, "\(printed) \(stored)")
        for process in [readable, json] { process.signal(SIGTERM) }
        #expect(readable.finish().status == SIGTERM && json.finish().status == SIGTERM)
    }

    @Test("tail: an instance deleted and made again shows as two lives, its creations and deletion on lines of their own")
    func tailShowsCreationAndDeletion() throws {
        let data = TemporaryDirectory()
        let server = try LifecycledProcess.serving(dataDirectory: data.path)
        let c = try WireClient(port: server.port)
        try c.makeInstance("twice", events: ["didFinishLaunching"])
        #expect(try c.request("DELETE", "/v1/instances/twice").status == 204)
        try c.makeInstance("twice")
        let environment = ["LIFECYCLED_SERVER": "http://127.0.0.1:\(server.port)"]
        let readable = try LifecycledProcess(arguments: ["tail", "--instance", "twice", "--after", "0"], environment: environment)
        let json = try LifecycledProcess(arguments: ["tail", "--instance", "twice", "--json", "--after", "0"], environment: environment)
        #expect(eventually(within: 10) { lines(readable.standardOutputSoFar).count == 4 && lines(json.standardOutputSoFar).count == 4 })
        let shown = lines(readable.standardOutputSoFar).map { $0.split(separator: " ").dropFirst().prefix(5).joined(separator: " ") }
        #expect(shown == [
            "twice v0 created ios-app initializing", "twice v1 event didFinishLaunching initializing", "twice v1 deleted ios-app launching",
            "twice v0 created ios-app initializing",
        ], "\(readable.standardOutputSoFar)")
        let printed = lines(json.standardOutputSoFar).map(jsonObject)
        #expect(printed.map { $0["kind"] as? String } == ["created", "event", "deleted", "created"], "\(printed)")
        #expect(printed[2].keys.sorted() == ["instance", "kind", "model", "sequence", "state", "time", "version"], "\(printed[2])")
        for process in [readable, json] { process.signal(SIGTERM) }
        #expect(readable.finish().status == SIGTERM && json.finish().status == SIGTERM)
    }
}
