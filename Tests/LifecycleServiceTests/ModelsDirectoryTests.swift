import Foundation
import LifecycleTestSupport
import Testing
@testable import LifecycleService

let doorModel = """
{"name": "door", "states": [{"name": "closed", "kind": "initial"}, {"name": "open", "kind": "permanent"}],
 "events": [{"name": "push"}, {"name": "pull"}],
 "transitions": [{"from": "closed", "event": "push", "to": "open", "hooks": ["Door.open"]},
                 {"from": "open", "event": "pull", "to": "closed", "hooks": ["Door.close"]}]}
"""

/// Starts the service in-process with `folder` as its models folder.
func startService(modelsDirectory folder: String) throws -> Service {
    var configuration = Configuration()
    configuration.port = 0
    configuration.dataDirectory = folder + "/data"
    configuration.modelsDirectory = folder
    return try Service(configuration: configuration)
}

@Suite("models from --models-dir")
struct ModelsDirectoryTests {
    @Test("a valid model file is served and runs instances")
    func validModel() throws {
        let models = TemporaryDirectory()
        try doorModel.write(toFile: models.path + "/door.json", atomically: true, encoding: .utf8)
        let server = try TestServer(.router) { $0.modelsDirectory = models.path }
        let c = server.router()
        let names = (try c.request("GET", "/v1/models").json["items"] as? [[String: Any]])?.compactMap { $0["name"] as? String }
        #expect(names == ["android-activity", "door", "ios-app"])
        try c.makeInstance("front", model: "door")
        let opened = try c.event("front", #"{"event": "push"}"#)
        #expect(opened.json["to"] as? String == "open" && opened.json["hooks"] as? [String] == ["Door.open"])
        #expect(try c.event("front", #"{"event": "push"}"#).status == 409)
    }

    @Test("stored instances of a model, or in a state, no longer loaded stop start-up, naming an instance; the data is kept")
    func instancesOfAModelNoLongerLoaded() throws {
        let models = TemporaryDirectory()
        let file = models.path + "/door.json"
        try doorModel.write(toFile: file, atomically: true, encoding: .utf8)
        let server = try TestServer(.router) { $0.modelsDirectory = models.path }
        try server.router().makeInstance("front", model: "door", events: ["push"])
        try server.router().makeInstance("back", model: "door")
        try server.router().makeInstance("app")

        server.configuration.modelsDirectory = nil
        #expect { try server.restart() } throws: { error in
            let message = "\(error)"
            return message.contains("uses model \"door\", which is not loaded")
                && (message.contains("instance \"front\"") || message.contains("instance \"back\""))
        }
        server.configuration.modelsDirectory = models.path
        try doorModel.replacingOccurrences(of: "open", with: "ajar").write(toFile: file, atomically: true, encoding: .utf8)
        #expect { try server.restart() } throws: { error in
            "\(error)".contains("instance \"front\" is in state \"open\", which model \"door\" does not have")
        }
        try doorModel.write(toFile: file, atomically: true, encoding: .utf8)
        try server.restart()
        #expect(try server.router().request("GET", "/v1/instances/front").json["state"] as? String == "open")
        #expect(try server.router().request("GET", "/v1/instances/back").json["state"] as? String == "closed")
    }

    @Test("an invalid model file stops start-up, naming the file and the problem")
    func invalidModel() throws {
        let models = TemporaryDirectory()
        try doorModel.replacingOccurrences(of: #""to": "closed""#, with: #""to": "shut""#)
            .write(toFile: models.path + "/door.json", atomically: true, encoding: .utf8)
        #expect {
            _ = try startService(modelsDirectory: models.path)
        } throws: { error in
            "\(error)" == "\(models.path)/door.json: row 2: unknown state \"shut\""
        }
        let run = try LifecycledProcess(arguments: ["--port", "0", "--data-dir", models.path + "/data2", "--models-dir", models.path]).finish()
        #expect(run.status == 1)
        #expect(run.stderr.contains("door.json: row 2: unknown state \"shut\""))
    }

    @Test("a model file may not redefine a built-in model")
    func duplicateName() throws {
        let models = TemporaryDirectory()
        try doorModel.replacingOccurrences(of: #""name": "door""#, with: #""name": "ios-app""#)
            .write(toFile: models.path + "/mine.json", atomically: true, encoding: .utf8)
        #expect {
            _ = try startService(modelsDirectory: models.path)
        } throws: { error in
            "\(error)".contains("model \"ios-app\" in \(models.path) is already defined")
        }
    }
}
