import Foundation
import LifecycleTestSupport
import Testing
@testable import LifecycleService

/// Where lifecycled finds the dashboard without `--public-dir`, and what `GET /` says when
/// it finds none (issue 21, item 2): the real executable, started outside the repository.
@Suite("Dashboard folder")
struct DashboardFolderTests {
    /// A folder holding a dashboard whose page says `name`.
    static func makeDashboard(at path: String, saying name: String) throws {
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        try "<!doctype html><title>\(name)</title>".write(toFile: path + "/index.html", atomically: true, encoding: .utf8)
    }

    @Test("the search order: <bin>/../share/lifecycled/Public, <bin>/Public, then ./Public")
    func candidates() {
        #expect(Service.dashboardCandidates(executable: "/usr/local/bin/lifecycled", workingDirectory: "/home/qa") == [
            "/usr/local/share/lifecycled/Public", "/usr/local/bin/Public", "/home/qa/Public",
        ])
    }

    @Test("started elsewhere with no dashboard to find: GET / is a 404 problem saying how to point at it, and the log says where it looked")
    func noneFound() throws {
        let root = TemporaryDirectory()
        let elsewhere = root.path + "/elsewhere"
        try FileManager.default.createDirectory(atPath: elsewhere, withIntermediateDirectories: true)
        let server = try LifecycledProcess.serving(dataDirectory: root.path + "/data", directory: elsewhere)
        defer { server.signal(SIGTERM); server.finish() }
        let c = try WireClient(port: server.port)
        let page = try c.request("GET", "/")
        #expect(page.status == 404 && page.header("content-type") == "application/problem+json")
        let detail = try #require(page.json["detail"] as? String)
        #expect(detail.contains("dashboard") && detail.contains("--public-dir") && detail.contains("LIFECYCLED_PUBLIC_DIR"), "\(detail)")
        // Other paths are plain 404s; the API is served as ever.
        #expect(try c.request("GET", "/app.css").json["detail"] as? String == "no resource at /app.css")
        #expect(try c.request("GET", "/v1/models").status == 200)
        let warning = try #require(server.waitForLogLine(containing: ["no dashboard folder found", "--public-dir"]))
        #expect(warning.contains(elsewhere + "/Public"), "\(warning)")
        #expect(server.waitForLogLine(containing: ["lifecycled started", "dashboard=none"]) != nil)
    }

    @Test("started in a folder that has Public: served from there, and the start line names it")
    func workingDirectory() throws {
        let root = TemporaryDirectory()
        try Self.makeDashboard(at: root.path + "/repo/Public", saying: "from the working directory")
        let server = try LifecycledProcess.serving(dataDirectory: root.path + "/data", directory: root.path + "/repo")
        defer { server.signal(SIGTERM); server.finish() }
        let page = try WireClient(port: server.port).request("GET", "/")
        #expect(page.status == 200 && page.text.contains("from the working directory"))
        #expect(server.waitForLogLine(containing: ["lifecycled started", "dashboard=\(root.path)/repo/Public"]) != nil, "\(server.standardErrorSoFar)")
    }

    @Test("installed as <prefix>/bin/lifecycled: <prefix>/share/lifecycled/Public wins over a Public folder where it is started")
    func installed() throws {
        let root = TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: root.path + "/prefix/bin", withIntermediateDirectories: true)
        // A hard link, not a symbolic one (which resolves to the build folder) nor a copy of a large binary.
        let installed = root.path + "/prefix/bin/lifecycled"
        try FileManager.default.linkItem(atPath: lifecycledPath, toPath: installed)
        try Self.makeDashboard(at: root.path + "/prefix/share/lifecycled/Public", saying: "installed dashboard")
        try Self.makeDashboard(at: root.path + "/home/Public", saying: "someone's shared files")
        let server = try LifecycledProcess.serving(dataDirectory: root.path + "/data", executable: installed, directory: root.path + "/home")
        defer { server.signal(SIGTERM); server.finish() }
        let page = try WireClient(port: server.port).request("GET", "/")
        #expect(page.status == 200 && page.text.contains("installed dashboard"), "\(page.text)")
        // --public-dir still names the folder itself.
        let pointed = try LifecycledProcess.serving(
            dataDirectory: root.path + "/data2", extra: ["--public-dir", root.path + "/home/Public"], executable: installed, directory: root.path
        )
        defer { pointed.signal(SIGTERM); pointed.finish() }
        #expect(try WireClient(port: pointed.port).request("GET", "/").text.contains("someone's shared files"))
    }
}
